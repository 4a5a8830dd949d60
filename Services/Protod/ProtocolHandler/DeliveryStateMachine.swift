public import Foundation
public import OpenClawWire
public import TetherBus
public import TetherSchema
public import TetherService
public import TetherWire

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
        /// With `openStreams`: the seed dialect's replies that were streaming when the protod
        /// before this one ended (see ``SavedStream``).
        case started(
            pending: [OutboxMessage], session: SessionPoint, recent: [TranscriptEntry] = [], chosenSession: String? = nil, openStreams: [SavedStream] = [])
        /// A message was committed to the outbox (after ``admit(_:now:)`` let it in), or put
        /// back into it from another store after the outbox was found damaged.
        case accepted(OutboxMessage, fallbackFrom: DeliveryStrategy?)
        /// The outbox was found damaged at start and made anew, and no other store held these
        /// messages whole: they are said lost. The damage and each of them count as failures
        /// in the health (what the damage took beyond them is not known).
        case outboxWasDamaged(lost: [DeliveryUpdate])
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
        /// Something for the approval book that is no frame: Tether answered one, or the
        /// gateway said one is no longer waiting.
        case approval(ApprovalBook.Event)
        /// The images of a message put back to be written again, as read back from the
        /// outbox after ``Action/persistRequeued(id:)`` (empty: none could be read).
        case imagesRead(id: String, [Attachment])
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
        case persistFinal(ids: [String], status: DeliveryStatus)
        /// Put a delivered message back in the outbox, to be written again: the gateway lost it.
        /// Then read its images back from there for the machine (``Event/imagesRead(id:_:)``).
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
        /// Save the replies streaming now (the seed dialect), for a restarted protod to finish
        /// or to cut as incomplete: it keeps their chunks only in memory.
        case saveOpenStreams([SavedStream])
        /// Ask connd for a new connection: this one failed a probe, or frames on it may be lost.
        case reconnect(reason: String)
        /// Retain on `conv.session`: the conversation chatted in changed.
        case retainSession(ConversationSession)
        /// Retain on `approvals`: the approvals waiting changed.
        case retainApprovals(ApprovalsUpdate)
        /// Retain on `session.settings`: the session's settings or usage changed.
        case retainSettings(SessionSettings)
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
        /// Refused, with a code and words; nothing was committed. The actions say so on the bus.
        case refuse(Refusal, actions: [Action])
    }

    /// Why a send was refused before anything was committed.
    public typealias Refusal = CodedError<RefusalCode>

    /// The ways a send is refused.
    public enum RefusalCode: String, ErrorCode {
        /// Nothing to send, or only spaces and line breaks.
        case empty
        /// A `latestOnly` message names no kind, so nothing says what it replaces.
        case noKind
        /// Larger than the open gateway reads in one frame, or a text longer than the bus carries.
        case tooLarge
        /// The outbox holds as many messages never written as it may (and refuses when full).
        case outboxFull
        /// Images the gateway would not take, or a gateway that takes none: the words say which.
        case attachmentRefused
    }

    /// Why images are not sent to a seed gateway, in words.
    static let attachmentsUnavailable = "images are not available with this gateway: it speaks the seeds' JSON, which carries text only"

    public let settings: Settings
    let codec = WireCodec()

    var pending: [Pending] = []
    var connection: Connection?
    var wireHeard = false
    /// What the gateway does with `session.resume`, as learnt on the latest connection that told.
    public internal(set) var resumeSupport = ResumeSupport.unknown
    var session = SessionPoint(sessionID: nil, lastSequence: 0)
    /// The point last saved for a restart, and when.
    private var saved = (point: SessionPoint(sessionID: nil, lastSequence: 0), at: Date.distantPast)
    var assembler = StreamAssembler()
    var streams: [MessageID: OpenStream] = [:]
    /// The replies last saved as streaming.
    var savedStreams: Set<MessageID> = []
    /// Messages written and not yet matched to a reply, oldest first: a reply that does not
    /// say what it answers is matched to the first of them.
    var awaitingReply: [MessageID] = []
    static let awaitingReplyLimit = 1000
    /// The bot's name and state as last said on `bot.state`.
    var bot = BotPresence()
    var health: HealthMonitor
    var suggestions = SuggestionBook()
    /// What `outbox.summary` says of the messages that left undelivered.
    var tally = OutboxTally()
    var lastSession: ConversationSession?
    /// OpenClaw: the session the user chose, as they wrote it; new messages go to it.
    public internal(set) var chosenSession: String?
    /// OpenClaw: the gateway's main session key, as the latest connection said it.
    var mainSessionKey: String?
    /// OpenClaw: the session the latest connection chatted in (canonical).
    var chattingIn: String?
    /// OpenClaw: replies being streamed, by run id.
    var runs: [String: OpenClawRun] = [:]
    /// OpenClaw: what today's gateways say of Tether's messages by their keys.
    var receipts = ReceiptCheck()
    /// OpenClaw: where today's gateway marked the end of what protod has of each session.
    var catchUp = CatchUp()
    /// Which message's run asked for which exec approval: the gateway's follow-up turn answers it.
    var followUps = ApprovalFollowUps()
    /// OpenClaw: whether the gateway takes messages now, as its `UNAVAILABLE` answers say.
    var availability = GatewayAvailability()
    /// OpenClaw: runs in the session chatted in that are not Tether's (another client's, or the
    /// gateway's follow-up turns), with when each was last heard of.
    var otherRuns: [String: Date] = [:]
    /// OpenClaw: tool calls started and not yet ended, by their call id: what their result
    /// is shown with (at most ``liveToolCallLimit``, the oldest forgotten first).
    var liveToolCalls: [String: LiveToolCall] = [:]
    static let liveToolCallLimit = 200
    /// What the transcript holds: what a history answer is matched against.
    var transcript = TranscriptMemory()
    /// The approvals the gateway waits for (OpenClaw).
    public internal(set) var approvals = ApprovalBook(unavailable: "not connected to a gateway yet")
    /// The settings and usage of the session chatted in, as the gateway last said them.
    public internal(set) var sessionSettings = SessionSettings(unavailable: "not connected to a gateway yet")
    /// The session whose settings were last asked for on the open connection.
    var settingsAskedFor: String?
    /// How many recent transcript entries the machine keeps in mind (and is started with).
    public static let knownLimit = TranscriptMemory.limit

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
    /// The open connection, while frames reach connd and it is not being replaced: what
    /// protod decides about.
    var decidable: Connection? {
        guard let connection, wireHeard, !connection.isReplacing else { return nil }
        return connection
    }
    /// The dialect of the open connection (the seed dialect when none is open).
    public var dialect: WireDialect {
        connection?.dialect.wire ?? .seed
    }
    /// The status of a pending message; nil when it is not pending.
    public func status(of id: String) -> DeliveryStatus? {
        pending.first { $0.id == id }.map { message in
            if message.delivery.hold?.isInGatewayQueue == true { return .accepted }
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
        if resumePoint != saved.point { deadlines.append(saved.at.addingTimeInterval(Self.sessionSaveInterval)) }
        for stream in streams.values where stream.publicationDue {
            deadlines.append((stream.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval))
        }
        for run in runs.values where run.publicationDue {
            deadlines.append((run.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval))
        }
        // What the open connection is waiting for.
        if let open = decidable { deadlines += open.dialect.rules.deadlines(of: self, on: open) }
        if let expiry = approvals.nextExpiry { deadlines.append(expiry) }
        if let paused = availability.pausedUntil { deadlines.append(paused) }
        return deadlines.min()
    }

    // MARK: Commands

    /// Decides whether a send may be committed; nothing changes until ``Event/accepted(_:fallbackFrom:)``.
    public mutating func admit(_ request: SendMessageCommand.Request, now: Date) -> Admission {
        let attachments = request.attachments ?? []
        if !attachments.isEmpty {
            // Said before anything else: no other change to the message would make it go.
            guard mayBeOpenClaw else { return .refuse(Refusal(.attachmentRefused, Self.attachmentsUnavailable + "; the message was not queued"), actions: []) }
            if let refusal = ImageAttachments.refusal(for: attachments, text: request.content) {
                return .refuse(Refusal(.attachmentRefused, refusal.description), actions: [])
            }
        }
        if let refusal = SendMessageCommand.textRefusal(request.content) { return .refuse(Refusal(.tooLarge, refusal), actions: []) }
        // A message of images alone is sent as OpenClaw's gateway takes one: with no text.
        guard !attachments.isEmpty || !request.content.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return .refuse(
                Refusal(.empty, request.content.isEmpty ? "the message is empty" : "the message is empty: only spaces or line breaks"), actions: [])
        }
        var strategy = request.strategy ?? .queued
        var fallbackFrom: DeliveryStrategy?
        if strategy == .immediate, !canWrite, let fallback = request.fallback, fallback != .immediate {
            fallbackFrom = strategy
            strategy = fallback
        }
        if strategy == .latestOnly, request.kind == nil { return .refuse(Refusal(.noKind, "latestOnly needs a kind"), actions: []) }
        if let open = connection, let refusal = open.dialect.rules.refusal(for: request.content, attachments: attachments, on: open) {
            return .refuse(refusal, actions: [])
        }
        // A latestOnly message replaces a waiting one of its kind: it takes no more room.
        let replacesOne = strategy == .latestOnly && pending.contains { !$0.everWritten && $0.kind == request.kind && $0.strategy == .latestOnly }
        guard replacesOne || queuedCount < settings.maximumQueued || settings.whenFull == .dropOldest else {
            var actions: [Action] = [
                .diagnose(DiagnosticEvent(kind: .queueOverflow, messageID: request.id, queueSize: queuedCount, detail: "refused: the outbox is full"))
            ]
            offer(Suggestions.outboxFull, now: now, into: &actions)
            return .refuse(
                Refusal(
                    .outboxFull,
                    "the outbox is full: \(queuedCount) messages wait to be sent (at most \(settings.maximumQueued)); this one was not queued, send it again once they have gone out"
                ),
                actions: actions)
        }
        return .commit(strategy, fallbackFrom: fallbackFrom)
    }

    // MARK: Events

    /// Feeds an event at `now`; returns the actions to carry out, in order.
    public mutating func handle(_ event: Event, now: Date) -> [Action] {
        var actions: [Action] = []
        switch event {
        case .started(let messages, let point, let recent, let chosen, let open):
            if let chosen { chosenSession = chosen }
            restore(open, now: now)
            session = point
            saved.point = point
            for entry in recent { transcript.remember(entry) }
            pending = messages.filter { [.queued, .sent, .accepted].contains($0.status) }.sorted { $0.sequence < $1.sequence }.map(Self.pending)
            awaitingReply = pending.filter(\.everWritten).map(\.messageID)
            actions.append(.retainApprovals(approvals.current))
            actions.append(.retainSettings(sessionSettings))
            actions.append(.retainHealth(health.report))
        case .accepted(let message, let fallbackFrom):
            accepted(message, fallbackFrom: fallbackFrom, now: now, into: &actions)
        case .outboxWasDamaged(let lost):
            outboxWasDamaged(lost: lost, now: now, into: &actions)
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
            // Written by a protod before this one on another connection: unconfirmed here. On
            // this one (connd kept it open), its frame may be lost: it stays uncertain.
            for index in pending.indices {
                if case .uncertain(let on, _, _) = pending[index].delivery, on != id { pending[index].delivery = pending[index].delivery.unconfirmed }
            }
            if let gateway, gateway.dialect == .openclaw {
                openClawConnectionUp(epoch: epoch, id: id, gateway: gateway, now: now)
                approvalsConnectionUp(epoch: epoch, gateway: gateway, now: now, into: &actions)
                // Asked for after the history lookup (``askForSettingsOfNewSession``): the conversation first.
                settingsAskedFor = nil
            } else {
                // First ask for what the gateway sent while this client could not hear it.
                connection = Connection(epoch: epoch, id: id, openedAt: now, dialect: .seed(SeedLink(resume: .due(after: session.lastSequence))))
                approvalsConnectionUp(epoch: epoch, gateway: gateway, now: now, into: &actions)
                learnSettings(SessionSettings(unavailable: Self.settingsUnavailableOnSeed), into: &actions)
            }
        case .connectionDown:
            connectionEnded(now: now, into: &actions)
        case .wirePath(let heard):
            guard heard != wireHeard else { break }
            wireHeard = heard
            if !heard { wirePathLost() }
        case .frame(let message):
            receive(message, now: now, into: &actions)
        case .openClawFrame(let frame):
            receive(frame, now: now, into: &actions)
        case .approval(let event):
            approvals(event, now: now, into: &actions)
        case .imagesRead(let id, let images):
            guard let index = pending.firstIndex(where: { $0.id == id && $0.imagesToRead }) else { break }
            guard !images.isEmpty else {
                settle([id], as: .failed, into: &actions) { _ in
                    "the gateway lost this message, and its images could not be read back from the outbox: it was not written again"
                }
                break
            }
            pending[index].attachments = images
            pending[index].imagesToRead = false
        case .tick:
            availability.passTime(now: now)
        }
        approvals(.tick, now: now, into: &actions)
        expire(now: now, into: &actions)
        decide(now: now, into: &actions)
        askForSettingsOfNewSession(into: &actions)
        publishDueStreams(now: now, into: &actions)
        publishDueRuns(now: now, into: &actions)
        nameSessions(in: &actions)
        for case .publishEntry(let entry) in actions { transcript.remember(entry) }
        if let current = conversation, current != lastSession {
            lastSession = current
            actions.append(.retainSession(current))
        }
        saveSession(now: now, into: &actions)
        saveOpenStreams(into: &actions)
        if let summary = tally.changedSummary(pending: pending.count, receipts: receipts) { actions.append(.retainSummary(summary)) }
        // Frames first, in the order chosen: the gateway's answer is the slow part of a round
        // trip, so a frame does not wait for the journal writes and publications of its own
        // event. Those keep their order among themselves.
        return actions.filter(\.isWrite) + actions.filter { !$0.isWrite }
    }

    /// Saves the point to resume from when it moved, at most once per ``sessionSaveInterval``:
    /// a chunk moves it, and losing the last second of it costs only frames replayed twice.
    private mutating func saveSession(now: Date, into actions: inout [Action]) {
        let point = resumePoint
        guard point != saved.point, now >= saved.at.addingTimeInterval(Self.sessionSaveInterval) else { return }
        saved = (point, now)
        actions.append(.saveSession(point))
    }

    static let sessionSaveInterval: TimeInterval = 1

    private static func pending(_ message: OutboxMessage) -> Pending {
        // Written by an earlier protod: when first is not kept, so no later than it was made.
        let attempts = Attempts(firstAt: message.createdAt)
        let delivery: Delivery =
            switch message.status {
            // The gateway said it holds it: the history decides, as before the restart.
            case .accepted: .unconfirmed(hold: .inGatewayQueue(since: message.acceptedAt ?? message.lastSentAt ?? message.createdAt), attempts)
            // Its frame may have died with that protod in the bus.
            case .sent: message.sentConnection.map { .uncertain(on: $0, hold: nil, attempts) } ?? .unconfirmed(hold: nil, attempts)
            default: .queued(toldWaiting: false)
            }
        return Pending(
            id: message.id, sequence: message.sequence, content: message.content, createdAt: message.createdAt,
            strategy: DeliveryStrategy(rawValue: message.strategy) ?? .queued, kind: message.kind, retry: message.retryPolicy, session: message.session,
            delivery: delivery, attachments: message.attachments ?? [], whileBusy: message.whileBusy.flatMap(WhileBusy.init(rawValue:)))
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
                    session: mayBeOpenClaw ? sessionOf(entry) : nil, attachments: entry.attachments.isEmpty ? nil : entry.attachments.map(\.note))))
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
        _ ids: [String], as status: DeliveryStatus, into actions: inout [Action], detail: (Pending) -> String
    ) {
        let ending = pending.filter { ids.contains($0.id) }
        guard !ending.isEmpty else { return }
        pending.removeAll { ids.contains($0.id) }
        // A message the gateway refused will get no answer: replies matched by order skip it.
        if status == .failed { awaitingReply.removeAll { id in ending.contains { $0.messageID == id } } }
        actions.append(.persistFinal(ids: ending.map(\.id), status: status))
        for message in ending {
            let update = DeliveryUpdate(id: message.messageID, status: status, detail: detail(message))
            actions.append(.publishDelivery(update))
            tally.count(update)
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
}

extension DeliveryStateMachine: DrivenMachine {
    public static var timePassed: Event { .tick }
}
