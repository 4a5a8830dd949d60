import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// What keeps the set private: the run directory, the token, the keys of a tcp:// bus.
@Suite(.serialized) struct SecurityTests {
    /// Runs `arguments` as the user nobody (setpriv), or nil where that cannot be done.
    private func asNobody(_ arguments: [String], in directory: String) throws -> ChildProcess? {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return nil }
        let process = try ChildProcess(
            "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--"] + arguments, outputDirectory: directory, name: "nobody")
        try process.waitForExit(timeout: .seconds(20))
        return process
    }

    @Test func anotherUserCannotReachTheBusOrTheToken() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        var info = stat()
        #expect(stat(set.run.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700, "the run directory is \(String(info.st_mode & 0o777, radix: 8))")
        #expect(stat(set.run.path + "/gateway.token", &info) == 0 && info.st_mode & 0o777 == 0o600)

        // The output of processes run as nobody goes where nobody can write.
        let outputs = try TestRunDirectory()
        chmod(outputs.path, 0o777)
        guard
            let connect = try asNobody(
                ["/usr/bin/perl", "-MIO::Socket::UNIX", "-e", "IO::Socket::UNIX->new(Peer => $ARGV[0]) or die \"$!\\n\"", set.run.path + "/bus.out"],
                in: outputs.path)
        else {
            print("skipped: the check as another user needs root and setpriv")
            return
        }
        #expect(connect.status != 0, "nobody connected to the bus socket")
        #expect(connect.standardError.contains("Permission denied"), "\(connect.standardError)")
        let read = try #require(try asNobody(["/bin/cat", set.run.path + "/gateway.token"], in: outputs.path))
        #expect(read.status != 0 && read.standardError.contains("Permission denied"), "\(read.standardError)")
        let tap = try #require(try asNobody([Programs.path("tether-tap"), "--run-dir", set.run.path, "--count", "1"], in: outputs.path))
        #expect(tap.status != 0, "tether-tap ran as nobody against root's run directory")
        #expect(tap.standardError.contains("is not safe to use"), "\(tap.standardError)")
    }

    @Test func theTokenIsNowhereButItsFile() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let token = try set.gatewayToken
        #expect(token.count >= 32)
        let recording = set.run.path + "/everything.jsonl"
        let tap = try ChildProcess(Programs.path("tether-tap"), ["--run-dir", set.run.path, "--record", recording], outputDirectory: set.run.path)
        let listening = await eventually { ((try? String(contentsOfFile: recording, encoding: .utf8)) ?? "").contains("conn.state") }
        #expect(listening)
        // Traffic that touches the token: a message, a reconnect, a suspend and resume, a status.
        #expect(try set.tether(["send", "secret", "keeping"]).status == 0)
        #expect(try set.tether(["reconnect"]).status == 0)
        #expect(try set.tether(["suspend"]).status == 0)
        #expect(try set.tether(["resume"]).status == 0)
        #expect(try set.tether(["send", "after", "resume"]).status == 0)
        #expect(try set.tether(["status", "--json"]).status == 0)
        try await Task.sleep(for: .milliseconds(1500))
        tap.stop()

        // Every file of the run directory but the token's own: logs, databases and their
        // journals, the recording, the gateway's record, the tests' captured output.
        var scanned = 0
        let enumerator = FileManager.default.enumerator(atPath: set.run.path)
        while let relative = enumerator?.nextObject() as? String {
            let path = set.run.path + "/" + relative
            var isDirectory: ObjCBool = false
            guard relative != "gateway.token", FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                let data = FileManager.default.contents(atPath: path)
            else { continue }
            scanned += 1
            #expect(data.range(of: Data(token.utf8)) == nil, "the token is in \(relative)")
        }
        #expect(scanned >= 15, "only \(scanned) files scanned")
        print("token absent from \(scanned) files of the run directory")
    }

    struct Probe: Codable, Equatable {
        var value: Int
    }

    /// The public key `tether-bus key` prints for the key file `name` in `run`, made there.
    private func makeKey(_ name: String, in run: TestRunDirectory) throws -> String {
        let process = try ChildProcess(Programs.path("tether-bus"), ["key", run.path + "/" + name], outputDirectory: run.path, name: "key-" + name)
        #expect(try process.waitForExit(timeout: .seconds(10)) == 0, "\(process.standardError)")
        return process.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aTCPBusLetsInOnlyTheKeysItAllows() async throws {
        guard CurveKeyPair.isSupported else {
            print("skipped: this libzmq was built without CURVE")
            return
        }
        let run = try TestRunDirectory()
        let serverKey = try makeKey("bus.key", in: run)
        let allowedKey = try makeKey("allowed.key", in: run)
        let strangerKey = try makeKey("stranger.key", in: run)
        #expect(Set([serverKey, allowedKey, strangerKey]).count == 3 && CurveKey.isValid(allowedKey))
        var info = stat()
        #expect(stat(run.path + "/allowed.key", &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try makeKey("allowed.key", in: run) == allowedKey, "an existing key file is kept")
        let allowList = run.path + "/allowed-keys"
        try "# programs allowed in\n\(allowedKey) test-tap\n".write(toFile: allowList, atomically: true, encoding: .utf8)

        let port = try freePorts(count: 2)
        let address = "tcp://127.0.0.1:\(port)"
        let proxy = try ChildProcess(
            Programs.path("tether-bus"),
            ["--run-dir", run.path, "--tcp", "127.0.0.1:\(port)", "--curve-key", run.path + "/bus.key", "--allowed-keys", allowList],
            outputDirectory: run.path)
        defer { proxy.stop() }
        let listening = await eventually { proxy.standardError.contains("listening for other hosts") }
        #expect(listening, "\(proxy.standardError)")
        #expect(proxy.standardError.contains(serverKey), "the proxy logs its public key")

        // On the proxy's host, over ipc, nothing changes.
        let local = try BusClient(source: "local", runDirectory: run.runDirectory, logger: Logger(label: "local"))
        let heard = try await TopicRecorder(bus: local, prefixes: ["test."])
        try local.retain(Probe(value: 42), on: Topic("test.retained"))

        // From "another host": a tap with its own run directory, reaching the bus over TCP only.
        let elsewhere = try TestRunDirectory()
        func tap(key: String, _ extra: [String]) throws -> ChildProcess {
            try ChildProcess(
                Programs.path("tether-tap"),
                ["--run-dir", elsewhere.path, "--bus", address, "--bus-server-key", serverKey, "--bus-key", run.path + "/" + key] + extra,
                outputDirectory: elsewhere.path, name: "tap-" + key)
        }
        let allowedTap = try tap(key: "allowed.key", ["--json", "--count", "1", "test.retained"])
        #expect(try allowedTap.waitForExit(timeout: .seconds(10)) == 0, "\(allowedTap.standardError)")
        #expect(allowedTap.standardOutput.contains(#""value":42"#), "\(allowedTap.standardOutput)")
        let admitted = await eventually { proxy.standardError.contains("test-tap") }
        #expect(admitted, "the proxy names the client it let in")

        // A key not in the allow-list: refused, in words, on both sides.
        let strangerTap = try tap(key: "stranger.key", ["--count", "1"])
        #expect(try strangerTap.waitForExit(timeout: .seconds(10)) == 4)
        #expect(strangerTap.standardError.contains("refused this program's key"), "\(strangerTap.standardError)")
        #expect(proxy.standardError.contains("refused a bus client whose key is not in the allow-list"), "\(proxy.standardError)")
        #expect(proxy.standardError.contains(strangerKey))

        // In this process, as another host would: a client of the TCP endpoints with `key`
        // (a key file in `run`), taking the bus to be `busKey`.
        func remoteClient(_ name: String, key: String, busKey: String) throws -> BusClient {
            let secret = try String(contentsOfFile: run.path + "/" + key, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            return try BusClient(
                source: name, runDirectory: elsewhere.runDirectory,
                remote: RemoteBus(address: address, serverKey: busKey, keys: CurveKeyPair(secretKey: secret)), logger: Logger(label: name))
        }
        /// Expects `client`'s confirmed subscription to fail with words containing `words`.
        func expectRefused(_ client: BusClient, saying words: String) async {
            do {
                _ = try await client.subscribe(to: ["test."], confirm: true, timeout: .seconds(5))
                Issue.record("\(client.source) subscribed")
            } catch {
                #expect(error.description.contains(words), "\(error)")
            }
        }

        // What a stranger publishes never reaches the bus; an allowed program's does.
        let stranger = try remoteClient("stranger", key: "stranger.key", busKey: serverKey)
        await expectRefused(stranger, saying: "refused this program's key")
        try stranger.publish(Probe(value: 666), on: Topic("test.stranger"))
        let friend = try remoteClient("friend", key: "allowed.key", busKey: serverKey)
        _ = try await friend.subscribe(to: ["test."], confirm: true)
        try friend.publish(Probe(value: 1), on: Topic("test.friend"))
        _ = try await heard.waitFor(Topic("test.friend"), as: Probe.self)
        let topics = await heard.entries.map(\.topic.name).filter { $0 != "test.retained" }
        #expect(topics == ["test.friend"], "the local subscriber heard \(topics)")
        await heard.stop()

        // The wrong public key for the bus: the handshake fails, in words.
        let confused = try remoteClient("confused", key: "allowed.key", busKey: strangerKey)
        await expectRefused(confused, saying: "secure handshake")

        // The allow-list is read at every connection: the stranger, added, gets in without a restart.
        try "\(allowedKey) test-tap\n\(strangerKey) stranger\n".write(toFile: allowList, atomically: true, encoding: .utf8)
        let welcomeTap = try tap(key: "stranger.key", ["--json", "--count", "1", "test.retained"])
        #expect(try welcomeTap.waitForExit(timeout: .seconds(10)) == 0, "\(welcomeTap.standardError)")
        print("tcp:// bus: allowed key in, stranger refused (\(strangerTap.standardError.split(separator: "\n").last ?? "")), admitted once listed")
        for client in [local, stranger, friend, confused] { await client.close() }
    }
}

/// A front end on another host: it sends through the tcp:// bus (commands relayed by the
/// proxy) with an allowed key, and is refused with a stranger's.
@Suite(.serialized) struct RemoteFrontEndTests {
    private func makeKey(_ name: String, in directory: TestRunDirectory) throws -> String {
        let process = try ChildProcess(
            Programs.path("tether-bus"), ["key", directory.path + "/" + name], outputDirectory: directory.path, name: "key-" + name)
        #expect(try process.waitForExit(timeout: .seconds(10)) == 0, "\(process.standardError)")
        return process.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aFrontEndInAnotherNamespaceSendsWithAnAllowedKeyAndIsRefusedWithAStrangers() async throws {
        guard CurveKeyPair.isSupported else {
            print("skipped: this libzmq was built without CURVE")
            return
        }
        if let reason = NetworkNamespace.unavailableReason {
            print("skipped: \(reason)")
            return
        }
        let namespace = try NetworkNamespace()
        let hostAddress = try namespace.linkToHost()
        let keys = try TestRunDirectory()
        let serverKey = try makeKey("bus.key", in: keys)
        let allowedKey = try makeKey("allowed.key", in: keys)
        _ = try makeKey("stranger.key", in: keys)
        try "\(allowedKey) front-end-elsewhere\n".write(toFile: keys.path + "/allowed-keys", atomically: true, encoding: .utf8)
        let port = try freePorts(count: 3)
        let set = try await ComposedSet(environment: [
            "TETHER_BUS_TCP": "\(hostAddress):\(port)", "TETHER_BUS_CURVE_KEY": keys.path + "/bus.key", "TETHER_BUS_ALLOWED_KEYS": keys.path + "/allowed-keys",
        ])
        defer { set.stop() }

        // "Another host": its own run directory, in its own network namespace, the bus over TCP only.
        let elsewhere = try TestRunDirectory()
        func send(key: String, _ text: String) throws -> ChildProcess {
            let (executable, arguments) = namespace.command(
                Programs.path("tether"),
                [
                    "send", "--run-dir", elsewhere.path, "--bus", "tcp://\(hostAddress):\(port)", "--bus-server-key", serverKey,
                    "--bus-key", keys.path + "/" + key, "--timeout", "20", text,
                ])
            let process = try ChildProcess(executable, arguments, outputDirectory: elsewhere.path, name: "send-" + key)
            try process.waitForExit(timeout: .seconds(60))
            return process
        }
        let friend = try send(key: "allowed.key", "hello from another host")
        #expect(friend.status == 0, "\(friend.standardError)")
        #expect(friend.standardOutput == "You said: hello from another host\n", "\(friend.standardOutput)")
        let stranger = try send(key: "stranger.key", "a stranger's message")
        #expect(stranger.status != 0)
        #expect(stranger.standardError.contains("refused this program's key"), "\(stranger.standardError)")
        let received = set.gatewayRecord().compactMap { $0["content"] as? String }
        #expect(received.filter { $0 == "hello from another host" }.count == 1)
        #expect(!received.contains("a stranger's message"))
        print(
            "from another namespace over tcp://\(hostAddress):\(port): the allowed key sent and got the reply; the stranger: \(stranger.standardError.split(separator: "\n").last ?? "")"
        )
    }
}
