import Foundation
import Testing
import TetherSchema
import TetherTesting
import TetherWire

/// Tool calls and thinking through the real programs, against the development gateway (a
/// message `tool: read README.md` makes its agent call that tool, its history then holding the
/// call, its result and the model's thinking): shown live, stored by snapd, in `tether watch
/// --json`, in `--plain`, and in the terminal UI with Ctrl-O and Ctrl-T.
@Suite(.serialized) struct ToolCallEndToEndTests {
    /// The transcript entries `tether watch --json` prints first (snapd's stored transcript).
    static func stored(_ set: ComposedSet) async throws -> [TranscriptEntry] {
        let watch = try ChildProcess(
            Programs.path("tether"), ["watch", "--json", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "watch-json")
        defer { watch.stop() }
        // Its stored transcript comes first, then the retained session.
        _ = await eventually(timeout: .seconds(10)) { watch.standardOutput.contains(#""topic":"conv.session""#) }
        struct Line: Decodable {
            var topic: String
            var body: TranscriptEntry?
        }
        return watch.standardOutput.split(separator: "\n").compactMap { line in
            (try? BusSchema.makeDecoder().decode(Line.self, from: Data(line.utf8))).flatMap { $0.topic == "conv.message" ? $0.body : nil }
        }
    }

    @Test func aToolCallIsShownOnceWithItsOutputAndThinkingFromTheHistoryAndKeptInTheTranscript() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        let live = try ChildProcess(
            Programs.path("tether"), ["watch", "--json", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "watch-live")
        defer { live.stop() }
        #expect(await eventually(timeout: .seconds(10)) { live.standardOutput.contains(#""topic":"conv.session""#) }, "tether watch did not start")
        let sent = try set.tether(["send", "--timeout", "30", "tool: read README.md"])
        #expect(sent.status == 0, "\(sent.standardError)")
        #expect(sent.standardOutput == "I ran read on README.md: 3 lines.\n", "the tool's entry was taken for the reply: \(sent.standardOutput)")
        // The history looked up after the run adds the output (verbose is off: none came live) and the thinking.
        var entries: [TranscriptEntry] = []
        let complete = try await eventually(timeout: .seconds(15), every: .milliseconds(500)) {
            entries = try await Self.stored(set)
            return entries.contains { $0.tool?.output != nil } && entries.contains { $0.thinking != nil }
        }
        #expect(complete, "\(entries)")
        let tools = entries.filter { $0.tool != nil }
        #expect(tools.count == 1, "a tool call shown \(tools.count) times: \(tools)")
        let tool = try #require(tools.first?.tool)
        #expect(tool.name == "read" && tool.arguments == "README.md" && tool.state == .ok, "\(tool)")
        #expect(tool.output == "line 1 of README.md\nline 2 of README.md\nline 3 of README.md")
        let took = try #require(tool.durationMilliseconds)
        #expect(took >= 250 && took < 5000, "the gateway's tool took 300 ms: \(took) ms")
        #expect(tools.first?.thinking?.contains("I will call the read tool") == true, "\(String(describing: tools.first?.thinking))")
        let order = entries.map { $0.tool != nil ? "tool" : $0.sender == .user ? "user" : "reply" }
        #expect(order == ["user", "tool", "reply"], "\(order)")
        print("stored tool call: \(tool), thinking \(tools.first?.thinking ?? "-")")
        // Live: the call running, then ended (from the events), then with its output (from the history).
        let states = live.standardOutput.split(separator: "\n").compactMap { line -> String? in
            guard line.contains(#""tool":{"#) else { return nil }
            return line.contains(#""state":"running""#) ? "running" : line.contains(#""output""#) ? "ok+output" : "ok"
        }
        #expect(states == ["running", "ok", "ok+output"], "\(states)")

        // A reconnect reads the same history again: nothing shown twice, nothing lost.
        #expect(try set.tether(["reconnect"]).status == 0)
        try await Task.sleep(for: .seconds(3))
        let after = try await Self.stored(set)
        #expect(after.filter { $0.tool != nil }.count == 1 && after.count == entries.count, "\(after.map(\.content))")

        // --plain says the call once, when it ended.
        let input = set.run.path + "/plain-input"
        try "tool: read missing.md\n".write(toFile: input, atomically: true, encoding: .utf8)
        let plain = try ChildProcess(
            Programs.path("tether"), ["--plain", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "plain", standardInput: input)
        #expect(try plain.waitForExit(timeout: .seconds(40)) == 0)
        let lines = plain.standardOutput.split(separator: "\n").filter { $0.contains("⚙ read missing.md") }
        #expect(lines.count == 1 && lines.first?.hasSuffix(" s") == true && lines.first?.contains("· error ·") == true, "\(plain.standardOutput)")
        print("--plain:\n\(plain.standardOutput)")
    }

    @Test func withTheSessionsVerboseLevelFullTheOutputComesLiveWithTheCallsEnd() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0", "TETHER_GATEWAY_VERBOSE": "full"])
        defer { set.stop() }
        let live = try ChildProcess(
            Programs.path("tether"), ["watch", "--json", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "watch-live")
        defer { live.stop() }
        #expect(await eventually(timeout: .seconds(10)) { live.standardOutput.contains(#""topic":"conv.session""#) }, "tether watch did not start")
        let sent = try set.tether(["send", "--timeout", "30", "tool: exec make test"])
        #expect(sent.status == 0 && sent.standardOutput == "I ran exec on make test: 3 lines.\n", "\(sent.standardOutput) \(sent.standardError)")
        #expect(await eventually(timeout: .seconds(10)) { live.standardOutput.contains(#""thinking":"The user asks me to exec make test"#) })
        let tools = live.standardOutput.split(separator: "\n").compactMap { line -> TranscriptEntry? in
            guard line.contains(#""tool":{"#) else { return nil }
            struct Line: Decodable { var body: TranscriptEntry }
            return try? BusSchema.makeDecoder().decode(Line.self, from: Data(line.utf8)).body
        }
        #expect(tools.first?.tool?.state == .running && tools.first?.tool?.output == nil, "\(tools)")
        let ended = try #require(tools.dropFirst().first?.tool)
        #expect(ended.state == .ok && ended.name == "exec" && ended.arguments == "make test", "\(ended)")
        #expect(ended.output == "line 1 of make test\nline 2 of make test\nline 3 of make test", "the output did not come with the call's end")
        #expect(Set(tools.map(\.id)).count == 1, "\(tools.map(\.id))")
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func theTerminalUIShowsAToolLineExpandsItsOutputWithCtrlOAndThinkingWithCtrlT() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        let ui = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 200, rows: 24, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        _ = try await ui.waitFor("Ctrl-O show output", "Ctrl-T show thinking")
        try ui.type("tool: read README.md")
        try ui.press("Enter")
        let line = try await ui.waitFor("⚙ read README.md · ok · 0.", ": I ran read on README.md: 3 lines.")
        #expect(!line.contains("line 1 of README.md") && !line.contains("[thinking]"), "output or thinking shown before asked:\n\(line)")
        print("terminal UI with a tool call:\n\(line)")
        // The output comes with the history, after the reply; Ctrl-O shows it under the line.
        try await Task.sleep(for: .seconds(2))
        try ui.press("C-o")
        let expanded = try await ui.waitFor("    │ line 1 of README.md", "    │ line 3 of README.md", "Ctrl-O hide output")
        print("terminal UI after Ctrl-O:\n\(expanded)")
        try ui.press("C-t")
        let thinking = try await ui.waitFor("[thinking] The user asks me to read README.md", "Ctrl-T hide thinking")
        print("terminal UI after Ctrl-T:\n\(thinking)")
        try ui.press("C-o")
        try ui.press("C-t")
        let collapsed = try await ui.waitForAbsence(of: "    │ line 1 of README.md", "[thinking]")
        #expect(collapsed.contains("⚙ read README.md · ok · 0."), "\(collapsed)")
        try ui.press("C-c")
    }
}
