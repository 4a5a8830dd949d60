public import Foundation
public import OpenClawWire
public import TetherSchema
public import TetherService
public import TetherWire

/// What a full outbox does with a new message.
public enum OverflowPolicy: String, Sendable, CaseIterable {
    /// Refuse it at once, in words: nothing already accepted is touched (the default).
    case refuse
    /// Accept it and drop the oldest message never written, announced on the bus; every
    /// sender is told at send time that its message may be dropped.
    case dropOldest = "drop-oldest"
}

/// protod's decisions: which message to write, when a connection must be probed or
/// replaced, what each message's status is, how a streamed reply grows and when it is cut.
///
/// A value: events in, actions out, time passed in (`now`). It reads no clock and does no
/// I/O; ``ProtocolService`` runs it on a ``MachineDriver``, which carries its actions out, in order, one input at a time.
///
/// What it promises, whatever the gateway:
/// - a message is never written twice on one live connection to a gateway that has not
///   shown it drops repeated ids (one that answers `session.resume`): an overdue
///   acknowledgement makes it probe the connection, and only a connection that fails the
///   probe is replaced; what is unacknowledged is written again on the new one;
/// - a message that may have reached the gateway is never reported failed, expired or
///   dropped: it stays `sent` until the gateway acknowledges or refuses it, or the user
///   cancels it; only messages never written count against the queue limit and expire;
/// - a reply in progress is resumed where the gateway can resume, and otherwise marked
///   incomplete as soon as its connection ends or it stops growing.
public struct DeliveryStateMachine: Sendable {
    /// The timings and limits the machine decides by.
    public struct Settings: Sendable, Equatable {
        /// At most this many messages wait to be written; what happens to a new one beyond is `whenFull`'s.
        public var maximumQueued: Int
        /// What a full outbox does with a new message.
        public var whenFull: OverflowPolicy
        /// A message not written this long after it was accepted expires.
        public var expiry: TimeInterval
        /// How long something may wait on a live connection (an acknowledgement, the next
        /// chunk of a reply) before the connection is probed.
        public var probeAfter: TimeInterval
        /// How long the gateway has to answer a probe (`system.ping`) or `session.resume`.
        public var probeDeadline: TimeInterval
        /// A reply that has not grown for this long on a live connection is incomplete.
        public var replyStallDeadline: TimeInterval
        /// A growing reply is published at most once per interval (its start and end at once).
        public var streamInterval: TimeInterval
        /// OpenClaw: the session to chat in at start, and of messages that name none; nil or
        /// `main` is the gateway's main session. ``Event/chooseSession(_:)`` changes it.
        public var sessionKey: String?
        /// OpenClaw: how many transcript messages a history lookup asks for.
        public var historyLimit: Int

        public init(
            maximumQueued: Int = 100, expiry: TimeInterval = 3600, probeAfter: TimeInterval = 2, probeDeadline: TimeInterval = 2,
            replyStallDeadline: TimeInterval = 30, streamInterval: TimeInterval = 0.05, sessionKey: String? = nil, historyLimit: Int = 100,
            whenFull: OverflowPolicy = .refuse
        ) {
            self.whenFull = whenFull
            self.sessionKey = sessionKey
            self.historyLimit = min(1000, max(10, historyLimit))
            self.maximumQueued = max(1, maximumQueued)
            self.expiry = expiry
            self.probeAfter = probeAfter
            self.probeDeadline = probeDeadline
            self.replyStallDeadline = replyStallDeadline
            self.streamInterval = streamInterval
        }
    }

    /// Where the gateway session stands, as saved for a restart.
    public struct SessionPoint: Sendable, Equatable {
        public var sessionID: String?
        public var lastSequence: Int

        public init(sessionID: String?, lastSequence: Int) {
            self.sessionID = sessionID
            self.lastSequence = lastSequence
        }
    }

    /// What happened.
    public enum Event: Sendable {
        /// protod started with these messages pending in its outbox, this session saved, these
        /// recent transcript entries journaled (what a history lookup is matched against), and
        /// the session the user chose last (nil: ``Settings/sessionKey``).
        case started(pending: [OutboxMessage], session: SessionPoint, recent: [TranscriptEntry] = [], chosenSession: String? = nil)
        /// A message was committed to the outbox (after ``admit(_:now:)`` let it in).
        case accepted(OutboxMessage, fallbackFrom: DeliveryStrategy?)
        /// The user cancels these messages, or every pending one (nil).
        case cancel([String]?)
        /// OpenClaw: the user chose to chat in this session (as a person writes it, or its
        /// canonical key), and the choice is kept. Messages sent before still go to theirs;
        /// the connection goes over once nothing of Tether's is left unanswered there.
        case chooseSession(String)
        /// connd has a connection open: its epoch, its name (unique across restarts) and what
        /// its handshake showed of the gateway (nil: the seed dialect).
        case connectionUp(epoch: Int, id: String, gateway: GatewayInfo? = nil)
        /// The connection ended, or was never up.
        case connectionDown
        /// connd's subscription to `wire.out` is at the proxy (true) or gone (false): frames
        /// written while it is gone are lost in the bus.
        case wirePath(heard: Bool)
        /// A frame from the gateway, decoded: the seed dialect's, or OpenClaw's.
        case frame(WireMessage)
        case openClawFrame(OpenClawFrame)
        /// Time passed; the owner sends one at ``nextDeadline`` at the latest.
        case tick
    }

