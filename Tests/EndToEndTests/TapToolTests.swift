import Foundation
import Testing
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// tether-tap against real buses: recording a session and replaying it into another bus,
/// gaps, secrets, filters and rates.
@Suite(.serialized) struct TapToolTests {
    /// The lines of a tap recording, as objects.
    private func lines(_ path: String) -> [[String: Any]] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    private func header(_ line: [String: Any]) -> [String: Any] { line["header"] as? [String: Any] ?? [:] }

    /// A bus of its own in a fresh run directory, and a tap recording all of it.
    private func freshBus(_ run: TestRunDirectory, recording: String) async throws -> (bus: ChildProcess, tap: ChildProcess) {
        let bus = try ChildProcess(Programs.path("tether-bus"), ["--run-dir", run.path], outputDirectory: run.path)
        let tap = try ChildProcess(
            Programs.path("tether-tap"), ["--run-dir", run.path, "--record", recording, "--color", "never"], outputDirectory: run.path)
        // The bus's first heartbeats in the recording show the tap is listening.
        let listening = await eventually(timeout: .seconds(10)) { lines(recording).contains { $0["topic"] as? String == "sys.heartbeat" } }
        guard listening else { throw TestFailure("the tap on the fresh bus recorded nothing: \(tap.standardError)") }
        return (bus, tap)
    }

    @Test func aRecordedSessionReplayedIntoAFreshBusGivesTheSameTopicsInOrder() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let recording = set.run.path + "/session.jsonl"
        let tap = try ChildProcess(Programs.path("tether-tap"), ["--run-dir", set.run.path, "--record", recording], outputDirectory: set.run.path)
        let listening = await eventually { lines(recording).contains { $0["topic"] as? String == "conn.state" } }
        #expect(listening, "the tap recorded no retained state: \(tap.standardError)")
        let send = try set.tether(["send", "record", "me"])
        #expect(send.standardOutput == "You said: record me\n")
        let replied = await eventually {
            let recorded = lines(recording)
            return recorded.contains { ($0["body"] as? [String: Any])?["inReplyTo"] != nil }
                && recorded.contains { $0["topic"] as? String == "sys.heartbeat" }
        }
        #expect(replied, "the reply or a heartbeat is not in the recording")
        tap.stop()
        let recorded = lines(recording)
        let recordedTopics = recorded.compactMap { $0["topic"] as? String }
        #expect(Set(recordedTopics).isSuperset(of: ["conn.state", "conv.message", "conv.delivery", "conv.stream", "wire.in", "wire.out", "sys.heartbeat"]))

