import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting

/// The terminal UI in a real terminal (tmux), against the whole set: typed into with
/// send-keys, read with capture-pane.
@Suite(.serialized) struct TerminalUITests {
    private func startUI(_ set: ComposedSet, columns: Int = 100, rows: Int = 30) throws -> Tmux {
        try Tmux([Programs.path("tether"), "--run-dir", set.run.path], columns: columns, rows: rows, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func chatInTheTerminalWithTheBannerThroughAGatewayRestart() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let earlier = try set.tether(["send", "hello from before"])
        #expect(earlier.status == 0)

        // The first frame is the stored transcript.
        let started = ContinuousClock.now
        let ui = try startUI(set)
        let first = try await ui.waitFor("You: hello from before  ✓✓ delivered", "Opta: You said: hello from before")
        print("terminal UI: first frame with the stored transcript \(started.duration(to: .now)) after it started")
        #expect(first.split(separator: "\n").last { !$0.isEmpty }?.hasPrefix(">") == true, "no composer at the bottom:\n\(first)")

        // A message typed and sent: delivered, and the reply streamed in place.
        try await set.faults(#"{"frameDelayMilliseconds": 120}"#)
        try ui.type("how are you? 你好")
        try ui.press("Enter")
        let growing = try await ui.waitFor("▍", timeout: .seconds(10))
        #expect(growing.contains("Opta: "), "the streamed reply is not growing in place:\n\(growing)")
        _ = try await ui.waitFor("You: how are you? 你好  ✓✓ delivered", "Opta: You said: how are you? 你好")
        // The whole text can show a moment before the reply's end: then the cursor goes.
        let answered = try await ui.waitForAbsence(of: "▍", timeout: .seconds(5))
        try await set.faults("{}", method: "DELETE")
        print("terminal UI after a message:\n\(answered)")

        // The gateway killed: the banner says so; back: "Reconnected", then no banner.
        let gateway = try #require(set.pid(of: "gateway"))
        kill(gateway, SIGKILL)
        let lost = try await ui.waitFor("Reconnecting…", timeout: .seconds(10))
        print("terminal UI with the gateway gone:\n\(lost.split(separator: "\n").prefix(2).joined(separator: "\n"))")
        _ = try await ui.waitFor("Reconnected", timeout: .seconds(20))
        _ = try await ui.waitForAbsence(of: "Reconnected", "Reconnecting…", timeout: .seconds(5))

        // Ctrl-C quits, saving the screen and the draft for next time.
        try ui.type("half a thought")
        try ui.press("C-c")
        let quit = await eventually(timeout: .seconds(5)) { !ui.isRunning }
        #expect(quit, "the terminal UI did not quit on Ctrl-C")
        let client = try BusClient(source: "tui-test", runDirectory: set.run.runDirectory, logger: Logger(label: "tui-test"))
        let frame = try await client.request(SnapshotCommand.self, .init(frontEnd: "tether"))
        #expect(frame.display?.draft == "half a thought")
        #expect(frame.display?.history == ["how are you? 你好"])
        #expect(frame.display?.screen.contains { $0.contains("Opta: You said: how are you? 你好") } == true)
        await client.close()
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func anotherSessionIsChosenWithSlashSessionOrCtrlPAndItsTranscriptShown() async throws {
        let set = try await ComposedSet.openClaw()
        defer { set.stop() }
        #expect(try set.tether(["send", "said in main"]).status == 0)
        // Wide enough for the status line's hints after the session's model and tokens.
        let ui = try startUI(set, columns: 160)
        _ = try await ui.waitFor("You: said in main  ✓✓ delivered", "session agent:main:main", "Ctrl-P sessions")

        try ui.type("/session side")
        try ui.press("Enter")
        // What happens is said in the status line until the next key.
        let side = try await ui.waitFor("chatting in agent:main:side", "No messages yet")
        #expect(!side.contains("said in main"), "the main session's transcript is still shown:\n\(side)")
        try ui.type("said in side")
        try ui.press("Enter")
        let answered = try await ui.waitFor("You: said in side  ✓✓ delivered", "You said: said in side", "session agent:main:side")
        #expect(!answered.contains("said in main"))
        #expect(set.openClawTranscript(session: "agent:main:side").first?.text == "said in side")

        // Ctrl-P lists the sessions, the most recently active first, as the gateway does; a digit chooses one.
        try ui.press("C-p")
        let list = try await ui.waitFor("1  agent:main:side  ← current", "2  agent:main:main")
        print("terminal UI session list:\n\(list)")
        try ui.type("2")
        let back = try await ui.waitFor("You: said in main  ✓✓ delivered", "chatting in agent:main:main")
        #expect(!back.contains("said in side"), "the side session's transcript is still shown:\n\(back)")
        try ui.press("C-c")
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func theStatusLineShowsTheModelAndTokensAndHelpListsTheCommands() async throws {
        let set = try await ComposedSet.openClaw()
        defer { set.stop() }
        let ui = try startUI(set, columns: 240, rows: 30)
        _ = try await ui.waitFor("session agent:main:main · tether/tether-dev-echo ·", "/help")

        try ui.type("/help")
        try ui.press("Enter")
        let help = try await ui.waitFor("Tether handles these itself", "/think LEVEL", "/model [NAME]", "is sent to the gateway as text")
        print("terminal UI /help:\n\(help)")

        // A message: its tokens, as the gateway counts them, join the status line.
        try ui.type("hello")
        try ui.press("Enter")
        _ = try await ui.waitFor(": You said: hello", "tether/tether-dev-echo 6/32,000 tokens (<1%)")

        // The thinking level: sent as the gateway's command, answered by it, shown.
        try ui.type("/think max")
        try ui.press("Enter")
        let thinking = try await ui.waitFor("Thinking level set to high.", "sent /think high to the gateway; it answers in the conversation")
        #expect(thinking.contains("You: /think high  ✓✓ delivered"), "the command sent is shown as sent:\n\(thinking)")
        // The words go with the next key; the status line shows the level.
        try ui.press("Escape")
        _ = try await ui.waitFor("tether/tether-dev-echo think high 6/32,000 tokens (<1%)")
        try ui.type("/think extreme")
        try ui.press("Enter")
        _ = try await ui.waitFor("extreme is no thinking level")
        try ui.type("/status")
        try ui.press("Enter")
        let status = try await ui.waitFor("model tether/tether-dev-echo", "thinking high", "context 6/32,000 tokens (<1%)")
        print("terminal UI /status:\n\(status)")
        #expect(set.receipts().keys.filter { $0.hasPrefix("/think") } == ["/think high"], "the refused level was not sent")
        try ui.press("C-c")
    }

    /// `/steer TEXT` and `/interrupt TEXT` while a reply streams, on today's gateway: the steered
    /// message is marked with where it went and the reply in progress answers it too; the
    /// interrupting one stops that reply (said incomplete, with why) and is answered.
    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func slashSteerAndSlashInterruptGoIntoTheReplyInProgress() async throws {
        let set = try await ComposedSet.openClaw(release: "current", protocols: "release", environment: ["TETHER_CHUNK_DELAY": "150"])
        defer { set.stop() }
        #expect(try set.tether(["send", "an existing session"]).status == 0)
        let ui = try startUI(set, columns: 240, rows: 30)
        _ = try await ui.waitFor("You: an existing session  ✓✓ delivered")

        let first = try await WhileBusyEndToEndTests.replying(set)
        try ui.type("/steer also this")
        try ui.press("Enter")
        let steered = try await ui.waitFor(
            "You: also this  ✓✓ steered into the reply in progress: that reply answers both", "And to what you added: You said: also this",
            timeout: .seconds(60))
        print("terminal UI after /steer:\n\(steered)")
        #expect(try first.waitForExit(timeout: .seconds(60)) == 0, "\(first.standardError)")
        #expect(set.openClawTranscript().count { $0.role == "user" && $0.text == "also this" } == 1)

        let second = try await WhileBusyEndToEndTests.replying(set)
        try ui.type("/interrupt stop that")
        try ui.press("Enter")
        let interrupted = try await ui.waitFor(
            "✗ incomplete: the reply was stopped: a message sent to interrupt it is answered instead", "You: stop that  ✓✓ delivered",
            ": You said: stop that", timeout: .seconds(60))
        print("terminal UI after /interrupt:\n\(interrupted)")
        #expect(try second.waitForExit(timeout: .seconds(60)) == 3, "\(second.standardError)")
        try ui.press("C-c")
    }

    /// The terminal UI sleeps between keys and changes: what the bus brings, a resize and a
    /// long paste are each drawn, with no periodic redraw in between.
    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func aChangeAResizeAndAPasteAreDrawnWithoutPolling() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let ui = try startUI(set, columns: 100, rows: 20)
        _ = try await ui.waitFor("Ctrl-C quit")

        // Idle: the process's threads, counted as the kernel switches to them.
        let pid = try ui.pid()
        let before = Self.switches(of: pid)
        try await Task.sleep(for: .seconds(3))
        print("terminal UI idle: \(Double(Self.switches(of: pid) - before) / 3) wakeups a second (all its threads)")

        // Sent from elsewhere: the bus wakes the UI, which draws it.
        #expect(try set.tether(["send", "from another front end"]).status == 0)
        _ = try await ui.waitFor("You: from another front end  ✓✓ delivered", "Opta: You said: from another front end")

        // Narrower: every line is drawn again within the new width.
        try ui.resize(columns: 40, rows: 20)
        let narrow = await eventually(timeout: .seconds(5)) {
            let lines = ui.screen().split(separator: "\n")
            return lines.contains { $0.hasPrefix("Opta: You said: from another") } && lines.allSatisfy { $0.count <= 40 }
        }
        #expect(narrow, "not redrawn for 40 columns:\n\(ui.screen())")

        // A long paste: the composer shows its end, where the cursor is.
        let pasted = String(repeating: "abcdefghij", count: 300) + "END"
        try ui.type(pasted)
        let shown = try await ui.waitFor("END")
        #expect(shown.split(separator: "\n").last { $0.hasPrefix(">") }?.hasSuffix("END") == true, "the cursor's end is not shown:\n\(shown)")
        try ui.press("C-c")
    }

    /// Context switches of every thread of `pid`, voluntary and not.
    private static func switches(of pid: Int32) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { total, task in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            return total
                + status.split(separator: "\n").filter { $0.contains("ctxt_switches:") }.compactMap { Int($0.split(separator: "\t").last ?? "") }
                .reduce(0, +)
        }
    }

    /// As a user runs it: from a shell, where Ctrl-Z stops the job and `fg` brings it back.
    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func ctrlZStopsTheJobAndFgResumes() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "tui-test", runDirectory: set.run.runDirectory, logger: Logger(label: "tui-test"))
        let flow = try await TopicRecorder(bus: client, prefixes: [Topic.connectionState.name, Topic.snapshotSaved.name])
        let shell = try Tmux.shell(directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        try shell.run(command: [Programs.path("tether"), "--run-dir", set.run.path])
        _ = try await shell.waitFor("Ctrl-Z suspend · Ctrl-C quit")
        try shell.type("draft kept")

        let pressed = ContinuousClock.now
        try shell.press("C-z")
        let suspended = try await flow.waitFor(.connectionState, as: ConnectionStatus.self, since: pressed) { $0.phase == .suspended }
        #expect(suspended.decode(ConnectionStatus.self)?.suspendReason == .command)
        let saved = try await flow.waitFor(.snapshotSaved, as: SnapshotSaved.self, since: pressed) { $0.kind == .display }
        // Compared by when snapd and connd published them: two publishers' messages may reach
        // a subscriber in either order when they are microseconds apart.
        #expect(saved.message.header.timestamp <= suspended.message.header.timestamp, "the display is saved before the connection closes")
        print("Ctrl-Z: display saved and \"Disconnected (app suspended)\" \(pressed.duration(to: suspended.receivedAt)) after the key")
        // The shell has the terminal back and says the job stopped; the connection stays closed.
        let stopped = try await shell.waitFor("Stopped")
        #expect(stopped.contains("$ "), "no shell prompt after the stop:\n\(stopped)")
        let latest = await flow.entries.last { $0.topic == .connectionState }?.decode(ConnectionStatus.self)
        #expect(latest?.phase == .suspended, "the connection did not stay suspended while the job was stopped: \(String(describing: latest))")

        // fg continues it: it draws at once and reconnects.
        let continued = ContinuousClock.now
        try shell.run(command: ["fg"])
        let back = try await flow.waitFor(.connectionState, as: ConnectionStatus.self, since: continued) { $0.phase == .connected }
        print("fg: connected again \(continued.duration(to: back.receivedAt)) later")
        _ = try await shell.waitFor("> draft kept")
        try shell.press("C-c")
        await client.close()
    }

    /// Started by the terminal itself there is no shell to come back to: Ctrl-Z says so and
    /// leaves the connection alone (stopped, the process would hang with nothing to continue it).
    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func ctrlZWithoutAShellSaysWhyAndKeepsTheConnection() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "tui-test", runDirectory: set.run.runDirectory, logger: Logger(label: "tui-test"))
        let flow = try await TopicRecorder(bus: client, prefixes: [Topic.connectionState.name])
        let ui = try startUI(set)
        let first = try await ui.waitFor("Ctrl-C quit")
        #expect(!first.contains("Ctrl-Z"), "Ctrl-Z is offered with no shell to return to:\n\(first)")
        let pressed = ContinuousClock.now
        try ui.press("C-z")
        _ = try await ui.waitFor("Ctrl-Z does nothing here: tether was not started from a shell")
        #expect(ui.isRunning)
        let changes = await flow.entries.filter { $0.topic == .connectionState && $0.receivedAt >= pressed }
        #expect(changes.isEmpty, "the connection changed: \(changes.map { $0.decode(ConnectionStatus.self)?.phase as Any })")
        try ui.press("C-c")
        await client.close()
    }

    /// `tether --plain` on the set, and what the test types into it. Its input stays open (a
    /// FIFO the test holds, opened first so that neither side waits for the other, and not
    /// inherited) until the test closes it.
    private static func plainWithInput(_ set: ComposedSet) throws -> (ChildProcess, FileHandle) {
        let input = set.run.path + "/plain.input"
        #expect(mkfifo(input, 0o600) == 0)
        let typing = FileHandle(fileDescriptor: open(input, O_RDWR | O_CLOEXEC), closeOnDealloc: true)
        let plain = try ChildProcess(
            Programs.path("tether"), ["--plain", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "plain", standardInput: input)
        return (plain, typing)
    }

    /// `tether --plain` carries out the slash commands Tether handles itself, as the terminal
    /// UI and the page do, and prints their answers as lines; none of them reaches the gateway.
    @Test func plainLinesCarryOutTethersOwnCommands() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3")
        defer { set.stop() }
        #expect(try set.tether(["send", "stored before"]).status == 0)
        let (plain, typing) = try Self.plainWithInput(set)
        defer { plain.stop() }
        #expect(await eventually { plain.standardOutput.contains("You said: stored before") }, "\(plain.standardOutput)")
        try typing.write(contentsOf: Data("/help\n/models\n/think\n/search stored\n/search nowhere\n/status\n".utf8))
        let expected = [
            "Tether handles these itself:", "  /search WORDS    the stored messages holding every word", "Any other line, a /command the gateway knows",
            "The gateway's models (/model NAME chooses one):", "tether-dev-echo-large", "/think LEVEL: set the thinking level",
            "Found stored, newest first:", "you: stored before", "No stored message holds nowhere.", "PROGRAM", "connection: Connected", "outbox: 0 pending",
        ]
        let answered = await eventually(timeout: .seconds(20)) { expected.allSatisfy(plain.standardOutput.contains) }
        #expect(answered, "missing \(expected.filter { !plain.standardOutput.contains($0) }) in:\n\(plain.standardOutput)")
        try typing.close()
        #expect(try plain.waitForExit(timeout: .seconds(20)) == 0)
        let sent = set.openClawTranscript().filter { $0.role == "user" }.map(\.text)
        #expect(sent == ["stored before"], "\(sent)")
    }

    @Test func plainLinesAnnounceEveryChangeInWords() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        #expect(try set.tether(["send", "before"]).status == 0)
        let (plain, typing) = try Self.plainWithInput(set)
        defer { plain.stop() }
        let drawn = await eventually { plain.standardOutput.contains("you: before [delivered]") && plain.standardOutput.contains("Opta: You said: before") }
        #expect(drawn, "the stored transcript was not printed: \(plain.standardOutput)")

        #expect(try set.tether(["send", "while watching"]).status == 0)
        let followed = await eventually {
            plain.standardOutput.contains("you: while watching") && plain.standardOutput.contains("Message delivered.")
                && plain.standardOutput.contains("Opta: You said: while watching")
        }
        #expect(followed, "the exchange was not announced: \(plain.standardOutput)")

        let gateway = try #require(set.pid(of: "gateway"))
        kill(gateway, SIGKILL)
        let announced = await eventually(timeout: .seconds(20)) {
            plain.standardOutput.contains("Connection: Reconnecting…") && plain.standardOutput.contains("Connection: Reconnected.")
        }
        #expect(announced, "the connection's changes were not announced: \(plain.standardOutput)")

        // A line typed, then the end of the input: it leaves once its message is answered.
        try typing.write(contentsOf: Data("typed last\n".utf8))
        try typing.close()
        let ended = ContinuousClock.now
        let status = try plain.waitForExit(timeout: .seconds(20))
        #expect(status == 0)
        #expect(plain.standardOutput.contains("Opta: You said: typed last"), "it left before its message was answered: \(plain.standardOutput)")
        print("tether --plain:\n\(plain.standardOutput)\nexited \(ended.duration(to: .now)) after its input ended")
    }
}