    /// What the owner must do, in order.
    public enum Action: Sendable, Equatable {
        /// Publish a frame on `wire.out` for connd to write.
        case write(WireFrame)
        /// Record in the outbox that these messages were written to a connection.
        case persistSent(ids: [String], epoch: Int, connection: String, at: Date)
        /// Record the gateway's acknowledgement in the outbox.
        case persistDelivered(id: String)
        /// End these messages in the outbox with a final status, before saying so.
        case persistFinal(ids: [String], status: OutboxMessage.Status)
        /// Put a delivered message back in the outbox, to be written again: the gateway lost it.
        case persistRequeued(id: String)
        /// Record in the outbox that the gateway holds a message in its queue (OpenClaw).
        case persistInGatewayQueue(id: String, at: Date)
        /// Journal and publish a conversation change (`conv.message` or `conv.delivery`).
        case publishEntry(TranscriptEntry)
        case publishDelivery(DeliveryUpdate)
        /// Publish a reply's progress on `conv.stream`.
        case publishStream(StreamProgress)
        /// Retain on `bot.state`, `health`, `outbox.summary`.
        case retainBotState(BotStateUpdate)
        case retainHealth(HealthReport)
        case retainSummary(OutboxSummary)
        case diagnose(DiagnosticEvent)
        case suggest(RecoverySuggestion)
        /// Save where to resume the gateway session after a restart.
        case saveSession(SessionPoint)
        /// Ask connd for a new connection: this one failed a probe, or frames on it may be lost.
        case reconnect(reason: String)
        /// Retain on `conv.session`: the conversation chatted in changed.
        case retainSession(ConversationSession)
        /// The gateway answered a request made for a command (``gatewayRequest(_:params:now:)``).
        case commandAnswered(id: String, ok: Bool, payload: JSONValue?, error: GatewayErrorShape?)

        /// Whether it puts a frame on the wire.
        var isWrite: Bool {
            if case .write = self { true } else { false }
        }
    }

    /// The answer to a send command, before anything is committed.
    public enum Admission: Sendable, Equatable {
        /// Commit it with this strategy (the fallback when the one asked for cannot deliver now).
        case commit(DeliveryStrategy, fallbackFrom: DeliveryStrategy?)
        /// Refused, in words; nothing was committed. The actions say so on the bus.
        case refuse(String, actions: [Action])
    }

    /// A message not yet settled by the gateway, as the machine tracks it.
    struct Pending: Sendable, Equatable {
        var id: String
        var sequence: Int
        var content: String
        var createdAt: Date
        var strategy: DeliveryStrategy
        var kind: String?
        var retry: RetryPolicy
        /// Written to the gateway at least once: it may have reached it.
        var everWritten: Bool
        /// The connection it was last written to, and when.
        var writtenOn: String?
        var writtenAt: Date?
        /// When it was first written: the gateway cannot have it from before.
        var firstWrittenAt: Date?
        /// When its acknowledgement is overdue on the connection it was written to: the
        /// connection is probed then.
        var acknowledgementDue: Date?
        /// When its acknowledgement is late by its retry policy (counted against health once).
        var lateAt: Date?
        /// Overdue periods so far on live connections.
        var overdue = 0
        /// Written by an earlier protod: the frame may have died with it in the bus.
        var restored = false
        /// OpenClaw: where the message stands between the outbox and the gateway's transcript.
        var place: OpenClawPlace = .outbox
        /// OpenClaw: the session it was sent in, as chosen then; nil for ``Settings/sessionKey``.
        var session: String?

        var messageID: MessageID { MessageID(id) }
    }

    /// A reply being streamed.
    struct OpenStream: Sendable, Equatable {
        /// The server sequence of its first chunk: a restarted protod resumes before it.
        var firstSequence: Int
        var inReplyTo: MessageID?
        var attribution: ReplyAttribution?
        /// When it last grew.
        var grewAt: Date
        /// When it was last published, and its length then (UTF-8 bytes).
        var publishedAt: Date?
        var publishedLength = 0
        /// Its length when it was last published whole (0: not yet): it goes whole again once doubled.
        var wholeLength = 0
        /// Its growth since then is waiting for the interval to end.
        var publicationDue = false
    }

