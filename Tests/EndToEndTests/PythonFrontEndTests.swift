import Foundation
import Testing
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// The Python front end (examples/python): a second front end that speaks only the bus schema.
@Suite(.serialized) struct PythonFrontEndTests {
    private static let example = Programs.packageRoot + "/examples/python"

    /// Runs python3 (from PATH) with `arguments`.
    private func python(_ arguments: [String], in directory: String, timeout: Duration = .seconds(60)) throws -> ChildProcess {
        let process = try ChildProcess("/usr/bin/env", ["python3"] + arguments, outputDirectory: directory, name: "python")
        try process.waitForExit(timeout: timeout)
        return process
    }

    private func requirePyzmq(in directory: String) throws {
        let check = try python(["-c", "import zmq"], in: directory)
        if check.status != 0 {
            throw TestFailure("python3 cannot import zmq (run scripts/bootstrap --python): \(check.standardError)")
        }
    }

    @Test func pythonFrontEndSendsAndGetsTheReplyThroughTheBusOnly() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        try requirePyzmq(in: set.run.path)
        let recording = set.run.path + "/session.jsonl"
        let tap = try ChildProcess(Programs.path("tether-tap"), ["--run-dir", set.run.path, "--record", recording], outputDirectory: set.run.path)
        defer { tap.stop() }
        let listening = await eventually { ((try? String(contentsOfFile: recording, encoding: .utf8)) ?? "").contains("conn.state") }
        #expect(listening)

        let chat = try python(
            [Self.example + "/tether_chat.py", "--run-dir", set.run.path, "--send", "hello from python", "--strict", "--timeout", "30"],
            in: set.run.path)
        #expect(chat.status == 0, "\(chat.standardError)")
        #expect(chat.standardOutput == "You said: hello from python\n")
        let atGateway = set.gatewayRecord().filter { $0["content"] as? String == "hello from python" }
        #expect(atGateway.count == 1, "the gateway received it \(atGateway.count) times")
        let presence = await eventually { ((try? String(contentsOfFile: recording, encoding: .utf8)) ?? "").contains("\"leaving\"") }
        #expect(presence, "the Python front end did not announce its presence and departure")

        // Everything on the bus during the exchange matches docs/bus.schema.json.
        try await Task.sleep(for: .milliseconds(1200))
        tap.stop()
        let check = try python([Self.example + "/bus_schema.py", Programs.packageRoot + "/docs/bus.schema.json", recording], in: set.run.path)
        #expect(check.status == 0, "\(check.standardOutput)")
        #expect(check.standardOutput.contains(": 0 problems"), "\(check.standardOutput)")
        print("schema check: \(check.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines))")
    }

    @Test func pythonComposeFileRunsTheSetWithThePythonFrontEnd() async throws {
        let probe = try TestRunDirectory()
        try requirePyzmq(in: probe.path)
        let set = try await ComposedSet(file: "python.yaml")
        defer { set.stop() }
        let inbox = set.run.path + "/python.inbox"
        let opened = await eventually { FileManager.default.fileExists(atPath: inbox) }
        #expect(opened, "the Python front end made no inbox: \(set.log(of: "python"))")
        let descriptor = open(inbox, O_WRONLY | O_NONBLOCK)
        #expect(descriptor >= 0, "cannot open the inbox: \(String(cString: strerror(errno)))")
        let line = "hi from the inbox\n"
        _ = line.withCString { write(descriptor, $0, strlen($0)) }
        close(descriptor)
        let replied = await eventually(timeout: .seconds(20)) { set.log(of: "python").contains("> You said: hi from the inbox") }
        #expect(replied, "the Python front end's log: \(set.log(of: "python"))")
        #expect(set.log(of: "python").contains("you> hi from the inbox"))

        let status = try set.tether(["status", "--json"])
        let report = try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any]
        let frontEnds = (report?["frontEnds"] as? [[String: Any]] ?? []).compactMap { $0["frontEnd"] as? String }
        #expect(frontEnds.contains("example-python"), "status: \(status.standardOutput)")
        let protod = (report?["programs"] as? [[String: Any]] ?? []).first { $0["program"] as? String == "tether-protod" }
        #expect((protod?["counters"] as? [String: Int])?["malformedFrames"] == 0, "protod's counters are not in status")
    }
}
