import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting

/// tether-connd against a real tether-gateway, on a real bus, driven the way people and the
/// other programs drive it.
@Suite(.serialized) struct ConndTests {
    /// The bus, a gateway and connd in a private run directory.
    final class Rig {
        let run: TestRunDirectory
        let port: Int
        let token: String
        let bus: ChildProcess
        var gateway: ChildProcess?
        var connd: ChildProcess?
        let client: BusClient
        let states: BusRecorder<ConnectionStatus>

        init() async throws {
            run = try TestRunDirectory()
            port = try freePort()
            token = "correct-\(UUID().uuidString)"
            try SecretFileWriter.write(token, to: run.path + "/token")
            bus = try ChildProcess(Programs.path("tether-bus"), ["--run-dir", run.path], outputDirectory: run.path)
            client = try BusClient(source: "connd-test", runDirectory: run.runDirectory, logger: Logger(label: "connd-test"))
            states = try await BusRecorder(bus: client, topic: .connectionState)
        }

        deinit {
            connd?.stop()
            gateway?.stop()
            bus.stop()
        }

        var tokenFile: String { run.path + "/token" }

        func write(token: String) throws {
            try SecretFileWriter.write(token, to: tokenFile)
        }

        func startGateway(_ extra: [String] = []) throws {
            gateway = try ChildProcess(
                Programs.path("tether-gateway"),
                ["--port", "\(port)", "--token-file", tokenFile, "--record", run.path + "/record.jsonl"] + extra,
                outputDirectory: run.path)
            let listening = (0..<200).contains { _ in
                usleep(20_000)
                return (try? String(contentsOfFile: gateway!.stderrPath, encoding: .utf8))?.contains("gateway listening") == true
            }
            if !listening { throw TestFailure("the gateway did not start: \(gateway!.standardError)") }
        }

        func startConnd(_ extra: [String] = [], url: String? = nil) throws {
            connd = try ChildProcess(
                Programs.path("tether-connd"),
                ["--run-dir", run.path, "--url", url ?? "ws://127.0.0.1:\(port)/ws", "--token-file", tokenFile] + extra,
                outputDirectory: run.path)
        }

        /// POSTs a set of faults to the gateway's admin endpoint.
        func setFaults(_ json: String) async throws {
            try await setGatewayFaults(port: port, token: token, json)
        }

        func connected(epoch: Int, timeout: Duration = .seconds(15)) async throws -> BusRecorder<ConnectionStatus>.Entry {
            try await states.waitFor(timeout: timeout) { $0.phase == .connected && $0.epoch == epoch }
        }
    }

    @Test func gatewayKilledAndStartedAgainReconnectsWithTheConfiguredBackoff() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.startConnd(["--preset", "aggressive"])
        _ = try await rig.connected(epoch: 1)

        rig.gateway?.signal(SIGKILL)
        _ = try rig.gateway?.waitForExit(timeout: .seconds(5))
        // Down long enough for several attempts: 0.5 s, 1 s, 2 s apart (±10%).
        try await Task.sleep(for: .milliseconds(3800))
        try rig.startGateway()
        let back = try await rig.connected(epoch: 2, timeout: .seconds(20))