    /// The open connection, as protod knows it.
    struct Connection: Sendable, Equatable {
        var epoch: Int
        var id: String
        /// The `session.resume` frame was written on it, at this time (nil: not yet).
        var resumeAskedAt: Date?
        /// A probe under way: its deadline.
        var probeDeadline: Date?
        /// When the gateway was last heard from on it (any frame): a connection heard from
        /// within `probeAfter` is alive, and is not probed.
        var heardAt: Date
        /// The gateway was heard from on it at least once.
        var verified = false
        /// A new connection was asked for; nothing more is decided about this one.
        var replacing = false
        /// The dialect spoken on it, with that dialect's state of the connection.
        var dialect: ConnectionDialect = .seed
    }

    enum ConnectionDialect: Sendable, Equatable {
        case seed
        case openClaw(OpenClawLink)
    }

    public let settings: Settings
    let codec = WireCodec()

    var pending: [Pending] = []
    var connection: Connection?
    var wireHeard = false
    /// When the bus path to connd last dropped: frames written on the connection before it may be lost.
    private var wireLostAt: Date?
    /// Whether the gateway answers `session.resume` (and so replays what was missed and drops
    /// repeated message ids), as learnt on the latest connection that told; nil: not known.
    public internal(set) var gatewayResumes: Bool?
    var session = SessionPoint(sessionID: nil, lastSequence: 0)
    private var savedSession = SessionPoint(sessionID: nil, lastSequence: 0)
    private var sessionSavedAt = Date.distantPast
    /// The server sequence to ask the gateway to resume after, once frames reach connd.
    private var resumeAfter: Int?
    var assembler = StreamAssembler()
    var streams: [MessageID: OpenStream] = [:]
    /// Messages written and not yet matched to a reply, oldest first: a reply that does not
    /// say what it answers is matched to the first of them.
    var awaitingReply: [MessageID] = []
    private static let awaitingReplyLimit = 1000
    var botName = "Bot"
    var botState: BotState = .idle
    /// What was said with the bot's state (a model failure, why a reply is incomplete).
    var botDetail: String?
    private var health: HealthMonitor
    private var suggestions = SuggestionBook()
    private var lastSummary: OutboxSummary?
    /// Messages that left without delivery since start, by final status, and the latest of them.
    private var undelivered: [String: Int] = [:]
    private var lastUndelivered: DeliveryUpdate?
    var lastSession: ConversationSession?
    /// OpenClaw: the session the user chose, as they wrote it; new messages go to it.
    public internal(set) var chosenSession: String?
    /// OpenClaw: the gateway's main session key, as the latest connection said it.
    var mainSessionKey: String?
    /// OpenClaw: the session the latest connection chatted in (canonical).
    var chattingIn: String?
    /// OpenClaw: replies being streamed, by run id.
    var runs: [String: OpenClawRun] = [:]
    /// OpenClaw: runs in the session chatted in that are not Tether's (another client's, or the
    /// gateway's follow-up turns), with when each was last heard of.
    var otherRuns: [String: Date] = [:]
    /// OpenClaw: the user messages Tether knows it sent (from the journal and since), oldest
    /// first, and the transcript's entries by id: what a history answer is matched against.
    var sentMessages: [HistoryMerge.Sent] = []
    var knownEntries: [MessageID: (content: String, status: DeliveryStatus)] = [:]
    var knownOrder: [MessageID] = []
    /// The ids entries of the gateway's transcript were published under, by their gateway id.
    var publishedGatewayIDs: [String: MessageID] = [:]
    static let knownLimit = 2000

    public init(settings: Settings = Settings(), now: Date) {
        self.settings = settings
        self.health = HealthMonitor(now: now)
        chosenSession = settings.sessionKey
    }

    // MARK: Reading

    /// Messages not yet settled by the gateway.
    public var pendingCount: Int { pending.count }
    /// Messages never written: what the queue limit counts.
    public var queuedCount: Int { pending.count(where: { !$0.everWritten }) }
    /// The health, for replies to commands.
    public var healthState: HealthState { health.state }
    /// Whether a connection is open and frames reach connd.
    public var canWrite: Bool { connection != nil && wireHeard }
    /// The dialect of the open connection (the seed dialect when none is open).
    public var dialect: WireDialect {
        if case .openClaw? = connection?.dialect { return .openclaw }
        return .seed
    }
    /// The status of a pending message; nil when it is not pending.
    public func status(of id: String) -> DeliveryStatus? {
        pending.first { $0.id == id }.map { message in
            if message.place.isInGatewayQueue { return .accepted }
            return message.everWritten ? .sent : .queued
        }
    }

