import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherService
import TetherTesting
import TetherWire

@testable import FrontEnd

/// `tether send`'s outcome, words and exit code, decided on an in-memory bus where the test
/// plays tether-protod: no process, in milliseconds.
@Suite struct SendReportTests {
    /// What the stand-in protod does with a send: its answer, then what it publishes.
    struct Protod: Sendable {
        var answer: @Sendable (SendMessageCommand.Request) -> Result<SendMessageCommand.Reply, CommandErrorReply>
        var then: @Sendable (MessageID, any Bus) throws -> Void = { _, _ in }
    }

    /// Serves protod's endpoint on `bus` as `protod` says, until the returned task is cancelled.
    static func serve(_ protod: Protod, on bus: InMemoryBus) async throws -> Task<Void, Never> {
        let server = bus.client("tether-protod")
        let commands = try await server.serve(endpoint: Endpoints.protocolHandler)
        return Task {
            for await command in commands where command.method == SendMessageCommand.method {
                guard let request = try? BusSchema.decoder.decode(SendMessageCommand.Request.self, from: command.body) else { continue }
                switch protod.answer(request) {
                case .success(let reply):
                    try? server.reply(to: command, with: reply)
                    try? protod.then(request.id, server)
                case .failure(let refusal):
                    try? server.reply(to: command, error: refusal)
                }
            }
        }
    }

    static func accepted(_ status: DeliveryStatus = .queued) -> @Sendable (SendMessageCommand.Request) -> Result<SendMessageCommand.Reply, CommandErrorReply> {
        { .success(SendMessageCommand.Reply(id: $0.id, status: status, accepted: true)) }
    }

    /// Sends "hello" through `protod`, waiting at most `timeout`.
    static func send(through protod: Protod, timeout: Duration = .seconds(2)) async throws -> SendReport {
        let bus = InMemoryBus()
        let serving = try await serve(protod, on: bus)
        defer { serving.cancel() }
        let outcome = try await Conversation(bus: bus.client("tether send")).send("hello", timeout: timeout)
        return SendReport(outcome, timeout: Double(timeout.components.seconds))
    }

    static func reply(to id: MessageID, status: DeliveryStatus = .received, detail: String? = nil) -> TranscriptEntry {
        TranscriptEntry(
            id: MessageID(id.value + ":reply"), sender: .bot(name: "Opta"), content: "You said: hello", timestamp: Date(), status: status,
            inReplyTo: id, attribution: .gateway, detail: detail)
    }

    @Test func aWholeReplyIsPrintedAndExitsZero() async throws {
        let report = try await Self.send(
            through: Protod(answer: Self.accepted()) { id, bus in
                try bus.publish(DeliveryUpdate(id: id, status: .delivered), on: .conversationDelivery)
                try bus.publish(Self.reply(to: id), on: .conversationMessage)
            })
        #expect(report == SendReport(reply: "You said: hello", notes: [], exitCode: .success))
    }

    @Test func aReplyCutOffIsPrintedAsFarAsItCameAndExitsThree() async throws {
        let report = try await Self.send(
            through: Protod(answer: Self.accepted()) { id, bus in
                try bus.publish(Self.reply(to: id, status: .incomplete, detail: "the reply was stopped (chat.abort)"), on: .conversationMessage)
            })
        #expect(report.exitCode == .deliveredWithoutReply && report.reply == "You said: hello")
        #expect(report.notes == ["delivered, but the reply is incomplete: the reply was stopped (chat.abort)"])
    }

    @Test func aReplyThatCannotBeClaimedIsNotPrintedAndExitsThree() async throws {
        let report = try await Self.send(
            through: Protod(answer: Self.accepted()) { id, bus in
                try bus.publish(
                    DeliveryUpdate(id: id, status: .delivered, detail: "it cannot be told for certain", unclaimedReply: MessageID("r")),
                    on: .conversationDelivery)
            })
        #expect(report.exitCode == .deliveredWithoutReply && report.reply == nil)
        #expect(report.notes.first?.hasPrefix("delivered, but no reply is printed: it cannot be told for certain") == true)
    }

    @Test func deliveredWithNoReplyInTimeExitsThree() async throws {
        let report = try await Self.send(
            through: Protod(answer: Self.accepted()) { id, bus in
                try bus.publish(DeliveryUpdate(id: id, status: .delivered), on: .conversationDelivery)
            }, timeout: .seconds(1))
        #expect(report == SendReport(reply: nil, notes: ["delivered, but no whole reply within 1.0 s"], exitCode: .deliveredWithoutReply))
    }

    @Test func aMessageStillQueuedWhenTimeIsUpExitsOneAndSaysItStaysQueued() async throws {
        let report = try await Self.send(through: Protod(answer: Self.accepted()), timeout: .seconds(1))
        #expect(report.exitCode == .notDone)
        #expect(report.notes.first?.hasPrefix("not delivered within 1.0 s: the message is queued") == true, "\(report.notes)")
    }

    @Test func aMessageTheGatewayRefusedExitsOne() async throws {
        let report = try await Self.send(
            through: Protod(answer: Self.accepted()) { id, bus in
                try bus.publish(DeliveryUpdate(id: id, status: .failed, detail: "the gateway refused the message: INVALID_REQUEST"), on: .conversationDelivery)
            })
        #expect(report == SendReport(reply: nil, notes: ["not delivered: failed: the gateway refused the message: INVALID_REQUEST"], exitCode: .notDone))
    }

    @Test func aSendRefusedBeforeAnythingWasQueuedExitsFive() async throws {
        let report = try await Self.send(
            through: Protod(answer: { _ in .failure(CommandErrorReply(.refused, "the outbox is full")) }))
        #expect(report == SendReport(reply: nil, notes: ["refused, nothing was queued: the outbox is full"], exitCode: .refused))
    }

    @Test func aSetThatCannotBeReachedExitsFourAndOtherErrorsAreNotTakenForIt() {
        let report = SendReport(unreachable: BusError.busUnavailable(path: "/run/tether/bus.in"))
        #expect(report?.exitCode == .notRunning && report?.notes.count == 1)
        #expect(SendReport(unreachable: BusError.timedOut(endpoint: "protod.cmd", attempts: 2))?.exitCode == .notRunning)
        #expect(SendReport(unreachable: CommandErrorReply(.failed, "a database error")) == nil)
    }

    @Test func aProtodThatNeverAnswersIsNotSaidToHaveLostTheMessage() async throws {
        let bus = InMemoryBus()
        let outcome = try await Conversation(bus: bus.client("tether send")).send("hello", timeout: .seconds(1))
        let report = SendReport(outcome, timeout: 1)
        #expect(report.exitCode == .notDone)
        #expect(report.notes == ["not confirmed within 1.0 s: " + Conversation.unansweredSend])
    }
}
