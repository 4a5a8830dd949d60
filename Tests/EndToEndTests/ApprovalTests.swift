import Foundation
import Logging
import OpenClawWire
import ProtocolHandler
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

@testable import ConnectionManager

/// OpenClaw's exec approvals through the real programs, against the development gateway
/// (a message `exec: COMMAND` makes its agent ask to run COMMAND): protod keeps what the
/// gateway waits for while no front end runs, `tether approvals` lists it and `tether
/// approve` answers it; one that expires says so; without the scope, the words say why.
@Suite(.serialized) struct ApprovalTests {
    /// The pending approvals, as `tether approvals --json` prints them.
    static func approvals(_ set: ComposedSet) throws -> ApprovalsUpdate {
        let listed = try set.tether(["approvals", "--json"])
        guard listed.status == 0 else { throw TestFailure("tether approvals: \(listed.status.map(String.init) ?? "no exit status") \(listed.standardError)") }
        return try BusSchema.makeDecoder().decode(ApprovalsUpdate.self, from: Data(listed.standardOutput.utf8))
    }

    /// The first approval `tether approvals` lists, once one is listed.
    static func firstWaiting(_ set: ComposedSet) async throws -> PendingApproval {
        var pending: [PendingApproval] = []
        #expect(
            try await eventually(timeout: .seconds(20)) {
                pending = try approvals(set).pending
                return !pending.isEmpty
            }, "no approval listed")
        return try #require(pending.first)
    }

    /// What `tether send` prints for a run whose `exec` call waits for an approval: the model's
    /// words after the call (the development gateway's), from the gateway's history.
    static func waitsWords(_ command: String) -> String {
        "Running `\(command)` needs an approval: it runs once the approval is answered.\n"
    }

    /// Whether the gateway's turn after the approval answered with `words`, in its transcript.
    static func answered(_ set: ComposedSet, _ words: String) async -> Bool {
        await eventually(timeout: .seconds(20)) { set.openClawTranscript().contains { $0.role == "assistant" && $0.text == words } }
    }

    @Test func anApprovalRaisedWhileNoFrontEndRanIsListedAndAnsweredFromTheCommandLine() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_APPROVALS": "on", "TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        // Waits for the reply in the background; the approval is raised and waits on its own.
        let sender = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "exec: make deploy", "--run-dir", set.run.path], outputDirectory: set.outputs.path,
            name: "send")
        defer { sender.stop() }
        let approval = try await Self.firstWaiting(set)
        #expect(approval.summary == "make deploy" && approval.kind == .exec && approval.host == "gateway", "\(approval)")
        #expect(approval.allowedDecisions == [.allowOnce, .allowAlways, .deny])
        let listed = try set.tether(["approvals"])
        #expect(listed.standardOutput.contains("\(approval.shortID)  run `make deploy` on gateway"), "\(listed.standardOutput)")
        // The run ends with its words: tether send prints them while the approval waits.
        #expect(try sender.waitForExit(timeout: .seconds(30)) == 0, "\(sender.standardError)")
        #expect(sender.standardOutput == Self.waitsWords("make deploy"), "\(sender.standardOutput)")
        let answered = try set.tether(["approve", approval.shortID, "allow-once"])
        #expect(answered.status == 0, "\(answered.standardError)")
        #expect(answered.standardOutput.contains("allowed once"), "\(answered.standardOutput)")
        #expect(await Self.answered(set, "Ran `make deploy` (allowed once): done."))
        #expect(try Self.approvals(set).pending.isEmpty)
        // Answered again: refused in words, nothing sent.
        let again = try set.tether(["approve", approval.shortID, "deny"])
        #expect(again.status != 0 && again.standardError.contains("no approval is waiting"), "\(again.standardError)")
    }

    /// As the real gateway: the tool call is answered "Approval required" and the run ends with
    /// no words; once approved, the gateway's own turn (`exec-approval-followup:<id>`) runs the
    /// command and answers. That turn answers the message (tether send prints it, exit 0), its
    /// prompt is shown as the gateway's with the command's outcome, never another client's, no
    /// reply is said incomplete, and reloads of the history add nothing.
    @Test func theGatewaysTurnAfterAnApprovalAnswersTheMessageAndIsNobodyElses() async throws {
        let set = try await ComposedSet.openClaw(
            release: "current", protocols: "release", environment: ["TETHER_APPROVALS": "on", "TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        #expect(try set.tether(["send", "an existing session"]).status == 0)
        let sender = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "exec: make deploy", "--run-dir", set.run.path], outputDirectory: set.outputs.path,
            name: "send")
        defer { sender.stop() }
        let approval = try await Self.firstWaiting(set)
        // The run that asked has ended, its words in the history only: tether send prints them.
        #expect(try sender.waitForExit(timeout: .seconds(30)) == 0, "\(sender.standardError)")
        #expect(sender.standardOutput == Self.waitsWords("make deploy"), "\(sender.standardOutput)")
        #expect(try set.tether(["approve", approval.shortID, "allow-once"]).status == 0)
        #expect(await Self.answered(set, "Ran `make deploy` (allowed once): done."))

        for _ in 0..<2 { #expect(try await set.killAndAwaitRestart("connd")) }
        let bus = try set.busClient("follow-up-test")
        defer { Task { await bus.close() } }
        var entries: [TranscriptEntry] = []
        let settled = await eventually(timeout: .seconds(15)) {
            entries = (try? await bus.request(TranscriptCommand.self, .init(limit: 100)).entries) ?? []
            return entries.contains { $0.author == "gateway" } && entries.contains { $0.content.hasPrefix("Ran `make deploy`") }
        }
        let lines = entries.map { "\($0.author ?? ($0.sender == .user ? "you" : "bot")) [\($0.status.rawValue)]: \($0.content)" }
        #expect(settled, "the gateway's prompt not shown as the gateway's: \(lines)")
        let asked = try #require(entries.first { $0.content == "exec: make deploy" })
        let replies = entries.filter { $0.content == "Ran `make deploy` (allowed once): done." }
        #expect(replies.count == 1 && replies.first?.inReplyTo == asked.id, "\(lines)")
        let first = entries.filter { $0.content == Self.waitsWords("make deploy").dropLast() }
        #expect(first.count == 1 && first.first?.inReplyTo == asked.id, "the run's own words answer it too: \(lines)")
        // In the order they were said: the run's words, then the gateway's turn.
        let order = entries.map(\.content)
        let said = ["Running `make deploy`", "the approved command ran", "Ran `make deploy`"].map { words in order.firstIndex { $0.hasPrefix(words) } ?? -1 }
        #expect(said.allSatisfy { $0 >= 0 } && said == said.sorted(), "the run's words, the gateway's prompt, its reply: \(lines)")
        let prompt = entries.first { $0.author == "gateway" }
        #expect(prompt?.content.hasPrefix("the approved command ran: Exec finished (gateway id=\(approval.id)") == true, "\(lines)")
        #expect(!entries.contains { $0.author == HistoryMerge.anotherClient }, "\(lines)")
        #expect(!entries.contains { $0.status == .incomplete }, "\(lines)")
        #expect(entries.contains { $0.tool?.name == "exec" }, "the tool call's line: \(lines)")
        let contents = entries.map(\.content)
        #expect(Set(contents).count == contents.count, "added twice: \(lines)")
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func theTerminalUIShowsAnApprovalOverTheInputLineAndAnswersItWithAKey() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0", "TETHER_IDLE_SUSPEND": "1"])
        defer { set.stop() }
        let ui = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 100, rows: 30, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        _ = try await ui.waitFor("No messages yet", "session agent:main:main")
        try ui.type("exec: make deploy")
        try ui.press("Enter")
        let shown = try await ui.waitFor("Approval waiting", "the agent asks to run", "   make deploy", "o allow once · a allow always · d deny · Esc later")
        print("the terminal UI with an approval waiting:\n\(shown)")
        #expect(shown.contains("on gateway"), "\(shown)")
        // Letters answer the prompt, not the draft; Esc puts it aside to type; Ctrl-G brings it back.
        try ui.type("x")
        _ = try await ui.waitFor("the approval waits for an answer: o allow once")
        try ui.press("Escape")
        _ = try await ui.waitFor("1 approval waiting (Ctrl-G)")
        try ui.type("a draft")
        _ = try await ui.waitFor("> a draft")
        try ui.press("C-g")
        _ = try await ui.waitFor("Approval waiting")
        try ui.type("d")
        // The bot's reply is Markdown: `make deploy` is code, shown in its colour without the backticks.
        let answered = try await ui.waitFor("Did not run make deploy: the approval was denied.", "> a draft")
        print("after d:\n\(answered)")
        _ = try await ui.waitForAbsence(of: "Approval waiting")
        #expect(try Self.approvals(set).pending.isEmpty)

        // Raised by another client of the gateway while no front end runs, well after the idle
        // grace period: the connection holds the approvals, so it is kept for the next front end.
        try ui.press("C-c")
        #expect(await eventually(timeout: .seconds(5)) { !ui.isRunning })
        try await Task.sleep(for: .seconds(3))
        let status = try set.tether(["status"])
        #expect(!status.standardOutput.contains("suspended"), "the connection was suspended for idleness:\n\(status.standardOutput)")
        let phone = try await OtherOpenClawClient(port: set.port, token: set.gatewayToken)
        defer { phone.stop() }
        phone.send("exec: make test")
        #expect(try await eventually(timeout: .seconds(20)) { try !Self.approvals(set).pending.isEmpty }, "no approval listed")
        let reopened = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 100, rows: 30, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        _ = try await reopened.waitFor("Approval waiting", "   make test")
        try reopened.type("o")
        _ = try await reopened.waitFor("Ran make test (allowed once): done.")  // Markdown: the code without its backticks
        #expect(set.openClawTranscript().contains { $0.role == "assistant" && $0.text == "Ran `make test` (allowed once): done." })
    }

    @Test func anApprovalThatExpiresIsSaidToHaveExpiredAndAFrontEndStartedLaterSeesWhatWaits() async throws {
        let set = try await ComposedSet.openClaw(
            environment: ["TETHER_APPROVALS": "on", "TETHER_CHUNK_DELAY": "0", "TETHER_GATEWAY_APPROVAL_TIMEOUT": "6"])
        defer { set.stop() }
        let sender = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "exec: rm -rf build", "--run-dir", set.run.path], outputDirectory: set.outputs.path,
            name: "send")
        defer { sender.stop() }
        #expect(try await eventually(timeout: .seconds(20)) { try !Self.approvals(set).pending.isEmpty }, "no approval listed")
        // A front end started after the approval was raised is shown it, then its end.
        let watch = try ChildProcess(Programs.path("tether"), ["watch", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "watch")
        defer { watch.stop() }
        #expect(await eventually(timeout: .seconds(10)) { watch.standardOutput.contains("approval waiting: ") }, "\(watch.standardOutput)")
        #expect(await eventually(timeout: .seconds(15)) { watch.standardOutput.contains("expired unanswered") }, "\(watch.standardOutput)")
        #expect(try sender.waitForExit(timeout: .seconds(30)) == 0, "\(sender.standardError)")
        #expect(sender.standardOutput == Self.waitsWords("rm -rf build"), "\(sender.standardOutput)")
        #expect(await Self.answered(set, "Did not run `rm -rf build`: nobody answered the approval in time."))
        #expect(try Self.approvals(set).pending.isEmpty)
    }

    @Test func aWiderScopeForAPairedDeviceWaitsForAPersonAsOnTheRealGateway() async throws {
        let set = try await ComposedSet.openClaw()
        defer { set.stop() }
        let identity = DeviceIdentity()
        let chat = try await OtherOpenClawClient.handshake(port: set.port, token: set.gatewayToken, identity: identity, scopes: OpenClawProtocol.chatScopes)
        guard case .ready = chat else { throw TestFailure("the chat scopes: \(chat)") }
        let wider = OpenClawProtocol.chatScopes + [OpenClawProtocol.approvalsScope]
        let upgrade = try await OtherOpenClawClient.handshake(port: set.port, token: set.gatewayToken, identity: identity, scopes: wider)
        guard case .refused(.scopeUpgradeRequired(let request?, let words)) = upgrade else { throw TestFailure("a wider scope: \(upgrade)") }
        #expect(words.contains("operator.approvals") && words.contains(request), "\(words)")
        #expect(try set.approve(request).status == 0)
        let approved = try await OtherOpenClawClient.handshake(port: set.port, token: set.gatewayToken, identity: identity, scopes: wider)
        guard case .ready(let info, _) = approved else { throw TestFailure("after the approval: \(approved)") }
        #expect(info.scopes?.contains(OpenClawProtocol.approvalsScope) == true)
    }

    @Test func withoutTheScopeTheWordsSayWhyAndTheGatewayHasNobodyToAsk() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_APPROVALS": "off", "TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        #expect(try set.tether(["send", "hello"]).status == 0)
        let update = try Self.approvals(set)
        #expect(update.unavailable?.contains("operator.approvals") == true, "\(String(describing: update.unavailable))")
        let listed = try set.tether(["approvals"])
        #expect(
            listed.standardOutput.hasPrefix("no approvals: Tether's connection to the gateway lacks the scope operator.approvals"), "\(listed.standardOutput)")
        // As the real gateway does: with no client that may approve, the request ends at once.
        let send = try set.tether(["send", "exec: ls"])
        #expect(send.status == 0 && send.standardOutput == Self.waitsWords("ls"), "\(send.standardOutput)")
        #expect(await Self.answered(set, "Did not run `ls`: nobody answered the approval in time."))
    }
}