    /// The next moment something is due; the owner sends ``Event/tick`` then. Only what a
    /// tick would act on counts, so a tick at the deadline always moves it on.
    public var nextDeadline: Date? {
        var deadlines: [Date] = []
        for message in pending where !message.everWritten {
            deadlines.append(message.createdAt.addingTimeInterval(settings.expiry))
        }
        if resumePoint != savedSession { deadlines.append(sessionSavedAt.addingTimeInterval(Self.sessionSaveInterval)) }
        for stream in streams.values where stream.publicationDue {
            deadlines.append((stream.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval))
        }
        for run in runs.values where run.publicationDue {
            deadlines.append((run.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval))
        }
        // What the open connection is waiting for, while frames reach it and it is not being replaced.
        if let connection, wireHeard, !connection.replacing, case .openClaw(let link) = connection.dialect {
            deadlines += openClawDeadlines(connection, link)
        } else if let connection, wireHeard, !connection.replacing {
            if gatewayResumes == nil, let asked = connection.resumeAskedAt {
                deadlines.append(asked.addingTimeInterval(settings.probeDeadline))
            }
            let waitingForCapability = gatewayResumes == nil && pending.contains { $0.writtenOn == connection.id && isUncertain($0) }
            if !waitingForCapability {
                if let probe = connection.probeDeadline { deadlines.append(probe) }
                for message in pending where message.writtenOn == connection.id {
                    if let due = message.acknowledgementDue { deadlines.append(due) }
                    if let late = message.lateAt { deadlines.append(late) }
                }
                for stream in streams.values {
                    if connection.probeDeadline == nil {
                        deadlines.append(max(stream.grewAt, connection.heardAt).addingTimeInterval(settings.probeAfter))
                    }
                    deadlines.append(stream.grewAt.addingTimeInterval(settings.replyStallDeadline))
                }
            }
        }
        return deadlines.min()
    }

    // MARK: Commands