        let fresh = try TestRunDirectory()
        let replayed = fresh.path + "/replayed.jsonl"
        let (bus, freshTap) = try await freshBus(fresh, recording: replayed)
        defer {
            freshTap.stop()
            bus.stop()
        }
        let replay = try ChildProcess(
            Programs.path("tether-tap"), ["replay", "--run-dir", fresh.path, "--speed", "0", recording], outputDirectory: fresh.path)
        #expect(try replay.waitForExit(timeout: .seconds(30)) == 0, "\(replay.standardError)")
        #expect(replay.standardOutput == "replayed \(recorded.count) messages from \(recording)\n")
        // The fresh bus's own heartbeats are not part of the session.
        func session() -> [[String: Any]] {
            lines(replayed).filter { (header($0)["pid"] as? Int) != Int(bus.pid) }
        }
        let all = await eventually { session().count >= recorded.count }
        #expect(all, "\(session().count) of \(recorded.count) replayed messages arrived")
        #expect(session().compactMap { $0["topic"] as? String } == recordedTopics, "the replayed topics differ from the recorded ones")
        let identities = { (lines: [[String: Any]]) in lines.map { "\(header($0)["source"] ?? "")#\(header($0)["sequence"] ?? "")" } }
        #expect(identities(session()) == identities(recorded), "sources and sequences differ")
    }

    @Test func tapShowsGapsHidesSecretsAndFiltersByGlobAndSource() async throws {
        let run = try TestRunDirectory()
        let (bus, recordingTap) = try await freshBus(run, recording: run.path + "/all.jsonl")
        defer {
            recordingTap.stop()
            bus.stop()
        }
        let pretty = try ChildProcess(Programs.path("tether-tap"), ["--run-dir", run.path, "--color", "never"], outputDirectory: run.path, name: "pretty")
        let filtered = try ChildProcess(
            Programs.path("tether-tap"), ["--run-dir", run.path, "--color", "never", "*.message", "--source", "test-*"], outputDirectory: run.path,
            name: "filtered")
        let rates = try ChildProcess(
            Programs.path("tether-tap"), ["--run-dir", run.path, "--color", "never", "--rate"], outputDirectory: run.path, name: "rates")
        defer {
            for tap in [pretty, filtered, rates] { tap.stop() }
        }
        let tapsListening = await eventually { pretty.standardOutput.contains("sys.heartbeat") && filtered.isRunning }
        #expect(tapsListening)
        try await Task.sleep(for: .milliseconds(300))

        // Sequences 1, 2 and 5 of one process: 3 and 4 never came.
        var crafted = ""
        for (sequence, topic) in [(1, "conv.message"), (2, "conv.delivery"), (5, "conv.message")] {
            crafted +=
                #"{"at":0,"topic":"\#(topic)","header":{"pid":7,"replay":false,"schema":1,"sequence":\#(sequence),"source":"test-source","timestamp":"2026-11-23T10:00:00.000Z"},"#
            crafted += #""body":{"content":"message \#(sequence)","token":"s3cret-value","text":"{\"password\":\"s3cret-value\"}"}}"# + "\n"
        }
        crafted +=
            #"{"at":0,"topic":"conv.message","header":{"pid":8,"replay":false,"schema":1,"sequence":1,"source":"other","timestamp":"2026-11-23T10:00:00.000Z"},"body":{"content":"from another source"}}"#
            + "\n"
        let craftedPath = run.path + "/crafted.jsonl"
        try crafted.write(toFile: craftedPath, atomically: true, encoding: .utf8)
        let replay = try ChildProcess(Programs.path("tether-tap"), ["replay", "--run-dir", run.path, craftedPath], outputDirectory: run.path)
        #expect(try replay.waitForExit(timeout: .seconds(20)) == 0, "\(replay.standardError)")

        let arrived = await eventually { pretty.standardOutput.contains("from another source") && filtered.standardOutput.contains("message 5") }
        #expect(arrived, "the taps did not show the replayed messages:\n\(pretty.standardOutput)")
        let shown = pretty.standardOutput
        #expect(shown.contains("-- gap: 2 messages from test-source not seen (#2 → #5)"), "\(shown)")
        #expect(shown.contains("test-source[7]#5 conv.message"))
        #expect(!shown.contains("s3cret-value"), "a secret was shown")
        #expect(shown.contains("<redacted>"))
        let recorded = try String(contentsOfFile: run.path + "/all.jsonl", encoding: .utf8)
        #expect(!recorded.contains("s3cret-value"), "a secret was recorded")

        let filteredLines = filtered.standardOutput.split(separator: "\n")
        #expect(filteredLines.filter { !$0.hasPrefix("--") }.count == 2, "the glob and source filter let through: \(filtered.standardOutput)")
        #expect(filteredLines.allSatisfy { $0.hasPrefix("--") || $0.contains("test-source[7]") && $0.contains("conv.message") })
        #expect(filtered.standardOutput.contains("-- gap: 2 messages"), "gaps are judged on every message of a shown source")

        let counted = await eventually { rates.standardOutput.contains("conv.message") }
        #expect(counted, "\(rates.standardOutput)")
        #expect(rates.standardOutput.contains("MSG/S"))
        #expect(rates.standardOutput.contains("sys.heartbeat"))
    }

    @Test func aRecordingThatIsNotOneIsRefusedInWords() throws {
        let run = try TestRunDirectory()
        try "{\"topic\":\"x\"}\n".write(toFile: run.path + "/bad.jsonl", atomically: true, encoding: .utf8)
        let replay = try ChildProcess(Programs.path("tether-tap"), ["replay", "--run-dir", run.path, run.path + "/bad.jsonl"], outputDirectory: run.path)
        #expect(try replay.waitForExit(timeout: .seconds(10)) == 1)
        #expect(replay.standardError.contains("line 1 lacks topic, header or body"), "\(replay.standardError)")
        let missing = try ChildProcess(Programs.path("tether-tap"), ["replay", "--run-dir", run.path, run.path + "/none.jsonl"], outputDirectory: run.path)
        #expect(try missing.waitForExit(timeout: .seconds(10)) == 1)
        #expect(missing.standardError.contains("cannot read the recording"))
    }
}
