import Foundation
import Testing
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// docs/bus.schema.json is complete: everything the whole set publishes in a session that
/// touches every program, and every command's reply, matches it, and nothing it carries is
/// missing from it. Checked by the reference validator of the Python front end.
@Suite(.serialized) struct BusSchemaTests {
    private static let validator = Programs.packageRoot + "/examples/python/bus_schema.py"
    private static let schema = Programs.packageRoot + "/docs/bus.schema.json"

    private func python(_ arguments: [String], in directory: String) throws -> ChildProcess {
        let process = try ChildProcess("/usr/bin/env", ["python3"] + arguments, outputDirectory: directory, name: "python")
        try process.waitForExit(timeout: .seconds(120))
        return process
    }

    @Test(arguments: ["seed", "openclaw"])
    func aWholeSetRecordingAndEveryCommandMatchTheSchema(dialect: String) async throws {
        let set = try await ComposedSet(environment: ["TETHER_DIALECT": dialect, "TETHER_GATEWAY_TICK": "1"])
        defer { set.stop() }
        let zmq = try python(["-c", "import zmq"], in: set.run.path)
        if zmq.status != 0 { throw TestFailure("python3 cannot import zmq (run scripts/bootstrap --python): \(zmq.standardError)") }
        let recording = set.run.path + "/whole-set.jsonl"
        let tap = try ChildProcess(Programs.path("tether-tap"), ["--run-dir", set.run.path, "--record", recording], outputDirectory: set.run.path)
        defer { tap.stop() }
        let listening = await eventually { ((try? String(contentsOfFile: recording, encoding: .utf8)) ?? "").contains("conn.state") }
        #expect(listening)

        // A chat with a streamed reply; a front end that comes and goes.
        #expect(try set.tether(["send", "hello schema"]).status == 0)
        let input = set.run.path + "/plain-input"
        try "from a plain front end\n".write(toFile: input, atomically: true, encoding: .utf8)
        let plain = try ChildProcess(
            Programs.path("tether"), ["--plain", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "plain", standardInput: input)
        #expect(try plain.waitForExit(timeout: .seconds(40)) == 0)
        // Suspended: a message queued, then cancelled; resumed.
        #expect(try set.tether(["suspend"]).status == 0)
        _ = try set.tether(["send", "--timeout", "1", "to be cancelled"])
        #expect(try set.tether(["cancel", "--all"]).status == 0)
        #expect(try set.tether(["resume"]).status == 0)
        // The gateway restarted: a reconnect, health, suggestions, diagnostics.
        #expect(try await set.killAndAwaitRestart("gateway"))
        #expect(try set.tether(["send", "--wait", "20", "after the restart"]).status == 0)
        // Every command, each reply checked against its definition.
        let commands = try python(
            [Self.validator, Self.schema, "--commands", set.run.path, "--complete"] + (dialect == "openclaw" ? ["--openclaw"] : []), in: set.run.path)
        #expect(commands.status == 0, "\(commands.standardOutput)\(commands.standardError)")
        try await Task.sleep(for: .milliseconds(1500))
        tap.stop()

        let check = try python([Self.validator, Self.schema, recording, "--complete"], in: set.run.path)
        #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")
        #expect(check.standardOutput.contains(": 0 problems"), "\(check.standardOutput)")
        let topics =
            check.standardOutput.split(separator: "\n").first { $0.hasPrefix("topics: ") }.map { Set($0.dropFirst(8).split(separator: " ").map(String.init)) }
            ?? []
        for topic in [
            "net.path", "conn.state", "conn.identity", "wire.in", "wire.out", "conv.message", "conv.delivery", "conv.stream", "bot.state",
            "outbox.summary", "storage", "health", "diag.event", "frontend.presence", "snap.saved", "sys.heartbeat",
        ] {
            #expect(topics.contains(topic), "\(topic) never seen: \(topics.sorted())")
        }
        print("\(dialect): \(check.standardOutput.split(separator: "\n").suffix(2).joined(separator: "; "))")
        print("\(dialect) commands: \(commands.standardOutput.split(separator: "\n").joined(separator: "; "))")
    }
}