    /// Decides whether a send may be committed; nothing changes until ``Event/accepted(_:fallbackFrom:)``.
    public mutating func admit(_ request: SendMessageCommand.Request, now: Date) -> Admission {
        guard !request.content.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return .refuse(request.content.isEmpty ? "the message is empty" : "the message is empty: only spaces or line breaks", actions: [])
        }
        var strategy = request.strategy ?? .queued
        var fallbackFrom: DeliveryStrategy?
        if strategy == .immediate, !canWrite, let fallback = request.fallback, fallback != .immediate {
            fallbackFrom = strategy
            strategy = fallback
        }
        if strategy == .latestOnly, request.kind == nil { return .refuse("latestOnly needs a kind", actions: []) }
        if case .openClaw(let link)? = connection?.dialect, !link.fits(request.content) {
            return .refuse(
                "the message is \(request.content.utf8.count) bytes; the gateway reads frames of at most \(link.maximumPayload ?? 0) bytes: shorten it",
                actions: [])
        }
        // A latestOnly message replaces a waiting one of its kind: it takes no more room.
        let replacesOne = strategy == .latestOnly && pending.contains { !$0.everWritten && $0.kind == request.kind && $0.strategy == .latestOnly }
        guard replacesOne || queuedCount < settings.maximumQueued || settings.whenFull == .dropOldest else {
            var actions: [Action] = [
                .diagnose(DiagnosticEvent(kind: .queueOverflow, messageID: request.id, queueSize: queuedCount, detail: "refused: the outbox is full"))
            ]
            offer(Suggestions.outboxFull, now: now, into: &actions)
            return .refuse(
                "the outbox is full: \(queuedCount) messages wait to be sent (at most \(settings.maximumQueued)); this one was not queued, send it again once they have gone out",
                actions: actions)
        }
        return .commit(strategy, fallbackFrom: fallbackFrom)
    }

    // MARK: Events

    /// Feeds an event at `now`; returns the actions to carry out, in order.
    public mutating func handle(_ event: Event, now: Date) -> [Action] {
        var actions: [Action] = []
        switch event {
        case .started(let messages, let saved, let recent, let chosen):
            if let chosen { chosenSession = chosen }
            session = saved
            savedSession = saved
            for entry in recent { remember(entry) }
            pending = messages.filter { [.queued, .sent, .accepted].contains($0.status) }.sorted { $0.sequence < $1.sequence }.map(Self.pending)
            awaitingReply = pending.filter(\.everWritten).map(\.messageID)
            actions.append(.retainHealth(health.report))
        case .accepted(let message, let fallbackFrom):
            accepted(message, fallbackFrom: fallbackFrom, now: now, into: &actions)
        case .cancel(let ids):
            let chosen = ids.map(Set.init) ?? Set(pending.map(\.id))
            let cancelled = pending.filter { chosen.contains($0.id) }
            settle(cancelled.map(\.id), as: .cancelled, into: &actions) { message in
                message.everWritten
                    ? "cancelled: Tether stops waiting for its acknowledgement, but the gateway may already have it" : "cancelled"
            }
        case .chooseSession(let key):
            chosenSession = key
        case .connectionUp(let epoch, let id, let gateway):
            guard connection?.id != id else { break }
            connectionEnded(now: now, into: &actions)
            if let gateway, gateway.dialect == .openclaw {
                let link = OpenClawLink(gateway, requested: dueSessionRequest, now: now)
                mainSessionKey = gateway.mainSessionKey
                chattingIn = link.sessionKey
                connection = Connection(epoch: epoch, id: id, heardAt: now, dialect: .openClaw(link))
                openClawConnectionUp(now: now, into: &actions)
                break
            }
            connection = Connection(epoch: epoch, id: id, heardAt: now)
            // First ask for what the gateway sent while this client could not hear it.
            resumeAfter = session.lastSequence
        case .connectionDown:
            connectionEnded(now: now, into: &actions)
        case .wirePath(let heard):
            guard heard != wireHeard else { break }
            wireHeard = heard
            if !heard {
                wireLostAt = now
                if connection != nil { resumeAfter = min(resumeAfter ?? .max, session.lastSequence) }
            }
        case .frame(let message):
            receive(message, now: now, into: &actions)
        case .openClawFrame(let frame):
            receive(frame, now: now, into: &actions)
        case .tick:
            break
        }
        expire(now: now, into: &actions)
        decide(now: now, into: &actions)
        publishDueStreams(now: now, into: &actions)
        publishDueRuns(now: now, into: &actions)
        nameSessions(in: &actions)
        for case .publishEntry(let entry) in actions { remember(entry) }
        if let current = conversation, current != lastSession {
            lastSession = current
            actions.append(.retainSession(current))
        }
        saveSession(now: now, into: &actions)
        let summary = OutboxSummary(pending: pending.count, undelivered: undelivered.isEmpty ? nil : undelivered, lastUndelivered: lastUndelivered)
        if lastSummary != summary {
            lastSummary = summary
            actions.append(.retainSummary(summary))
        }
        // Frames first, in the order chosen: the gateway's answer is the slow part of a round
        // trip, so a frame does not wait for the journal writes and publications of its own
        // event. Those keep their order among themselves.
        return actions.filter(\.isWrite) + actions.filter { !$0.isWrite }
    }

    /// Saves the point to resume from when it moved, at most once per ``sessionSaveInterval``:
    /// a chunk moves it, and losing the last second of it costs only frames replayed twice.
    private mutating func saveSession(now: Date, into actions: inout [Action]) {
        let point = resumePoint
        guard point != savedSession, now >= sessionSavedAt.addingTimeInterval(Self.sessionSaveInterval) else { return }
        savedSession = point
        sessionSavedAt = now
        actions.append(.saveSession(point))
    }

    static let sessionSaveInterval: TimeInterval = 1

    private static func pending(_ message: OutboxMessage) -> Pending {
        Pending(
            id: message.id, sequence: message.sequence, content: message.content, createdAt: message.createdAt,
            strategy: DeliveryStrategy(rawValue: message.strategy) ?? .queued, kind: message.kind, retry: message.retryPolicy,
            everWritten: message.status != .queued, writtenOn: message.sentConnection, writtenAt: message.lastSentAt,
            // Written by an earlier protod: when first is not kept, so no later than it was made.
            firstWrittenAt: message.status == .queued ? nil : message.createdAt, restored: message.status == .sent,
            // The gateway said it holds it: the history decides, as before the restart.
            place: message.status == .accepted ? .inGatewayQueue(since: message.acceptedAt ?? message.lastSentAt ?? message.createdAt) : .outbox,
            session: message.session)
    }

    /// Where a restarted protod resumes: after the last frame processed, but before the
    /// first chunk of any reply still open, whose chunks die with this process.
    private var resumePoint: SessionPoint {
        let firstOpen = streams.values.map(\.firstSequence).min().map { $0 - 1 } ?? .max
        return SessionPoint(sessionID: session.sessionID, lastSequence: max(0, min(session.lastSequence, firstOpen)))
    }

    private mutating func accepted(_ message: OutboxMessage, fallbackFrom: DeliveryStrategy?, now: Date, into actions: inout [Action]) {
        guard !pending.contains(where: { $0.id == message.id }) else { return }
        let entry = Self.pending(message)
        pending.append(entry)
        pending.sort { $0.sequence < $1.sequence }
        if let fallbackFrom {
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .fallbackUsed, messageID: entry.messageID, detail: "not connected: \(entry.strategy.rawValue) instead of \(fallbackFrom.rawValue)"
                    )))
        }
        actions.append(
            .publishEntry(
                TranscriptEntry(
                    id: entry.messageID, sender: .user, content: entry.content, timestamp: entry.createdAt, status: .queued,
                    session: mayBeOpenClaw ? sessionOf(entry) : nil)))
        actions.append(.publishDelivery(DeliveryUpdate(id: entry.messageID, status: .queued)))
        if entry.strategy == .immediate && !canWrite {
            settle([entry.id], as: .failed, into: &actions) { _ in "not connected, and the message was to be sent immediately" }
        }
        if entry.strategy == .latestOnly, let kind = entry.kind {
            let superseded = pending.filter { !$0.everWritten && $0.kind == kind && $0.strategy == .latestOnly && $0.sequence < entry.sequence }
            settle(superseded.map(\.id), as: .cancelled, into: &actions) { _ in "superseded by a newer \(kind) message" }
        }
        if settings.whenFull == .dropOldest, queuedCount > settings.maximumQueued {
            // Only messages never written: one that may have reached the gateway is not dropped.
            let dropped = pending.filter { !$0.everWritten }.prefix(queuedCount - settings.maximumQueued)
            for message in dropped {
                actions.append(
                    .diagnose(
                        DiagnosticEvent(
                            kind: .queueOverflow, messageID: message.messageID, queueSize: settings.maximumQueued,
                            detail: "dropped unsent: the outbox was full (drop-oldest)")))
            }
            let limit = settings.maximumQueued
            settle(dropped.map(\.id), as: .failed, into: &actions) { _ in
                "dropped unsent: the outbox keeps the newest \(limit) messages waiting (drop-oldest) and this was the oldest; it never reached the gateway"
            }
        }
        actions.append(.diagnose(DiagnosticEvent(kind: .queued, messageID: entry.messageID, queueSize: queuedCount)))
    }

    /// What a sender is told as its message is accepted while a full outbox drops its oldest: that
    /// this one may be dropped too. Nil when the outbox refuses instead, or the message went out.
    public func dropWarning(for status: DeliveryStatus) -> String? {
        guard settings.whenFull == .dropOldest, status == .queued else { return nil }
        return "the outbox keeps only the newest \(settings.maximumQueued) messages waiting (drop-oldest): "
            + "this one is dropped unsent if \(settings.maximumQueued) newer ones wait behind it before it goes out (\(queuedCount) wait now)"
    }

    /// Ends pending messages with a final status: persisted first, then said.
    mutating func settle(
        _ ids: [String], as status: OutboxMessage.Status, into actions: inout [Action], detail: (Pending) -> String
    ) {
        let ending = pending.filter { ids.contains($0.id) }
        guard !ending.isEmpty else { return }
        pending.removeAll { ids.contains($0.id) }
        // A message the gateway refused will get no answer: replies matched by order skip it.
        if status == .failed { awaitingReply.removeAll { id in ending.contains { $0.messageID == id } } }
        actions.append(.persistFinal(ids: ending.map(\.id), status: status))
        for message in ending {
            let update = DeliveryUpdate(id: message.messageID, status: DeliveryStatus(status), detail: detail(message))
            actions.append(.publishDelivery(update))
            if update.status != .delivered {
                undelivered[update.status.rawValue, default: 0] += 1
                lastUndelivered = update
            }
        }
    }

    /// Messages never written expire; one that may have reached the gateway does not.
    private mutating func expire(now: Date, into actions: inout [Action]) {
        let cutoff = now.addingTimeInterval(-settings.expiry)
        let expired = pending.filter { !$0.everWritten && $0.createdAt <= cutoff }.map(\.id)
        guard !expired.isEmpty else { return }
        let expiry = settings.expiry
        settle(expired, as: .expired, into: &actions) { _ in "not delivered within \(Self.words(expiry)): it was never sent" }
    }

    // MARK: The connection

    private mutating func connectionEnded(now: Date, into actions: inout [Action]) {
        guard let ended = connection else { return }
        connection = nil
        if case .openClaw = ended.dialect { return openClawConnectionEnded(now: now, into: &actions) }
        // Without a gateway that resumes, what a reply still lacked is gone with the connection.
        guard gatewayResumes != true else { return }
        for id in openStreamsInOrder {
            cut(id, why: "the connection ended before the reply was complete", now: now, into: &actions)
        }
    }

    /// What the open connection needs now: the resume request, messages to write, probes,
    /// a replacement.
    private mutating func decide(now: Date, into actions: inout [Action]) {
        guard var open = connection, wireHeard, !open.replacing else { return }
        if case .openClaw = open.dialect { return decideOpenClaw(now: now, into: &actions) }
        if let after = resumeAfter {
            resumeAfter = nil
            open.resumeAskedAt = now
            write(
                try? codec.encode(
                    SessionResume(sessionID: session.sessionID, lastSequence: after), type: WireMessageType.sessionResume.rawValue, sequence: 0),
                on: open.epoch, into: &actions)
        }
        // A gateway that has not answered session.resume in time does not know it.
        if gatewayResumes == nil, let asked = open.resumeAskedAt, now >= asked.addingTimeInterval(settings.probeDeadline) {
            gatewayResumes = false
            open.resumeAskedAt = nil
        }
        connection = open

        // Frames written on this connection before the bus path dropped, or by a protod that
        // died, may be lost: to a gateway that drops repeated ids they are written again;
        // otherwise the connection is replaced (and they are written on the new one), never
        // written twice on it.
        let uncertain = pending.indices.filter { pending[$0].writtenOn == open.id && isUncertain(pending[$0]) }
        if !uncertain.isEmpty {
            switch gatewayResumes {
            case true?:
                for index in uncertain {
                    pending[index].writtenOn = nil
                    pending[index].restored = false
                }
            case false?:
                return replace(reason: "frames to or from the gateway may have been lost in the bus", into: &actions)
            case nil:
                return  // until the gateway says whether it resumes
            }
        }

        if let deadline = open.probeDeadline, now >= deadline {
            recordOutcome(success: false, now: now, into: &actions)
            actions.append(
                .diagnose(
                    DiagnosticEvent(kind: .probeFailed, detail: "the gateway answered no ping within \(Self.words(settings.probeDeadline)): connecting again")))
            return replace(reason: "the gateway answered no ping within \(Self.words(settings.probeDeadline))", into: &actions)
        }

        writeDue(on: open, now: now, into: &actions)
        checkOverdue(now: now, into: &actions)
        checkStreams(now: now, into: &actions)
    }

    /// Written by a protod that died, or before the bus path to connd dropped: the frame may
    /// never have reached the gateway.
    func isUncertain(_ message: Pending) -> Bool {
        if message.restored { return true }
        guard let lost = wireLostAt, let written = message.writtenAt else { return false }
        return written <= lost
    }

    /// A frame for connd to write on the connection of `epoch`, from what the codec encoded
    /// (nothing when it could not encode it).
    func write(_ encoded: Data?, on epoch: Int, into actions: inout [Action]) {
        guard let encoded else { return }
        actions.append(.write(WireFrame(epoch: epoch, text: String(decoding: encoded, as: UTF8.self))))
    }

    mutating func replace(reason: String, into actions: inout [Action]) {
        connection?.replacing = true
        actions.append(.reconnect(reason: reason))
    }

    /// Writes, in order, every pending message not yet written on this connection. Messages
    /// written on an earlier connection go again only once this one has shown it is alive
    /// (a pong or any frame), unless the gateway drops repeats: a connection that is as
    /// silent as the last one would only add a copy the gateway may read later.
    mutating func writeDue(on open: Connection, now: Date, into actions: inout [Action]) {
        if !open.verified, gatewayResumes != true, pending.contains(where: { $0.everWritten && $0.writtenOn != open.id }) {
            return startProbe(now: now, force: true, into: &actions)
        }
        if case .openClaw(let link) = open.dialect {
            // Queued before this gateway's limit was known, and never written: it cannot be.
            let tooLarge = pending.filter { !$0.everWritten && !link.fits($0.content) }.map(\.id)
            let limit = link.maximumPayload ?? 0
            settle(tooLarge, as: .failed, into: &actions) { _ in "too large for the gateway: it reads frames of at most \(limit) bytes" }
        }
        var written: [String] = []
        for index in pending.indices where pending[index].writtenOn != open.id {
            let message = pending[index]
            switch open.dialect {
            case .seed:
                let chat = ChatMessage(id: message.messageID, content: message.content, sender: .user, timestamp: message.createdAt, status: .pending)
                guard let data = try? codec.encode(chatMessage: chat, sequence: message.sequence) else { continue }
                write(data, on: open.epoch, into: &actions)
            case .openClaw(let link):
                // Another session's message waits until the connection goes over to it.
                guard sessionOf(message) == link.sessionKey else { continue }
                // One run at a time in a session, and one message written and unanswered at a
                // time: the rest waits for the reply in progress, and what a reconnect leaves
                // unknown is always one message.
                guard !openClawSessionBusy(on: open, now: now) else {
                    holdBehindRun(index, into: &actions)
                    continue
                }
                write(link.sendRequest(message), on: open.epoch, into: &actions)
                pending[index].place = .written
            }
            written.append(message.id)
            if !message.everWritten {
                actions.append(.publishDelivery(DeliveryUpdate(id: message.messageID, status: .sent)))
                awaitingReply.append(message.messageID)
            }
            if !pending[index].everWritten { pending[index].firstWrittenAt = now }
            pending[index].everWritten = true
            pending[index].writtenOn = open.id
            pending[index].writtenAt = now
            pending[index].acknowledgementDue = now.addingTimeInterval(settings.probeAfter)
            if pending[index].overdue == 0 { pending[index].lateAt = now.addingTimeInterval(Double(message.retry.timeoutMilliseconds) / 1000) }
        }
        if awaitingReply.count > Self.awaitingReplyLimit { awaitingReply.removeFirst(awaitingReply.count - Self.awaitingReplyLimit) }
        guard !written.isEmpty else { return }
        actions.append(.persistSent(ids: written, epoch: open.epoch, connection: open.id, at: now))
        actions.append(.diagnose(DiagnosticEvent(kind: .queueFlushed, count: written.count)))
    }

    /// An acknowledgement overdue on a live connection is a question about the connection:
    /// it is probed, and the message keeps waiting. One late by its retry policy also counts
    /// against health, once.
    mutating func checkOverdue(now: Date, into actions: inout [Action]) {
        guard let open = connection else { return }
        var probe = false
        for index in pending.indices where pending[index].writtenOn == open.id {
            if let late = pending[index].lateAt, now >= late {
                probe = true
                pending[index].lateAt = nil
                pending[index].overdue += 1
                let policy = pending[index].retry
                recordOutcome(success: false, now: now, into: &actions)
                actions.append(
                    .diagnose(
                        DiagnosticEvent(
                            kind: .acknowledgementOverdue, messageID: pending[index].messageID, willRetry: false,
                            detail: "no acknowledgement within \(policy.timeoutMilliseconds) ms; the connection is probed, and the message is kept")))
                offer(Suggestions.messagesNotAcknowledged, now: now, into: &actions)
            }
            if let due = pending[index].acknowledgementDue, now >= due {
                probe = true
                pending[index].acknowledgementDue = now.addingTimeInterval(settings.probeAfter)
            }
        }
        if probe { startProbe(now: now, into: &actions) }
    }

    /// Pings the gateway, unless a probe is under way or (unless `force`) the connection was
    /// heard from within `probeAfter` (it is alive).
    mutating func startProbe(now: Date, force: Bool = false, into actions: inout [Action]) {
        guard var open = connection, open.probeDeadline == nil, force || now >= open.heardAt.addingTimeInterval(settings.probeAfter) else { return }
        open.probeDeadline = now.addingTimeInterval(settings.probeDeadline)
        switch open.dialect {
        case .seed:
            connection = open
            write(try? codec.encodePing(sequence: 0, timestamp: now), on: open.epoch, into: &actions)
        case .openClaw(var link):
            let request = link.probeRequest()
            open.dialect = .openClaw(link)
            connection = open
            write(request, on: open.epoch, into: &actions)
        }
    }

    // MARK: Health

    mutating func recordOutcome(success: Bool, now: Date, into actions: inout [Action]) {
        guard let state = health.record(success: success, now: now) else { return }
        actions.append(.retainHealth(health.report))
        actions.append(.diagnose(DiagnosticEvent(kind: .healthChanged, detail: state.rawValue)))
    }

    mutating func offer(_ suggestion: RecoverySuggestion, now: Date, into actions: inout [Action]) {
        if suggestions.offer(suggestion, now: now) { actions.append(.suggest(suggestion)) }
    }

    /// A suggestion for a connection status, handed out at most once in its interval.
    public mutating func suggestion(for status: ConnectionStatus, now: Date) -> RecoverySuggestion? {
        guard let suggestion = Suggestions.forConnection(status), suggestions.offer(suggestion, now: now) else { return nil }
        return suggestion
    }

    /// A suggestion when the network path is gone.
    public mutating func suggestion(for path: NetworkPath, now: Date) -> RecoverySuggestion? {
        guard !path.satisfied, suggestions.offer(Suggestions.checkNetwork, now: now) else { return nil }
        return Suggestions.checkNetwork
    }

    static func words(_ interval: TimeInterval) -> String {
        interval == interval.rounded() ? "\(Int(interval)) s" : "\(interval) s"
    }
}

extension DeliveryStatus {
    init(_ status: OutboxMessage.Status) {
        switch status {
        case .queued: self = .queued
        case .sent: self = .sent
        case .accepted: self = .accepted
        case .delivered: self = .delivered
        case .failed: self = .failed
        case .expired: self = .expired
        case .cancelled: self = .cancelled
        }
    }
}

extension DeliveryStateMachine: DrivenMachine {
    public static var timePassed: Event { .tick }
}
