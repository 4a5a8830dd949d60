import Foundation
public import Logging
public import ServiceLifecycle
public import TetherBus
import TetherSchema
import TetherService
import TetherWire

/// The protocol handler: turns send commands into chat messages through the durable
/// outbox, tracks their acknowledgements, assembles streamed replies, answers pings, and
/// publishes the conversation on the bus.
public struct ProtocolService: Service {
    private let bus: BusClient
    private let engine: ProtocolEngine
    private let logger: Logger

    /// - Parameters:
    ///   - ackTimeout: how long a sent message waits for its acknowledgement before it is written again.
    public init(bus: BusClient, outbox: Outbox, ackTimeout: Duration = .seconds(5), logger: Logger) {
        self.bus = bus
        self.logger = logger
        self.engine = ProtocolEngine(bus: bus, outbox: outbox, ackTimeout: ackTimeout, logger: logger)
    }

    public func run() async throws {
        let commands = try await bus.serve(endpoint: SendMessageCommand.endpoint)
        let inbound = try await bus.subscribe(to: [Topic.connectionState.name, Topic.wireInbound.name])
        var builder = CommandDispatcher(bus: bus, logger: logger)
        let engine = self.engine
        builder.on(SendMessageCommand.self) { request in
            try await engine.send(request)
        }
        await engine.start()
        let dispatcher = builder
        await withDiscardingTaskGroup { group in
            group.addTask { await dispatcher.run(commands) }
            group.addTask {
                for await message in inbound {
                    await engine.receive(message)
                }
            }
            group.addTask {
                for await _ in AsyncTimerSequence.repeating(every: .seconds(1)) {
                    await engine.flush()
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
    }
}

/// The protocol handler's state, one event at a time.
actor ProtocolEngine {
    private let bus: BusClient
    private let outbox: Outbox
    private let ackTimeout: Duration
    private let logger: Logger
    private let codec = WireCodec()

    /// The open connection's epoch and unique name, nil while not connected.
    private var connectedEpoch: Int?
    private var connectionID: String?
    /// A flush is under way; another was asked for meanwhile.
    private var flushing = false
    private var flushAgain = false
    private var assembler = StreamAssembler()
    /// The user message acknowledged last: a reply that starts now answers it.
    private var lastAcknowledged: MessageID?
    /// For each reply being streamed, the message it answers.
    private var replyTargets: [MessageID: MessageID] = [:]
    private var botName = "Bot"
    private var unknownTypes = 0
    private var malformedFrames = 0
    /// The gateway session and the last server sequence processed.
    private var sessionID: String?
    private var lastSequence = 0
    /// For each open stream, the sequence of its first chunk: resuming must start before it.
    private var openStreamStarts: [MessageID: Int] = [:]
    private var lastSaved: (String?, Int) = (nil, 0)

    init(bus: BusClient, outbox: Outbox, ackTimeout: Duration, logger: Logger) {
        self.bus = bus
        self.outbox = outbox
        self.ackTimeout = ackTimeout
        self.logger = logger
    }

    func start() async {
        if let saved = try? await outbox.session() {
            (sessionID, lastSequence) = saved
            lastSaved = saved
        }
        await publishSummary()
    }

    /// Where a restarted protod resumes: after the last frame processed, but before the
    /// first chunk of any stream still open, whose chunks die with this process. (A running
    /// protod keeps its open streams and resumes right after the last frame.)
    private var savedResumePoint: Int {
        min(lastSequence, (openStreamStarts.values.min() ?? Int.max) - 1)
    }

    // MARK: Commands

    /// Commits a message to the outbox, then answers; sends it at once if connected.
    func send(_ request: SendMessageCommand.Request) async throws -> SendMessageCommand.Reply {
        guard !request.content.isEmpty else { throw CommandError("the message is empty") }
        let (message, inserted) = try await outbox.enqueue(id: request.id, content: request.content)
        if inserted {
            logger.info("message queued", metadata: ["message.id": "\(message.id)", "message.sequence": "\(message.sequence)"])
            publish(TranscriptEntry(id: request.id, sender: .user, content: message.content, timestamp: message.createdAt, status: .queued), on: .conversationMessage)
            publish(DeliveryUpdate(id: request.id, status: .queued), on: .conversationDelivery)
            await publishSummary()
            await flush()
        }
        let current = try await outbox.message(id: message.id) ?? message
        return SendMessageCommand.Reply(id: request.id, status: DeliveryStatus(current.status), accepted: inserted)
    }

    // MARK: Bus input

    func receive(_ message: BusMessage) async {
        switch message.topic {
        case .connectionState:
            guard let status = try? message.decode(ConnectionStatus.self) else { return countMalformed(message) }
            let connection = status.phase == .connected ? status.connectionID ?? "epoch-\(status.epoch)" : nil
            guard connection != connectionID else { return }
            connectionID = connection
            connectedEpoch = connection == nil ? nil : status.epoch
            guard let epoch = connectedEpoch else { return }
            // First ask for what the gateway sent while this client could not hear it.
            let resume = SessionResume(sessionID: sessionID, lastSequence: lastSequence)
            if let data = try? codec.encode(resume, type: WireMessageType.sessionResume.rawValue, sequence: 0) {
                publish(WireFrame(epoch: epoch, text: String(decoding: data, as: UTF8.self)), on: .wireOutbound)
            }
            await flush()
        case .wireInbound:
            guard let frame = try? message.decode(WireFrame.self) else { return countMalformed(message) }
            await handle(frame)
        default:
            break
        }
    }

    private func countMalformed(_ message: BusMessage) {
        malformedFrames += 1
        logger.warning("dropped an unreadable bus message", metadata: ["bus.topic": "\(message.topic)", "bus.source": "\(message.header.source)"])
    }

    private func handle(_ frame: WireFrame) async {
        let decoded: WireMessage
        do {
            decoded = try codec.decode(frame.text)
        } catch {
            malformedFrames += 1
            logger.warning("dropped a malformed frame from the gateway", metadata: ["wire.error": "\(error)"])
            return
        }
        if let sequence = Self.serverSequence(of: decoded) { lastSequence = max(lastSequence, sequence) }
        switch decoded {
        case .messageAck(let envelope):
            await acknowledge(envelope.payload)
        case .botState(let envelope):
            botName = envelope.payload.botName
            try? bus.retain(envelope.payload, on: .botState)
        case .streamingChunk(let envelope):
            receive(chunk: envelope.payload, sequence: envelope.sequence)
        case .chatMessage(let envelope):
            let chat = envelope.payload
            if case .bot(let name) = chat.sender, !name.isEmpty { botName = name }
            publish(
                TranscriptEntry(id: chat.id, sender: chat.sender, content: chat.content, timestamp: chat.timestamp, status: .received, inReplyTo: chat.replyTo),
                on: .conversationMessage)
        case .ping(let envelope):
            guard let pong = try? codec.encodePong(sequence: envelope.sequence) else { return }
            publish(WireFrame(epoch: frame.epoch, text: String(decoding: pong, as: UTF8.self)), on: .wireOutbound)
        case .sessionResumed(let envelope):
            resumed(envelope.payload)
        case .pong, .sessionResume:
            break
        case .unknown(let type, _, _):
            unknownTypes += 1
            logger.debug("ignored an unknown message type", metadata: ["wire.type": "\(type)"])
        }
    }

    private func acknowledge(_ ack: MessageAck) async {
        do {
            if ack.status.isDelivered {
                lastAcknowledged = ack.messageID
                if try await outbox.markDelivered(id: ack.messageID.value) {
                    publish(DeliveryUpdate(id: ack.messageID, status: .delivered), on: .conversationDelivery)
                    await publishSummary()
                }
            } else if try await outbox.markFailed(id: ack.messageID.value) {
                publish(DeliveryUpdate(id: ack.messageID, status: .failed, detail: "the gateway refused the message"), on: .conversationDelivery)
                await publishSummary()
            }
        } catch {
            logger.error("cannot record an acknowledgement", metadata: ["message.id": "\(ack.messageID)", "outbox.error": "\(error)"])
        }
    }

    /// The server sequence a frame counts for; pongs echo the ping's and resume answers are not part of the stream.
    private static func serverSequence(of message: WireMessage) -> Int? {
        switch message {
        case .chatMessage(let envelope): envelope.sequence
        case .messageAck(let envelope): envelope.sequence
        case .botState(let envelope): envelope.sequence
        case .streamingChunk(let envelope): envelope.sequence
        case .ping(let envelope): envelope.sequence
        case .unknown(_, let sequence, _): sequence
        case .pong, .sessionResume, .sessionResumed: nil
        }
    }

    /// The gateway answered a resume; a new session means it restarted.
    private func resumed(_ answer: SessionResumed) {
        if answer.sessionID != sessionID {
            logger.info("the gateway's session changed: it restarted", metadata: ["wire.session": "\(answer.sessionID)"])
            sessionID = answer.sessionID
            lastSequence = answer.lastSequence
        }
        guard !answer.complete else { return }
        // What the gateway no longer has will not come: a stream still open stays cut.
        for id in Array(openStreamStarts.keys) {
            openStreamStarts[id] = nil
            let partial = assembler.discard(id) ?? ""
            logger.warning("a streamed reply was cut off", metadata: ["message.id": "\(id)"])
            publish(
                TranscriptEntry(
                    id: id, sender: .bot(name: botName), content: partial, timestamp: Date(), status: .incomplete,
                    inReplyTo: replyTargets.removeValue(forKey: id)),
                on: .conversationMessage)
        }
    }

    private func receive(chunk: StreamingChunk, sequence: Int) {
        guard let progress = assembler.add(chunk) else { return }
        if progress.isFirst {
            openStreamStarts[chunk.messageID] = sequence
            if let target = lastAcknowledged { replyTargets[chunk.messageID] = target }
        }
        guard !progress.isDuplicate else { return }
        publish(
            StreamProgress(id: chunk.messageID, chunkIndex: chunk.chunkIndex, chunk: chunk.content, content: progress.content, isFinal: progress.isComplete),
            on: .conversationStream)
        if progress.isComplete {
            openStreamStarts[chunk.messageID] = nil
            let entry = TranscriptEntry(
                id: chunk.messageID, sender: .bot(name: botName), content: progress.content, timestamp: Date(), status: .received,
                inReplyTo: replyTargets.removeValue(forKey: chunk.messageID))
            publish(entry, on: .conversationMessage)
        }
    }

    // MARK: Sending

    /// Writes every message that needs it to the open connection, in order: queued ones,
    /// ones last written to an older connection, and ones whose acknowledgement is overdue.
    func flush() async {
        // One flush at a time: two interleaved ones could write later messages before earlier ones.
        guard !flushing else {
            flushAgain = true
            return
        }
        flushing = true
        repeat {
            flushAgain = false
            await flushOnce()
        } while flushAgain
        flushing = false
    }

    private func flushOnce() async {
        await saveResumePoint()
        guard let epoch = connectedEpoch, let connection = connectionID else { return }
        let messages: [OutboxMessage]
        do {
            messages = try await outbox.pending()
        } catch {
            logger.error("cannot read the outbox", metadata: ["outbox.error": "\(error)"])
            return
        }
        let now = Date()
        for message in messages {
            let overdue = message.lastSentAt.map { now.timeIntervalSince($0) >= ackTimeout.inSeconds } ?? true
            guard message.status == .queued || message.sentConnection != connection || overdue else { continue }
            // The connection went while this flush waited on the outbox: the next one resends.
            guard connectionID == connection else { return }
            let chat = ChatMessage(id: message.messageID, content: message.content, sender: .user, timestamp: message.createdAt, status: .pending)
            guard let data = try? codec.encode(chatMessage: chat, sequence: message.sequence) else { continue }
            publish(WireFrame(epoch: epoch, text: String(decoding: data, as: UTF8.self)), on: .wireOutbound)
            do {
                try await outbox.markSent(id: message.id, epoch: epoch, connection: connection, at: now)
            } catch {
                logger.error("cannot record a send", metadata: ["message.id": "\(message.id)", "outbox.error": "\(error)"])
            }
            if message.status == .queued {
                publish(DeliveryUpdate(id: message.messageID, status: .sent), on: .conversationDelivery)
            }
        }
    }

    /// Saves where to resume, when it moved.
    private func saveResumePoint() async {
        let point = (sessionID, max(0, savedResumePoint))
        guard point != lastSaved else { return }
        do {
            try await outbox.saveSession(sessionID: point.0, lastSequence: point.1)
            lastSaved = point
        } catch {
            logger.error("cannot save the session", metadata: ["outbox.error": "\(error)"])
        }
    }

    // MARK: Publishing

    private func publish(_ payload: some Encodable, on topic: Topic) {
        do {
            try bus.publish(payload, on: topic)
        } catch {
            logger.warning("cannot publish", metadata: ["bus.topic": "\(topic)", "bus.error": "\(error)"])
        }
    }

    private func publishSummary() async {
        guard let pending = try? await outbox.pendingCount() else { return }
        try? bus.retain(OutboxSummary(pending: pending), on: .outboxSummary)
    }
}

extension DeliveryStatus {
    init(_ status: OutboxMessage.Status) {
        switch status {
        case .queued: self = .queued
        case .sent: self = .sent
        case .delivered: self = .delivered
        case .failed: self = .failed
        }
    }
}
