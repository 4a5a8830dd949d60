import Foundation
public import Logging
public import ServiceLifecycle
public import TetherBus
public import TetherSchema
public import TetherService
import TetherWire

/// How protod keeps its outbox.
public struct ProtocolSettings: Sendable {
    /// The retry policy of a message that names none.
    public var defaultRetry: RetryPolicy
    /// At most this many messages wait; the oldest is dropped for a new one.
    public var maximumPending: Int
    /// A message not delivered this long after it was accepted expires.
    public var expiry: Duration
    /// How often the outbox is checked for messages to write, retry or expire.
    public var tick: Duration

    public init(defaultRetry: RetryPolicy = .default, maximumPending: Int = 100, expiry: Duration = .seconds(3600), tick: Duration = .milliseconds(250)) {
        self.defaultRetry = defaultRetry
        self.maximumPending = max(1, maximumPending)
        self.expiry = expiry
        self.tick = tick
    }
}

/// The counters protod sends with its heartbeat.
public enum ProtocolCounter {
    /// Frames from the gateway (or bus messages) that could not be read, dropped.
    public static let malformedFrames = "malformedFrames"
    /// Gateway messages of a type this version does not know, ignored.
    public static let unknownTypes = "unknownTypes"
    public static let all = [malformedFrames, unknownTypes]
}

/// The protocol handler: turns send commands into chat messages through the durable
/// outbox, tracks their acknowledgements, assembles streamed replies, answers pings,
/// judges health, and publishes the conversation, suggestions and diagnostics on the bus.
public struct ProtocolService: Service {
    private let bus: BusClient
    private let engine: ProtocolEngine
    private let settings: ProtocolSettings
    private let logger: Logger

    /// - Parameter counters: where the frames protod drops are counted (``ProtocolCounter``).
    public init(
        bus: BusClient, outbox: Outbox, journal: ConversationJournal, settings: ProtocolSettings = ProtocolSettings(),
        counters: ProgramCounters = ProgramCounters(), logger: Logger
    ) {
        self.bus = bus
        self.logger = logger
        self.settings = settings
        self.engine = ProtocolEngine(bus: bus, outbox: outbox, journal: journal, settings: settings, counters: counters, logger: logger)
    }

