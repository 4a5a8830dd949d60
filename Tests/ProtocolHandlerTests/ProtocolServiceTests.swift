import Foundation
import Logging
import ProtocolHandler
import ServiceLifecycle
import Synchronization
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// tether-protod's service on an in-memory bus, with real SQLite files and a stand-in for
/// connd and the gateway: the wiring between the delivery machine, the outbox and the bus,
/// without processes.
@Suite struct ProtocolServiceTests {
    /// protod running on an in-memory bus, and a stand-in connd that answers frames as `gateway` says.
    final class Rig: Sendable {
        let bus = InMemoryBus()
        let run: TestRunDirectory
        let group: ServiceGroup
        let front: InMemoryBus.Client
        let stand: InMemoryBus.Client
        /// What the stand-in connd was asked (reconnect reasons).
        let reconnects = Lines()
        private let tasks = Mutex<[Task<Void, Never>]>([])

        /// `gateway` answers each frame written with the frames to send back.
        init(settings: DeliveryStateMachine.Settings, connected: Bool = true, gateway: @escaping @Sendable (WireMessage) -> [String]) async throws {
            run = try TestRunDirectory()
            front = bus.client("test-front-end")
            stand = bus.client("tether-connd")
            let logger = Logger(label: "protod-test")
            let service = ProtocolService(
                bus: bus.client("tether-protod"), outbox: try Outbox(path: run.path + "/protod.sqlite"),
                journal: try ConversationJournal(path: run.path + "/conversation.sqlite"), settings: ProtocolSettings(delivery: settings),
                logger: logger)
            group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: logger))
            let group = self.group
            let stand = self.stand
            let reconnects = self.reconnects
            // connd's side: the frames protod writes go to the gateway stand-in, its answers come back on wire.in.
            let outbound = try await stand.subscribe(to: [Topic.wireOutbound.name])
            let commands = try await stand.serve(endpoint: ConnectionCommand.endpoint)
            try stand.retain(
                ConnectionStatus(phase: connected ? .connected : .reconnecting, url: "ws://test", epoch: 1, connectionID: connected ? "c-1" : nil),
                on: .connectionState)
            tasks.withLock {
                $0.append(Task { try? await group.run() })
                $0.append(
                    Task {
                        for await message in outbound {
                            guard let frame = try? message.decode(WireFrame.self), let decoded = try? WireCodec().decode(frame.text) else { continue }
                            for answer in gateway(decoded) { try? stand.publish(WireFrame(epoch: 1, text: answer), on: .wireInbound) }
                        }
                    })
                $0.append(
                    Task {
                        for await command in commands {
                            guard let request = try? BusSchema.makeDecoder().decode(ConnectionCommand.Request.self, from: command.body) else { continue }
                            reconnects.append(request.reason ?? "")
                            try? stand.reply(to: command, with: ConnectionCommand.Reply(accepted: true, phase: .reconnecting))
                        }
                    })
            }
        }

        deinit {
            let group = self.group
            Task { await group.triggerGracefulShutdown() }
            tasks.withLock { $0.forEach { $0.cancel() } }
        }

        /// Sends through protod's command, as a front end does.
        func send(_ text: String, id: MessageID = .random()) async throws -> SendMessageCommand.Reply {
            try await front.request(SendMessageCommand.self, .init(id: id, content: text))
        }
    }

    /// Lines recorded from any task.
    final class Lines: Sendable {
        private let lines = Mutex<[String]>([])

        func append(_ line: String) {
            lines.withLock { $0.append(line) }
        }

        var all: [String] { lines.withLock { $0 } }
    }

    static let codec = WireCodec()

    /// A gateway with Tether's additions: it acknowledges, then streams "You said: …" naming the message.
    static func answering(_ message: WireMessage) -> [String] {
        guard case .chatMessage(let envelope) = message else {
            if case .ping(let ping) = message { return [String(decoding: try! codec.encodePong(sequence: ping.sequence), as: UTF8.self)] }
            return []
        }
        let chat = envelope.payload
        let ack = try! codec.encode(MessageAck(messageID: chat.id, status: .received), type: WireMessageType.messageAck.rawValue, sequence: 1)
        let reply = StreamingChunk(
            messageID: MessageID("reply-\(chat.id)"), chunkIndex: 0, content: "You said: \(chat.content)", isFinal: true, replyTo: chat.id)
        let chunk = try! codec.encode(reply, type: WireMessageType.streamingChunk.rawValue, sequence: 2)
        return [String(decoding: ack, as: UTF8.self), String(decoding: chunk, as: UTF8.self)]
    }

    @Test func aMessageIsWrittenAcknowledgedAndAnsweredThroughTheBus() async throws {
        let rig = try await Rig(settings: .init()) { Self.answering($0) }
        let messages = try await BusRecorder<TranscriptEntry>(bus: rig.front, topic: .conversationMessage)
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: rig.front, topic: .conversationDelivery)
        let id = MessageID.random()
        let reply = try await rig.send("hello", id: id)
        #expect(reply.accepted)
        _ = try await deliveries.waitFor(timeout: .seconds(5)) { $0.id == id && $0.status == .delivered }
        let answer = try await messages.waitFor(timeout: .seconds(5)) { $0.inReplyTo == id }
        #expect(answer.value.content == "You said: hello")
        #expect(answer.value.attribution == .gateway)
        #expect(answer.value.revision != nil, "journalled before it was published")
        let again = try await rig.send("hello", id: id)
        #expect(!again.accepted, "the same id is not sent twice")
        #expect(again.status == .delivered)
    }

    @Test func aSilentGatewayHasItsConnectionReplacedAndTheMessageKept() async throws {
        let rig = try await Rig(settings: .init(probeAfter: 0.1, probeDeadline: 0.1)) { _ in [] }
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: rig.front, topic: .conversationDelivery)
        let id = MessageID.random()
        _ = try await rig.send("into the silence", id: id)
        let asked = await eventually(timeout: .seconds(5)) { !rig.reconnects.all.isEmpty }
        #expect(asked, "protod did not ask connd for a new connection")
        #expect(rig.reconnects.all.first?.contains("no ping") == true)
        #expect(await deliveries.entries.map(\.value.status) == [.queued, .sent], "the message was settled though the gateway may have it")
    }

    @Test func aFullQueueIsRefusedInWordsAndNothingIsDropped() async throws {
        let rig = try await Rig(settings: .init(maximumQueued: 2), connected: false) { Self.answering($0) }
        _ = try await rig.send("one")
        _ = try await rig.send("two")
        do {
            _ = try await rig.send("three")
            Issue.record("a third message was queued in an outbox of 2")
        } catch {
            #expect("\(error)".contains("the outbox is full: 2 messages wait to be sent"), "\(error)")
        }
        let summary = try await BusRecorder<OutboxSummary>(bus: rig.front, topic: .outboxSummary)
        let pending = try await summary.waitFor { _ in true }
        #expect(pending.value.pending == 2)
    }
}
