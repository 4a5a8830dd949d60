import Foundation
import OpenClawWire
import Testing
import TetherSchema
import TetherWire

@testable import ProtocolHandler

/// The gateway's own turn after an exec approval (`exec-approval-followup:<id>`): it answers
/// the message whose run asked for the approval, and that run's end with no words is no
/// reply cut off.
@Suite struct ApprovalFollowUpTests {
    typealias Driver = OpenClawDeliveryTests.Driver

    static let approval = "8f3c2a10-5d4e-4f7a-9b61-0c2d3e4f5a6b"
    static let prompt = """
        [Thu 2026-12-03 06:30 UTC] An async command the user already approved has completed.
        Do not run the command again.

        Exact completion details:
        Exec finished (gateway id=\(approval), session=8f3c2a10, code 0)
        line 1 of make deploy

        Reply to the user in a helpful way.
        If it succeeded, share the relevant output.
        If it failed, explain what went wrong.
        """

    /// `m1` sent and its run started (it called `exec`).
    static func asking() throws -> Driver {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history(OpenClawDeliveryTests.earlier, on: "c1")
        driver.send("m1", content: "exec: make deploy")
        let send = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        driver.respond(send.id, OpenClawDeliveryTests.started)
        driver.agent("m1", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        driver.agent("m1", stream: "tool", ["phase": .string("start"), "name": .string("exec"), "toolCallId": .string("call_1")], on: "c1")
        return driver
    }

    static func requested(_ driver: inout Driver) {
        let record = ApprovalRecord(
            id: approval, request: ApprovalRecord.Request(command: "make deploy", sessionKey: "agent:main:main"), createdAtMs: nil, expiresAtMs: nil)
        driver.event("exec.approval.requested", try? JSONValue(encoding: record), on: "c1")
    }

    /// The gateway's turn, and the history lookups it asks answered: its reply is published
    /// once the history (with the gateway's prompt) was read.
    static func followUp(_ driver: inout Driver, at seconds: Double? = nil) {
        let run = "exec-approval-followup:\(approval)"
        driver.chat(OpenClawDeliveryTests.delta(run, text: "Ran", increment: "Ran"), on: "c1", at: seconds)
        driver.chat(OpenClawDeliveryTests.final(run, text: "Ran `make deploy` (allowed once): done."), on: "c1")
        #expect(!driver.entries().contains { $0.id == ApprovalFollowUps.replyID(of: approval) }, "published before the history was read")
        for _ in 0..<2 { driver.history(OpenClawDeliveryTests.earlier, on: "c1") }
    }

    /// The follow-up's reply, as published.
    static func reply(_ driver: Driver) -> TranscriptEntry? {
        driver.entries { $0.id == ApprovalFollowUps.replyID(of: approval) }.last
    }

    static func emptyFinal(_ driver: inout Driver) {
        driver.chat(ChatEventPayload(runId: "m1", sessionKey: "agent:main:main", seq: nil, state: .final, message: nil), on: "c1")
    }

    @Test func theGatewaysTurnAfterTheApprovalAnswersTheMessageWhoseRunAskedForIt() throws {
        var driver = try Self.asking()
        Self.requested(&driver)
        Self.emptyFinal(&driver)
        #expect(driver.entries { $0.status == .incomplete }.isEmpty, "a run that asked for an approval is no reply cut off")
        #expect(driver.deliveries(of: "m1").last == .delivered)
        #expect(driver.machine.runs.isEmpty)

        let lookedUp = driver.lookups(on: "c1")
        Self.followUp(&driver, at: 40)
        let reply = try #require(Self.reply(driver))
        #expect(reply.status == .received && reply.inReplyTo == MessageID("m1"))
        #expect(reply.content == "Ran `make deploy` (allowed once): done.")
        #expect(driver.lookups(on: "c1") > lookedUp, "the turn's prompt is read from the history")
    }

    @Test func withoutTheApprovalHeardTheTurnSoonAfterAnExecCallThatSaidNothingAnswersIt() throws {
        var driver = try Self.asking()
        Self.emptyFinal(&driver)
        #expect(driver.entries { $0.status == .incomplete }.isEmpty)
        Self.followUp(&driver, at: 1)
        #expect(Self.reply(driver)?.inReplyTo == MessageID("m1"))
    }

    @Test func aTurnLongAfterAnUntiedExecCallClaimsNothing() throws {
        var driver = try Self.asking()
        Self.emptyFinal(&driver)
        Self.followUp(&driver, at: 100)
        let reply = try #require(Self.reply(driver))
        #expect(reply.inReplyTo == nil)
    }

    @Test func aRunWithNoWordsThatAskedNothingIsStillSaidToHaveNoReply() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history(OpenClawDeliveryTests.earlier, on: "c1")
        driver.send("m1")
        let send = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        driver.respond(send.id, OpenClawDeliveryTests.started)
        driver.agent("m1", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        Self.emptyFinal(&driver)
        #expect(driver.entries { $0.status == .incomplete }.first?.detail == "the gateway ended the run with no reply")
    }

    @Test func thePromptInTheHistoryIsTheGatewaysWithTheOutcomeAndItsReplyTheFollowUps() {
        #expect(ApprovalFollowUps.isPrompt(Self.prompt))
        #expect(ApprovalFollowUps.approval(inPrompt: Self.prompt) == Self.approval)
        #expect(
            ApprovalFollowUps.outcome(inPrompt: Self.prompt) == "Exec finished (gateway id=\(Self.approval), session=8f3c2a10, code 0)\nline 1 of make deploy")
        let denied =
            "An async command did not run.\nExact completion details:\nExec denied (gateway id=abc, user-denied): ls\n\nReply to the user in a helpful way."
        #expect(ApprovalFollowUps.approval(inPrompt: denied) == "abc")
        #expect(ApprovalFollowUps.words(ofPrompt: denied) == "the command did not run: Exec denied (gateway id=abc, user-denied): ls")
        // 2026.4.12's words after the details.
        let older =
            "An async command the user already approved has completed.\nDo not run the command again.\n\nExact completion details:\n"
            + "Exec finished (gateway id=abc, session=brisk-dune, code 0)\napproved-1\n\n"
            + "Continue the task if needed, then reply to the user in a helpful way.\nIf it succeeded, share the relevant output."
        #expect(ApprovalFollowUps.words(ofPrompt: older) == "the approved command ran: Exec finished (gateway id=abc, session=brisk-dune, code 0)\napproved-1")
        #expect(!ApprovalFollowUps.isPrompt("[a note] hello"))
        #expect(ApprovalFollowUps.approval(ofRun: "exec-approval-followup:abc") == "abc" && ApprovalFollowUps.approval(ofRun: "m1") == nil)

        let history = [
            OpenClawDeliveryTests.user("exec: make deploy", at: -5),
            OpenClawDeliveryTests.user(Self.prompt, at: -3),
            OpenClawDeliveryTests.assistant("Ran `make deploy` (allowed once): done.", at: -2),
        ]
        let merge = HistoryMerge.merge(
            history, limit: 100,
            context: HistoryMerge.Context(
                sent: [HistoryMerge.Sent(id: MessageID("m1"), text: "exec: make deploy", createdAt: OpenClawDeliveryTests.at(-5))], clockOffset: 0,
                botName: "Opta", followUpOwner: { $0 == Self.approval ? MessageID("m1") : nil }))
        let prompt = merge.entries.first { $0.author == ApprovalFollowUps.author }
        #expect(prompt?.content.hasPrefix("the approved command ran: Exec finished") == true, "\(merge.entries)")
        let reply = merge.entries.first { $0.sender != .user }
        #expect(reply?.id == ApprovalFollowUps.replyID(of: Self.approval) && reply?.inReplyTo == MessageID("m1"), "\(merge.entries)")
        #expect(!merge.entries.contains { $0.author == HistoryMerge.anotherClient })
    }
}
