#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TetherTesting

/// What keeps the set private: the run directory, the token.
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
}