        // A retained value published again for a new subscription carries a new timestamp: leave those out.
        let waits = await rig.states.entries.filter { !$0.header.replay && $0.value.phase == .reconnecting && $0.value.nextAttemptAt != nil }
        let delays = waits.map { $0.value.nextAttemptAt!.timeIntervalSince($0.header.timestamp) }
        let attempts = waits.map(\.value.attempt)
        print("reconnect attempts \(attempts), announced delays \(delays.map { String(format: "%.3f", $0) }) s")
        #expect(Array(attempts.prefix(3)) == [1, 2, 3])
        let nominal = [0.5, 1.0, 2.0]
        for (delay, expected) in zip(delays, nominal) {
            #expect(delay >= expected * 0.9 - 0.02 && delay <= expected * 1.1 + 0.02, "a delay of \(delay) s is not \(expected) s ±10%")
        }
        #expect(back.value.lastError == nil)
        #expect(await rig.states.entries.contains { $0.value.phase == .reconnecting && $0.value.lastError?.contains("lost the connection") == true })
    }

    /// While the gateway's port refuses connections (it is restarting), connd knocks on it and
    /// connects as soon as it listens again instead of at the end of the backoff.
    @Test func restartedGatewayIsUsedAsSoonAsItListens() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.startConnd()
        _ = try await rig.connected(epoch: 1)

        rig.gateway?.signal(SIGKILL)
        _ = try rig.gateway?.waitForExit(timeout: .seconds(5))
        // The default backoff tries after about 1 s and 2 s more, then waits about 4 s.
        try await Task.sleep(for: .milliseconds(4000))
        let listening = Date()
        try rig.startGateway()
        let back = try await rig.connected(epoch: 2, timeout: .seconds(20))

        let lastWait = await rig.states.entries.last { !$0.header.replay && $0.value.phase == .reconnecting && $0.value.nextAttemptAt != nil }
        let scheduled = try #require(lastWait?.value.nextAttemptAt)
        print(
            "gateway listening again: connected \(String(format: "%.0f", back.header.timestamp.timeIntervalSince(listening) * 1000)) ms after it started,"
                + " \(String(format: "%.1f", scheduled.timeIntervalSince(back.header.timestamp))) s before the backoff's next attempt")
        #expect(
            back.header.timestamp < scheduled.addingTimeInterval(-1), "connected at \(back.header.timestamp), the backoff's attempt was due at \(scheduled)")
    }

    @Test func gatewayThatStopsAnsweringPingsIsDeclaredDead() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.startConnd(["--heartbeat", "1", "--preset", "aggressive"])
        _ = try await rig.connected(epoch: 1)

        let frozen = ContinuousClock.now
        try await rig.setFaults(#"{"ignorePings": true}"#)
        let dead = try await rig.states.waitFor(timeout: .seconds(10), since: frozen) { $0.phase == .reconnecting }
        let detection = frozen.duration(to: dead.receivedAt)
        print("a gateway that stopped answering pings was declared dead after \(detection) (heartbeat 1 s)")
        // Heartbeat plus timeout is 2 s: the ping after the last pong goes unanswered, and the
        // one after that finds it so. The rest is slack for a loaded machine.
        #expect(detection <= .milliseconds(3500), "heartbeat plus timeout is 2 s")
        try await rig.setFaults(#"{"ignorePings": false}"#)
        _ = try await rig.states.waitFor(timeout: .seconds(15)) { $0.phase == .connected && $0.epoch >= 2 }
    }

    @Test func networkLostThenBackReconnectsWithoutWaitingOutTheBackoff() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.client.retain(NetworkPath(satisfied: true, interface: "eth0", kind: .wired, expensive: false), on: .networkPath)
        try rig.startConnd()
        _ = try await rig.connected(epoch: 1)

        try rig.client.retain(NetworkPath(satisfied: false, interface: nil, kind: nil, expensive: false, reason: "no default route"), on: .networkPath)
        let waiting = try await rig.states.waitFor { $0.phase == .waitingForNetwork }
        #expect(waiting.value.words == "No network — waiting for connection.")
        // No attempt is spent while there is no network.
        try await Task.sleep(for: .seconds(1.5))
        #expect(await rig.states.latest?.phase == .waitingForNetwork)

        let back = ContinuousClock.now
        try rig.client.retain(NetworkPath(satisfied: true, interface: "wlan0", kind: .wifi, expensive: false), on: .networkPath)
        let connected = try await rig.connected(epoch: 2)
        let elapsed = back.duration(to: connected.receivedAt)
        print("network back to connected: \(elapsed)")
        #expect(elapsed < .seconds(1), "the default preset's first retry waits 1 s; a returning network must not")

        // The primary interface changes: a new connection at once.
        let changed = ContinuousClock.now
        try rig.client.retain(NetworkPath(satisfied: true, interface: "wwan0", kind: .cellular, expensive: true), on: .networkPath)
        let moved = try await rig.connected(epoch: 3)
        print("interface change to connected: \(changed.duration(to: moved.receivedAt))")
    }

    @Test func wrongTokenFailsOnceWithoutRetryingThenACorrectedFileConnects() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.write(token: "wrong")
        try rig.startConnd(["--preset", "aggressive"])
        let failed = try await rig.states.waitFor { $0.phase == .failed }
        #expect(failed.value.failure == .credentialRejected)
        #expect(failed.value.lastError?.contains("rejected the token (HTTP 401)") == true)
        #expect(failed.value.words.contains("token was rejected"))
        try await Task.sleep(for: .seconds(2))
        // No attempt after the failure, and none but the first before it.
        let attempts = await rig.states.entries.filter { $0.value.phase == .connecting || $0.value.phase == .reconnecting }
        #expect(Set(attempts.map(\.value.attempt)) == [1], "connd retried a rejected token: \(attempts.map(\.value.attempt))")
        #expect(!attempts.contains { $0.receivedAt > failed.receivedAt }, "connd tried again after the token was rejected")
        #expect(await rig.states.latest?.phase == .failed)

        try rig.write(token: rig.token)
        _ = try await rig.connected(epoch: 1, timeout: .seconds(10))
    }

    @Test func tokenNeverLeavesConnd() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        let tap = try ChildProcess(Programs.path("tether-tap"), ["--run-dir", rig.run.path, "--json"], outputDirectory: rig.run.path, name: "tap")
        defer { tap.stop() }
        try rig.startConnd()
        _ = try await rig.connected(epoch: 1)
        try await Task.sleep(for: .seconds(1.5))
        #expect(tap.standardOutput.contains("conn.identity"))
        #expect(!tap.standardOutput.contains(rig.token), "the token appeared on the bus")
        #expect(!(rig.connd?.standardError.contains(rig.token) ?? true), "the token appeared in connd's log")
    }

    @Test func tokenFileReadableByOthersIsRefused() throws {
        let run = try TestRunDirectory()
        let file = run.path + "/token"
        try "secret\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o644)
        let connd = try ChildProcess(Programs.path("tether-connd"), ["--run-dir", run.path, "--token-file", file], outputDirectory: run.path)
        let status = try connd.waitForExit(timeout: .seconds(10))
        #expect(status != 0)
        #expect(connd.standardError.contains("must not be readable by others"))
        #expect(connd.standardError.contains("chmod 600"))
    }

    @Test func aTokenFileThatBecomesUnreadableIsNamedAsSuchAndFixingItReconnects() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.startConnd()
        _ = try await rig.connected(epoch: 1)
        chmod(rig.tokenFile, 0o644)
        let broken = ContinuousClock.now
        _ = try await rig.client.request(ConnectionCommand.self, .init(action: .reconnect))
        let failed = try await rig.states.waitFor(since: broken) { $0.phase == .failed }.value
        #expect(failed.failure == .credentialUnavailable, "\(failed.words)")
        #expect(failed.lastError?.contains("must not be readable by others") == true, "\(String(describing: failed.lastError))")
        #expect(failed.words.contains("cannot be read here") && !failed.words.contains("rejected"), "\(failed.words)")
        chmod(rig.tokenFile, 0o600)
        let fixed = ContinuousClock.now
        let back = try await rig.states.waitFor(timeout: .seconds(5), since: fixed) { $0.phase == .connected }
        print("token file fixed: connected again \(fixed.duration(to: back.receivedAt)) later")
    }

    @Test func suspendClosesWithinTheDeadlineAndResumeReconnects() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.startConnd(["--close-deadline", "2"])
        _ = try await rig.connected(epoch: 1)

        let asked = ContinuousClock.now
        let reply = try await rig.client.request(ConnectionCommand.self, .init(action: .suspend))
        #expect(reply.accepted)
        #expect(reply.phase == .suspended)
        let suspended = try await rig.states.waitFor { $0.phase == .suspended }
        #expect(suspended.value.words == "Disconnected (app suspended)")
        let closed = await eventually(timeout: .seconds(2)) { rig.gateway?.standardError.contains("client disconnected") == true }
        #expect(closed, "the gateway did not see the connection close within the 2 s deadline")
        print("suspend to closed at the gateway: \(asked.duration(to: .now))")

        let again = try await rig.client.request(ConnectionCommand.self, .init(action: .suspend))
        #expect(!again.accepted, "a second suspend does not apply")
        let resumed = try await rig.client.request(ConnectionCommand.self, .init(action: .resume))
        #expect(resumed.accepted)
        let connected = try await rig.connected(epoch: 2)
        #expect(connected.value.identity?.keyID == "file:\(rig.tokenFile)", "the same identity after resume")
    }

    @Test func manualReconnectAfterGivingUp() async throws {
        let rig = try await Rig()
        try rig.startConnd(["--max-attempts", "2", "--backoff-base", "0.2"])
        let failed = try await rig.states.waitFor { $0.phase == .failed }
        #expect(failed.value.failure == .unreachable)
        #expect(failed.value.lastError?.contains("cannot") == true)
        try rig.startGateway()
        let reply = try await rig.client.request(ConnectionCommand.self, .init(action: .reconnect))
        #expect(reply.accepted)
        _ = try await rig.connected(epoch: 1)
    }

    @Test func afterTheAttemptsRunOutTheKnockFindsTheGatewayBack() async throws {
        let rig = try await Rig()
        try rig.startConnd(["--max-attempts", "2", "--backoff-base", "0.2", "--failed-knock", "1"])
        let failed = try await rig.states.waitFor { $0.phase == .failed }
        #expect(failed.value.failure == .unreachable)
        try await Task.sleep(for: .seconds(2))
        let started = ContinuousClock.now
        try rig.startGateway()
        let back = try await rig.connected(epoch: 1, timeout: .seconds(10))
        let took = started.duration(to: back.receivedAt)
        print("failed, nobody asking: connected \(took) after the gateway started (knock every 1 s)")
        #expect(took < .seconds(3))
    }

    @Test func aFrozenGatewayIsGivenUpAtTheUpgradeDeadlineAndReconnectIsTakenMidAttempt() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.startConnd(["--preset", "aggressive", "--upgrade-deadline", "2"])
        _ = try await rig.connected(epoch: 1)
        rig.gateway?.signal(SIGSTOP)
        defer { rig.gateway?.signal(SIGCONT) }
        let asked = ContinuousClock.now
        let first = try await rig.client.request(ConnectionCommand.self, .init(action: .reconnect))
        #expect(first.accepted)
        // The attempt hangs in the upgrade; another reconnect, in the middle of it, is taken.
        try await Task.sleep(for: .milliseconds(500))
        let second = try await rig.client.request(ConnectionCommand.self, .init(action: .reconnect))
        #expect(second.accepted, "a reconnect during an attempt was refused")
        let secondAsked = ContinuousClock.now
        let gaveUp = try await rig.states.waitFor(timeout: .seconds(10), since: asked) {
            $0.lastError?.contains("did not complete the WebSocket upgrade") == true
        }
        let took = secondAsked.duration(to: gaveUp.receivedAt)
        print("frozen gateway: the attempt was given up \(took) after it started (deadline 2 s): \(gaveUp.value.lastError ?? "")")
        #expect(took < .seconds(3.5))
        rig.gateway?.signal(SIGCONT)
        let back = try await rig.states.waitFor(timeout: .seconds(20)) { $0.phase == .connected && $0.epoch >= 2 }
        print("frozen gateway: connected again \(asked.duration(to: back.receivedAt)) after the first reconnect")
    }

    @Test func rejectedAttemptsLeaveNoSocketOpen() async throws {
        let rig = try await Rig()
        try rig.startGateway(["--faults", #"{"rejectToken": true}"#])
        try rig.startConnd()
        _ = try await rig.states.waitFor { $0.failure == .credentialRejected }
        for _ in 2...5 {
            let since = ContinuousClock.now
            _ = try await rig.client.request(ConnectionCommand.self, .init(action: .reconnect))
            _ = try await rig.states.waitFor(since: since) { $0.failure == .credentialRejected }
        }
        let pid = try #require(rig.connd?.pid)
        let settled = await eventually(timeout: .seconds(5)) { !SocketStates.of(pid: pid).contains("CLOSE-WAIT") }
        let states = SocketStates.of(pid: pid)
        print("after five rejected attempts connd holds TCP sockets: \(SocketStates.sockets(of: pid)) (gateway port \(rig.port))")
        if !settled {
            try await Task.sleep(for: .seconds(10))
            print("10 s later: \(SocketStates.sockets(of: pid))")
        }
        #expect(settled, "sockets left in CLOSE-WAIT: \(states)")
        #expect(states.filter { $0 != "LISTEN" }.isEmpty, "sockets left open: \(states)")
    }

    @Test func gatewayFaultSwitches() async throws {
        let rig = try await Rig()
        try rig.startGateway()
        try rig.startConnd(["--preset", "aggressive", "--max-attempts", "3"])
        _ = try await rig.connected(epoch: 1)

        // Refused connections: attempts fail with the gateway's answer in words.
        let refusedSince = ContinuousClock.now
        try await rig.setFaults(#"{"refuseConnections": true}"#)
        _ = try await rig.client.request(ConnectionCommand.self, .init(action: .reconnect))
        let refused = try await rig.states.waitFor(since: refusedSince) { $0.lastError?.contains("HTTP 503") == true }
        #expect(refused.value.phase == .reconnecting || refused.value.phase == .failed)

        // A rejected token: failed at once, no retries.
        try await rig.setFaults(#"{"refuseConnections": false, "rejectToken": true}"#)
        let rejectedSince = ContinuousClock.now
        _ = try await rig.client.request(ConnectionCommand.self, .init(action: .reconnect))
        let rejected = try await rig.states.waitFor(since: rejectedSince) { $0.failure == .credentialRejected }
        #expect(rejected.value.lastError?.contains("HTTP 401") == true)

        // A connection closed after one frame: connd sees the gateway's close and reconnects.
        try await rig.setFaults(#"{"rejectToken": false, "closeAfterFrames": 1}"#)
        let closingSince = ContinuousClock.now
        _ = try await rig.client.request(ConnectionCommand.self, .init(action: .reconnect))
        let connected = try await rig.states.waitFor(since: closingSince) { $0.phase == .connected }
        // A ping makes the gateway send its one frame, the pong.
        try rig.client.publish(
            WireFrame(epoch: nil, text: #"{"version":"1.0","type":"system.ping","sequence":1,"payload":{"timestamp":null},"serverTimestamp":null}"#),
            on: .wireOutbound)
        let closed = try await rig.states.waitFor(since: connected.receivedAt) { $0.phase == .reconnecting && $0.lastError != nil }
        #expect(closed.value.lastError?.contains("closed the connection") == true, "\(closed.value.lastError ?? "")")
    }

    @Test func wssIsVerifiedAgainstTheGivenCAAndAnUntrustedCertificateFailsClearly() async throws {
        let rig = try await Rig()
        let certificates = try TestCertificates(directory: rig.run.path)
        try rig.startGateway(["--tls-cert", certificates.serverCertificate, "--tls-key", certificates.serverKey])
        // A host name, not an address: TLS sends it as the server name (SNI), which cannot be an IP address.
        let url = "wss://localhost:\(rig.port)/ws"
        try rig.startConnd(["--ca-file", certificates.caCertificate], url: url)
        let connected = try await rig.connected(epoch: 1)
        #expect(connected.value.url.hasPrefix("wss://"))
        rig.connd?.stop()

        // The same gateway, without trusting its CA.
        try rig.startConnd(["--preset", "aggressive"], url: url)
        let failed = try await rig.states.waitFor { $0.phase == .failed }
        print("untrusted certificate: \(failed.value.lastError ?? "")")
        #expect(failed.value.failure == .tls)
        #expect(failed.value.lastError?.contains("the gateway's certificate could not be verified") == true, "\(failed.value.lastError ?? "no error")")
        try await Task.sleep(for: .seconds(1.5))
        let retries = await rig.states.entries.filter {
            $0.receivedAt > failed.receivedAt && ($0.value.phase == .connecting || $0.value.phase == .reconnecting)
        }
        #expect(retries.isEmpty, "an untrusted certificate is not retried: \(retries.map(\.value.attempt))")
    }
}
