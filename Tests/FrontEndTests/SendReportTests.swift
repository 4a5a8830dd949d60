import Foundation
import Synchronization
import Testing
import TetherBus
import TetherSchema
import TetherService
import TetherTesting
import TetherWire

@testable import FrontEnd

/// `tether send`'s outcome, words and exit code, decided on an in-memory bus where the test
/// plays tether-protod and time is a manual clock the test moves: no process, no waiting, in
/// milliseconds.
@Suite struct SendReportTests {
    /// protod's answer to a send: its reply, an error, or none at all.
    typealias Answer = @Sendable (SendMessageCommand.Request) -> Result<SendMessageCommand.Reply, CommandErrorReply>?

    /// What the stand-in protod does with a send: its answer, then what it publishes.
    struct Protod: Sendable {
        var answer: Answer
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
                case .success(let reply)?:
                    try? server.reply(to: command, with: reply)
                    try? protod.then(request.id, server)
                case .failure(let refusal)?:
                    try? server.reply(to: command, error: refusal)
                case nil:
                    break
                }
            }
        }
    }

    /// protod's answers to the send and to each time the same id is sent again, in order, the
    /// last one repeated; nil: it does not answer. A repeated id is never accepted twice.
    static func answering(_ statuses: DeliveryStatus?...) -> Answer {
        let asked = Asked()
        return { request in
            let count = asked.next()
            return statuses[min(count, statuses.count - 1)].map {
                .success(SendMessageCommand.Reply(id: request.id, status: $0, accepted: count == 0))
            }
        }
    }

    final class Asked: Sendable {
        private let count = Mutex(0)

        /// How many times it was asked before.
        func next() -> Int {
            count.withLock { count in
                defer { count += 1 }
                return count
            }
        }
    }

    static func accepted(_ status: DeliveryStatus = .queued) -> Answer {
        answering(status)
    }

    /// Sends "hello" through `protod`; the time does not move, so the events (or the answer)
    /// alone decide the outcome.
    static func send(through protod: Protod) async throws -> SendReport {
        let clock = ManualClock()
        let bus = InMemoryBus(clock: clock)
        let serving = try await serve(protod, on: bus)
        defer { serving.cancel() }
        let outcome = try await Conversation(bus: bus.client("tether send"), clock: clock).send("hello", timeout: .seconds(5))
        return SendReport(outcome, timeout: 5)
    }

    /// Sends "hello" through `protod` with a timeout of 5 s, and moves the clock through
    /// `moments` (from the start), each once something waits for it: the time is up when
    /// the send has got as far as waiting for it, and not before.
    static func send(through protod: Protod, movingTimeTo moments: [Duration]) async throws -> SendReport {
        let clock = ManualClock()
        let bus = InMemoryBus(clock: clock)
        let serving = try await serve(protod, on: bus)
        defer { serving.cancel() }
        let conversation = Conversation(bus: bus.client("tether send"), clock: clock)
        let sending = Task { try await conversation.send("hello", timeout: .seconds(5)) }
        let start = clock.now
        for moment in moments {
            await clock.sleeping(until: start.advanced(by: moment))
            clock.advance(to: start.advanced(by: moment))
        }
        return SendReport(try await sending.value, timeout: 5)
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
        // Asked again when the time is up, protod says delivered too: the outcome is the same
        // whether or not the delivery update was seen first.
        let report = try await Self.send(
            through: Protod(answer: Self.answering(.queued, .delivered)) { id, bus in
                try bus.publish(DeliveryUpdate(id: id, status: .delivered), on: .conversationDelivery)
            }, movingTimeTo: [.seconds(5)])
        #expect(report == SendReport(reply: nil, notes: ["delivered, but no whole reply within 5.0 s"], exitCode: .deliveredWithoutReply))
    }

    @Test func aMessageStillQueuedWhenTimeIsUpExitsOneAndSaysItStaysQueued() async throws {
        let report = try await Self.send(through: Protod(answer: Self.accepted()), movingTimeTo: [.seconds(5)])
        #expect(report.exitCode == .notDone)
        #expect(report.notes.first?.hasPrefix("not delivered within 5.0 s: the message is queued") == true, "\(report.notes)")
    }

    @Test func aMessageSentButNotAcknowledgedWhenTimeIsUpExitsOneAndSaysItMayHaveReachedTheGateway() async throws {
        let report = try await Self.send(through: Protod(answer: Self.answering(.sent)), movingTimeTo: [.seconds(5)])
        #expect(report.exitCode == .notDone)
        #expect(report.notes.first?.hasPrefix("not acknowledged within 5.0 s: the message was sent and may have reached the gateway") == true)
    }

    @Test func aProtodThatStopsAnsweringAfterTheSendIsNotSaidToHaveLostTheMessage() async throws {
        // Accepted, then silent when asked at the end: asked for 2 s after the 5 s.
        let report = try await Self.send(through: Protod(answer: Self.answering(.queued, nil)), movingTimeTo: [.seconds(5), .seconds(7)])
        #expect(report.exitCode == .notDone)
        #expect(
            report.notes == [
                "not confirmed within 5.0 s, and tether-protod did not answer when asked: the message is in the outbox "
                    + "(queued when last heard; it may have been sent since)"
            ])
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

    /// A bus that is not there: every use of it fails as a client's does with no proxy.
    struct AbsentBus: Bus {
        static let error = BusError.busUnavailable(path: "/run/tether/bus.in")
        func publish(_ payload: some Encodable, on topic: Topic) throws(BusError) { throw Self.error }
        func publish<Payload: DirectJSONBody>(_ payload: Payload, on topic: Topic) throws(BusError) { throw Self.error }
        func retain(_ payload: some Encodable, on topic: Topic) throws(BusError) { throw Self.error }
        func subscribe(to prefixes: [String], confirm: Bool, timeout: Duration) async throws(BusError) -> BusSubscription { throw Self.error }
        func confirmRoundTrip(timeout: Duration) async throws(BusError) { throw Self.error }
        func subscriberPresence(for topic: Topic) throws(BusError) -> AsyncStream<Bool> { throw Self.error }
        func request<Command: BusCommand>(
            _ command: Command.Type, _ request: Command.Request, requestID: String, timeout: Duration, attempts: Int
        ) async throws(BusError) -> Command.Reply { throw Self.error }
        func serve(endpoint name: String) async throws(BusError) -> AsyncStream<IncomingCommand> { throw Self.error }
        func reply(to command: IncomingCommand, encodedBody: Data) throws(BusError) { throw Self.error }
        func reply(to command: IncomingCommand, error: CommandErrorReply) throws(BusError) { throw Self.error }
        var statistics: BusCounters { BusCounters() }
    }

    @Test func aSendWithNoBusExitsFourInTheBussWords() async throws {
        let clock = ManualClock()
        do {
            let outcome = try await Conversation(bus: AbsentBus(), clock: clock).send("hello", timeout: .seconds(5))
            Issue.record("a send with no bus ended as \(outcome)")
        } catch {
            let report = try #require(SendReport(unreachable: error))
            #expect(report == SendReport(reply: nil, notes: ["\(AbsentBus.error)"], exitCode: .notRunning))
        }
    }

    @Test func aSetThatCannotBeReachedExitsFourAndOtherErrorsAreNotTakenForIt() {
        let report = SendReport(unreachable: BusError.busUnavailable(path: "/run/tether/bus.in"))
        #expect(report?.exitCode == .notRunning && report?.notes.count == 1)
        #expect(SendReport(unreachable: BusError.timedOut(endpoint: "protod.cmd", attempts: 2))?.exitCode == .notRunning)
        #expect(SendReport(unreachable: CommandErrorReply(.failed, "a database error")) == nil)
    }

    @Test func aProtodThatNeverAnswersIsNotSaidToHaveLostTheMessage() async throws {
        // Each attempt of the send waits 2.5 s for protod's answer.
        let report = try await Self.send(through: Protod(answer: Self.answering(nil)), movingTimeTo: [.milliseconds(2500)])
        #expect(report.exitCode == .notDone)
        #expect(report.notes == ["not confirmed within 5.0 s: " + Conversation.unansweredSend])
    }

    @Test func waitingForAConnectionEndsWhenOneIsOpenOrTheTimeIsUp() async throws {
        let clock = ManualClock()
        let bus = InMemoryBus(clock: clock)
        let conversation = Conversation(bus: bus.client("tether send"), clock: clock)
        let waiting = Task { try await conversation.waitForConnection(timeout: .seconds(10)) }
        await clock.sleeping(until: clock.now.advanced(by: .seconds(10)))
        clock.advance(by: .seconds(10))
        #expect(try await waiting.value == false)

        try bus.client("tether-connd").retain(ConnectionStatus(phase: .connected, url: "ws://gateway", epoch: 1), on: .connectionState)
        #expect(try await conversation.waitForConnection(timeout: .seconds(10)))
    }
}