    public func run() async throws {
        let commands = try await bus.serve(endpoint: SendMessageCommand.endpoint)
        let inbound = try await bus.subscribe(to: [Topic.connectionState.name, Topic.wireInbound.name, Topic.networkPath.name])
        let wirePath = try bus.subscriberPresence(for: .wireOutbound)
        let bus = self.bus
        var builder = CommandDispatcher(bus: bus, logger: logger)
        let engine = self.engine
        builder.on(SendMessageCommand.self) { request in
            try await engine.send(request)
        }
        builder.on(CancelCommand.self) { request in
            try await engine.cancel(request.id)
        }
        builder.on(RecoverCommand.self) { _ in
            await engine.attemptRecovery()
        }
        builder.on(JournalCommand.self) { request in
            try await engine.journalChanges(after: request.after, limit: request.limit)
        }
        await engine.start()
        let dispatcher = builder
        let tick = settings.tick
        await withDiscardingTaskGroup { group in
            group.addTask { await dispatcher.run(commands) }
            group.addTask {
                for await message in inbound {
                    await engine.receive(message)
                }
            }
            group.addTask {
                for await heard in wirePath {
                    // The gateway's replay must find this side listening too.
                    if heard { try? await bus.confirmRoundTrip(timeout: .seconds(2)) }
                    await engine.wirePath(heard: heard)
                }
            }
            group.addTask {
                for await _ in AsyncTimerSequence.repeating(every: tick) {
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
    private let journal: ConversationJournal
    private let settings: ProtocolSettings
    private let logger: Logger
    private let codec = WireCodec()
    private var health = HealthMonitor()
    private var suggestions = SuggestionBook()
    /// Messages waiting, as last counted; the outbox is read on a tick only when some are.
    private var pendingCount = 0

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
    private let counters: ProgramCounters
    /// The gateway session and the last server sequence processed.
    private var sessionID: String?
    private var lastSequence = 0
    /// For each open stream, the sequence of its first chunk: resuming must start before it.
    private var openStreamStarts: [MessageID: Int] = [:]
    /// For each open stream, when it was last published and how much of it.
    private var streamsPublished: [MessageID: StreamPublication] = [:]
    private var lastSaved: (String?, Int) = (nil, 0)
    /// Whether connd's subscription to wire.out is at the proxy: frames written while it is
    /// not are lost, so none are.
    private var wireHeard = false
    /// When the bus path to connd last dropped: frames written before then may be lost.
    private var wireLostAt: Date?
    /// The server sequence to ask the gateway to resume after, once frames reach connd again.
    private var pendingResume: Int?

    init(bus: BusClient, outbox: Outbox, journal: ConversationJournal, settings: ProtocolSettings, counters: ProgramCounters, logger: Logger) {
        self.bus = bus
        self.outbox = outbox
        self.journal = journal
        self.settings = settings
        self.counters = counters
        self.logger = logger
    }

    func start() async {
        if let saved = try? await outbox.session() {
            (sessionID, lastSequence) = saved
            lastSaved = saved
        }
        try? bus.retain(health.report, on: .health)
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
        var strategy = request.strategy ?? .queued
        if strategy == .immediate && connectedEpoch == nil, let fallback = request.fallback, fallback != .immediate {
            diagnose(DiagnosticEvent(kind: .fallbackUsed, messageID: request.id, detail: "not connected: \(fallback.rawValue) instead of immediate"))
            strategy = fallback
        }
        guard strategy != .latestOnly || request.kind != nil else { throw CommandError("latestOnly needs a kind") }
        let (message, inserted) = try await outbox.enqueue(
            id: request.id, content: request.content, strategy: strategy, kind: request.kind, retry: request.retry ?? settings.defaultRetry)
        if inserted {
            logger.info("message queued", metadata: ["message.id": "\(message.id)", "message.sequence": "\(message.sequence)"])
            publishChange(TranscriptEntry(id: request.id, sender: .user, content: message.content, timestamp: message.createdAt, status: .queued))
            publishChange(DeliveryUpdate(id: request.id, status: .queued))
            if strategy == .immediate && connectedEpoch == nil {
                await finish([message.id], as: .failed, detail: "not connected, and the message was to be sent immediately")
            }
            if strategy == .latestOnly, let kind = request.kind {
                let superseded = try await outbox.queued(kind: kind, olderThan: message.sequence)
                await finish(superseded, as: .cancelled, detail: "superseded by a newer \(kind) message")
            }
            let overflow = try await outbox.pendingBeyond(limit: settings.maximumPending)
            if !overflow.isEmpty {
                await finish(overflow, as: .failed, detail: "dropped: the outbox holds at most \(settings.maximumPending) messages")
                diagnose(DiagnosticEvent(kind: .queueOverflow, count: overflow.count, detail: "dropped the oldest to make room"))
                suggest(Suggestions.outboxFull)
            }
            await publishSummary()
            diagnose(DiagnosticEvent(kind: .queued, messageID: request.id, queueSize: pendingCount))
            await flush()
        }
        let current = try await outbox.message(id: message.id) ?? message
        return SendMessageCommand.Reply(id: request.id, status: DeliveryStatus(current.status), accepted: inserted)
    }

    /// Cancels one pending message, or all of them.
    func cancel(_ id: MessageID?) async throws -> CancelCommand.Reply {
        let ids: [String]
        if let id {
            ids = [id.value]
        } else {
            ids = try await outbox.pendingBeyond(limit: 0)
        }
        let cancelled = await finish(ids, as: .cancelled, detail: "cancelled")
        await publishSummary()
        return CancelCommand.Reply(cancelled: cancelled.map(MessageID.init))
    }

    /// Asks connd to reconnect now and sends what is waiting.
    func attemptRecovery() async -> RecoverCommand.Reply {
        diagnose(DiagnosticEvent(kind: .recoveryAttempted))
        do {
            let reply = try await bus.request(ConnectionCommand.self, .init(action: .reconnect), timeout: .seconds(2), attempts: 2)
            diagnose(DiagnosticEvent(kind: reply.accepted ? .recoverySucceeded : .recoveryFailed, detail: "the connection is \(reply.phase.rawValue)"))
            await flush()
            return RecoverCommand.Reply(reconnecting: reply.accepted, health: health.state)
        } catch {
            diagnose(DiagnosticEvent(kind: .recoveryFailed, detail: "\(error)"))
            return RecoverCommand.Reply(reconnecting: false, health: health.state)
        }
    }

    /// Ends messages with a final status and says so on the bus; returns the ids it ended.
    @discardableResult
    private func finish(_ ids: [String], as status: OutboxMessage.Status, detail: String) async -> [String] {
        guard !ids.isEmpty else { return [] }
        do {
            let ended = try await outbox.finish(ids, as: status)
            for id in ended {
                publishChange(DeliveryUpdate(id: MessageID(id), status: DeliveryStatus(status), detail: detail))
            }
            return ended
        } catch {
            logger.error("cannot update the outbox", metadata: ["outbox.error": "\(error)"])
            return []
        }
    }

    // MARK: Bus input

    func receive(_ message: BusMessage) async {
        switch message.topic {
        case .connectionState:
            guard let status = try? message.decode(ConnectionStatus.self) else { return countMalformed(message) }
            if let suggestion = Suggestions.forConnection(status) { suggest(suggestion) }
            let connection = status.phase == .connected ? status.connectionID ?? "epoch-\(status.epoch)" : nil
            guard connection != connectionID else { return }
            connectionID = connection
            connectedEpoch = connection == nil ? nil : status.epoch
            guard connectedEpoch != nil else { return }
            // First ask for what the gateway sent while this client could not hear it.
            pendingResume = lastSequence
            resumeIfPossible()
            await flush()
        case .wireInbound:
            guard let frame = try? message.decode(WireFrame.self) else { return countMalformed(message) }
            await handle(frame)
        case .networkPath:
            guard let path = try? message.decode(NetworkPath.self) else { return countMalformed(message) }
            if !path.satisfied { suggest(Suggestions.checkNetwork) }
        default:
            break
        }
    }

    /// The bus path to connd came or went (the proxy or connd restarted). When it goes, what
    /// was written shortly before may be lost, both ways: when it comes back, the gateway is
    /// asked to resume after the last frame heard, and the messages written before are
    /// written again, in order, ahead of any newer one (the gateway drops repeated ids).
    func wirePath(heard: Bool) async {
        guard heard != wireHeard else { return }
        wireHeard = heard
        guard heard else {
            wireLostAt = Date()
            if connectedEpoch != nil { pendingResume = min(pendingResume ?? .max, lastSequence) }
            logger.warning("the bus path to connd dropped: holding frames until it is back")
            return
        }
        logger.info("the bus path to connd is open")
        resumeIfPossible()
        await flush()
    }

    /// Sends the pending resume request when it can reach the gateway.
    private func resumeIfPossible() {
        guard let after = pendingResume, wireHeard, let epoch = connectedEpoch else { return }
        pendingResume = nil
        let resume = SessionResume(sessionID: sessionID, lastSequence: after)
        if let data = try? codec.encode(resume, type: WireMessageType.sessionResume.rawValue, sequence: 0) {
            publish(WireFrame(epoch: epoch, text: String(decoding: data, as: UTF8.self)), on: .wireOutbound)
        }
    }

    private func countMalformed(_ message: BusMessage) {
        counters.increment(ProtocolCounter.malformedFrames)
        logger.warning("dropped an unreadable bus message", metadata: ["bus.topic": "\(message.topic)", "bus.source": "\(message.header.source)"])
    }

    private func handle(_ frame: WireFrame) async {
        let decoded: WireMessage
        do {
            decoded = try codec.decode(frame.text)
        } catch {
            counters.increment(ProtocolCounter.malformedFrames)
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
            publishChange(
                TranscriptEntry(id: chat.id, sender: chat.sender, content: chat.content, timestamp: chat.timestamp, status: .received, inReplyTo: chat.replyTo))
        case .ping(let envelope):
            guard let pong = try? codec.encodePong(sequence: envelope.sequence) else { return }
            publish(WireFrame(epoch: frame.epoch, text: String(decoding: pong, as: UTF8.self)), on: .wireOutbound)
        case .sessionResumed(let envelope):
            resumed(envelope.payload)
        case .pong, .sessionResume:
            break
        case .unknown(let type, _, _):
            counters.increment(ProtocolCounter.unknownTypes)
            logger.debug("ignored an unknown message type", metadata: ["wire.type": "\(type)"])
        }
    }

    private func acknowledge(_ ack: MessageAck) async {
        do {
            if ack.status.isDelivered {
                lastAcknowledged = ack.messageID
                if let accepted = try await outbox.markDelivered(id: ack.messageID.value) {
                    publishChange(DeliveryUpdate(id: ack.messageID, status: .delivered))
                    diagnose(DiagnosticEvent(kind: .messageSent, messageID: ack.messageID, durationMilliseconds: Int(Date().timeIntervalSince(accepted) * 1000)))
                    recordOutcome(success: true)
                    await publishSummary()
                }
            } else if await !finish([ack.messageID.value], as: .failed, detail: "the gateway refused the message").isEmpty {
                diagnose(DiagnosticEvent(kind: .deliveryFailed, messageID: ack.messageID, willRetry: false, detail: "the gateway refused it"))
                recordOutcome(success: false)
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
            streamsPublished[id] = nil
            let partial = assembler.discard(id) ?? ""
            logger.warning("a streamed reply was cut off", metadata: ["message.id": "\(id)"])
            publishChange(
                TranscriptEntry(
                    id: id, sender: .bot(name: botName), content: partial, timestamp: Date(), status: .incomplete,
                    inReplyTo: replyTargets.removeValue(forKey: id)))
        }
    }

    private func receive(chunk: StreamingChunk, sequence: Int) {
        guard let progress = assembler.add(chunk) else { return }
        if progress.isFirst {
            openStreamStarts[chunk.messageID] = sequence
            if let target = lastAcknowledged { replyTargets[chunk.messageID] = target }
        }
        guard !progress.isDuplicate else { return }
        let id = chunk.messageID
        let published = streamsPublished[id]
        let due = published.map { $0.at + Self.streamInterval } ?? .now
        if progress.isComplete || due <= .now {
            publishStream(id, content: progress.content, lastIndex: progress.lastIndex, isFinal: progress.isComplete)
        } else if published?.scheduled == false {
            // Chunks within the interval go out together when it ends.
            streamsPublished[id]?.scheduled = true
            Task {
                try? await Task.sleep(until: due)
                self.publishPendingStream(id)
            }
        }
        if progress.isComplete {
            openStreamStarts[chunk.messageID] = nil
            let entry = TranscriptEntry(
                id: chunk.messageID, sender: .bot(name: botName), content: progress.content, timestamp: Date(), status: .received,
                inReplyTo: replyTargets.removeValue(forKey: chunk.messageID))
            publishChange(entry)
        }
    }

    /// How often a streamed reply is published while it grows: its first chunk at once, then
    /// what came in each interval together, the end at once. A front end redraws no faster,
    /// and a reply of many small chunks costs the bus a message an interval, not a chunk.
    static let streamInterval = Duration.milliseconds(50)

    /// Publishes the reply so far, with the text added since it was last published.
    private func publishStream(_ id: MessageID, content: String, lastIndex: Int, isFinal: Bool) {
        let previous = streamsPublished[id]?.length ?? 0
        let added = String(decoding: content.utf8.dropFirst(previous), as: UTF8.self)
        publish(
            StreamProgress(id: id, chunkIndex: max(0, lastIndex), chunk: added, content: content, isFinal: isFinal),
            on: .conversationStream)
        streamsPublished[id] = isFinal ? nil : StreamPublication(at: .now, length: content.utf8.count, scheduled: false)
    }

    private func publishPendingStream(_ id: MessageID) {
        guard let published = streamsPublished[id], let (content, lastIndex) = assembler.assembled(id) else { return }
        streamsPublished[id]?.scheduled = false
        guard content.utf8.count > published.length else { return }
        publishStream(id, content: content, lastIndex: lastIndex, isFinal: false)
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
        guard pendingCount > 0 else { return }
        var messages: [OutboxMessage]
        do {
            messages = try await outbox.pending()
        } catch {
            logger.error("cannot read the outbox", metadata: ["outbox.error": "\(error)"])
            return
        }
        // Messages past their expiry end here, connected or not.
        let cutoff = Date().addingTimeInterval(-settings.expiry.inSeconds)
        let expired = messages.filter { $0.createdAt < cutoff }.map(\.id)
        if !expired.isEmpty {
            await finish(expired, as: .expired, detail: "not delivered within \(settings.expiry)")
            await publishSummary()
            messages.removeAll { $0.createdAt < cutoff }
        }
        guard let epoch = connectedEpoch, let connection = connectionID, wireHeard else { return }
        let now = Date()
        var written = 0
        for message in messages {
            let policy = message.retryPolicy
            if message.status == .sent && message.sentConnection == connection && !writtenBeforePathLoss(message) {
                // Written on this connection and not before the bus path dropped: wait for
                // the ack, then retry or give up by the policy.
                guard let lastSent = message.lastSentAt else { continue }
                let waited = now.timeIntervalSince(lastSent) * 1000
                guard waited >= Double(policy.timeoutMilliseconds + policy.delayMilliseconds) else { continue }
                let timeouts = (try? await outbox.recordTimeout(id: message.id)) ?? policy.attempts
                let willRetry = timeouts < policy.attempts
                diagnose(
                    DiagnosticEvent(
                        kind: .deliveryFailed, messageID: message.messageID, willRetry: willRetry,
                        detail: "no acknowledgement within \(policy.timeoutMilliseconds) ms (attempt \(timeouts) of \(policy.attempts))"))
                recordOutcome(success: false)
                guard willRetry else {
                    await finish([message.id], as: .failed, detail: "the gateway did not acknowledge it after \(policy.attempts) attempts")
                    suggest(Suggestions.messagesNotAcknowledged)
                    continue
                }
            }
            let chat = ChatMessage(id: message.messageID, content: message.content, sender: .user, timestamp: message.createdAt, status: .pending)
            guard let data = try? codec.encode(chatMessage: chat, sequence: message.sequence) else { continue }
            // The connection or the bus path went while this flush waited on the outbox: the next one resends.
            guard connectionID == connection, wireHeard else { return }
            publish(WireFrame(epoch: epoch, text: String(decoding: data, as: UTF8.self)), on: .wireOutbound)
            written += 1
            do {
                try await outbox.markSent(id: message.id, epoch: epoch, connection: connection, at: now)
            } catch {
                logger.error("cannot record a send", metadata: ["message.id": "\(message.id)", "outbox.error": "\(error)"])
            }
            if message.status == .queued {
                publishChange(DeliveryUpdate(id: message.messageID, status: .sent))
            }
        }
        if written > 0 {
            diagnose(DiagnosticEvent(kind: .queueFlushed, count: written))
            await publishSummary()
        }
    }

    private func writtenBeforePathLoss(_ message: OutboxMessage) -> Bool {
        guard let lost = wireLostAt, let sent = message.lastSentAt else { return false }
        return sent <= lost
    }

    private func recordOutcome(success: Bool) {
        guard let changed = health.record(success: success) else { return }
        logger.notice("health \(changed.rawValue)")
        try? bus.retain(health.report, on: .health)
        diagnose(DiagnosticEvent(kind: .healthChanged, detail: changed.rawValue))
    }

    private func suggest(_ suggestion: RecoverySuggestion) {
        guard suggestions.offer(suggestion) else { return }
        publish(suggestion, on: .suggestion)
    }

    private func diagnose(_ event: DiagnosticEvent) {
        publish(event, on: .diagnostic)
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

    /// Journals a change of the conversation, then publishes it with its revision.
    private func publishChange(_ body: some ConversationChangeBody) {
        do {
            publish(try journal.record(body), on: type(of: body).topic)
        } catch {
            logger.error("cannot journal a conversation change", metadata: ["journal.error": "\(error)"])
            publish(body, on: type(of: body).topic)
        }
    }

    /// The journal's changes after `revision`, for a subscriber catching up.
    func journalChanges(after revision: Int, limit: Int) throws -> JournalCommand.Reply {
        try journal.changes(after: revision, limit: limit)
    }

    private func publishSummary() async {
        guard let pending = try? await outbox.pendingCount() else { return }
        pendingCount = pending
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
        case .expired: self = .expired
        case .cancelled: self = .cancelled
        }
    }
}

/// When a streamed reply was last published, and its length then (UTF-8 bytes).
struct StreamPublication {
    var at: ContinuousClock.Instant
    var length: Int
    /// A publication of what comes meanwhile is due at the end of the interval.
    var scheduled: Bool
}
