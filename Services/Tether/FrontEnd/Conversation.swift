import Foundation
public import TetherBus
public import TetherSchema
public import TetherService
public import TetherWire

/// How a `tether send` ended.
public enum SendOutcome: Sendable, Equatable {
    /// Delivered, and the bot's reply arrived whole.
    case replied(TranscriptEntry)
    /// Delivered; no whole reply within the time allowed: the reply as far as it came, if one started.
    case deliveredWithoutReply(partial: StreamProgress?)
    /// Delivered; the reply was cut off and will not be completed (the gateway lost it).
    case replyIncomplete(TranscriptEntry)
    /// Delivered, and its turn is over, but the reply that followed it cannot be attached to it
    /// for certain: it is in the conversation without a claim. Why, in protod's words.
    case replyUnclaimed(String)
    /// Committed to the outbox but not acknowledged within the time allowed, as protod said
    /// when asked at the end: queued (it stays in the outbox), sent (it may have reached the
    /// gateway) or accepted (the gateway holds it in a busy session's queue); with what protod
    /// last said of it, if anything.
    case notDelivered(DeliveryStatus, detail: String?)
    /// Committed to the outbox; at the end protod did not answer, so where it stands now is not
    /// known: the status is the last one heard.
    case unconfirmed(lastHeard: DeliveryStatus)
    /// protod never answered the send itself, so whether the message is in the outbox is not
    /// known: it may be (protod only slow or paused, and then it may reach the gateway), or not
    /// (protod not running). The bus was there: its absence is an error, not an outcome.
    case unanswered
    /// The gateway refused it.
    case failed(String)
    /// Lost with a damaged outbox, and no other store held all of it: in protod's words,
    /// which say whether it was written to the gateway before.
    case lost(String)
    /// Refused at send time (the outbox full, a message the gateway cannot take), in words:
    /// nothing was queued.
    case refused(String)
    /// Steered into the reply in progress, which answers it too: that reply once whole (nil
    /// when it was not Tether's), and protod's words.
    case steered(TranscriptEntry?, words: String)

    /// The exit code `tether send` ends with.
    public var exitCode: TetherExitCode {
        switch self {
        case .replied, .steered: .success
        case .deliveredWithoutReply, .replyIncomplete, .replyUnclaimed: .deliveredWithoutReply
        case .notDelivered, .unconfirmed, .unanswered, .failed, .lost: .notDone
        case .refused: .refused
        }
    }
}

/// A front end's view of the conversation through the bus.
public struct Conversation: Sendable {
    private let bus: any Bus
    /// A wait until a timeout from now, on the clock the waits of a send and of
    /// ``waitForConnection(timeout:)`` are measured on.
    private let timer: @Sendable (Duration) -> @Sendable () async throws -> Void

    /// - Parameter clock: the continuous clock, or a test's manual one; the bus's commands
    ///   time out on the bus's own.
    public init(bus: any Bus, clock: some Clock<Duration> = ContinuousClock()) {
        self.bus = bus
        self.timer = { Self.timer(on: clock, after: $0) }
    }

    /// What a person is told when protod does not answer a send: the words for
    /// ``SendOutcome/unanswered``, shared by every front end.
    public static let unansweredSend =
        "tether-protod did not answer: if it is only slow or paused, the message may be queued and may have reached the gateway; "
        + "if it is not running, nothing was queued (tether status shows which)"

    /// Sends `text` and waits, up to `timeout`, for its acknowledgement and the bot's reply.
    ///
    /// Subscribes before sending so no event is missed; the send itself is a command to
    /// tether-protod, answered once the message is committed to its outbox, and sent again
    /// with the same id (never queued twice) until `timeout` has passed. `options`
    /// carries the strategy, kind, fallback and retry policy.
    /// - Parameter accepted: called with protod's answer once the message is in the outbox
    ///   (its `warning`, when there is one, is for the person sending).
    public func send(
        _ text: String, id: MessageID = .random(), options: SendMessageCommand.Request? = nil, timeout: Duration,
        accepted onAccepted: @Sendable (SendMessageCommand.Reply) -> Void = { _ in },
        note onNote: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> SendOutcome {
        let timeUp = timer(timeout)
        let events = try await bus.subscribe(to: ["conv."], confirm: true)
        var request = options ?? SendMessageCommand.Request(id: id, content: text)
        request.id = id
        request.content = text
        let attempt = min(SendMessageCommand.attemptTimeout(for: request), timeout)
        let answer: Result<SendMessageCommand.Reply, BusError>
        do {
            answer = .success(
                try await bus.request(SendMessageCommand.self, request, timeout: attempt, attempts: max(1, Int((timeout / attempt).rounded(.up)))))
        } catch {
            answer = .failure(error)
        }
        let accepted: SendMessageCommand.Reply
        switch answer {
        case .success(let reply):
            accepted = reply
            onAccepted(reply)
        case .failure(let error):
            // protod refused it before committing anything: nothing was queued.
            if let refusal = error.refusal { return .refused(refusal) }
            // No answer at all: protod may have committed it and then stopped before answering.
            if error.wentUnanswered { return .unanswered }
            throw error
        }
        if accepted.status == .failed || accepted.status == .cancelled {
            return .failed("the message was \(accepted.status.rawValue) at once (strategy \(request.strategy?.rawValue ?? "queued"))")
        }
        let tracker = SendTracker(id: id, initial: accepted.status)
        let watched = try await withThrowingTaskGroup(of: Watch.self) { group in
            group.addTask {
                var tracker = tracker
                for await message in events {
                    let outcome = tracker.observe(message)
                    for note in tracker.takeNotes() { onNote(note) }
                    if let outcome { return .decided(outcome) }
                }
                // The time ran out (or the bus closed): what was seen until then.
                return .undecided(tracker)
            }
            group.addTask {
                try await timeUp()
                return .timeUp
            }
            var first = try await group.next() ?? .timeUp
            if case .timeUp = first {
                group.cancelAll()
                first = try await group.next() ?? .undecided(tracker)
            }
            group.cancelAll()
            return first
        }
        switch watched {
        case .decided(let outcome): return outcome
        case .undecided(let seen): return await seen.timedOut(asking: bus, request)
        case .timeUp: return await tracker.timedOut(asking: bus, request)
        }
    }

    /// A wait on `clock` until `timeout` from now: the deadline is taken here, not when the wait starts.
    private static func timer(on clock: some Clock<Duration>, after timeout: Duration) -> @Sendable () async throws -> Void {
        let deadline = clock.now.advanced(by: timeout)
        return { try await clock.sleep(until: deadline, tolerance: nil) }
    }

    /// How watching a sent message ended.
    private enum Watch: Sendable {
        case decided(SendOutcome)
        case undecided(SendTracker)
        case timeUp
    }

    /// Waits up to `timeout` for the connection to the gateway to be open; false when it is not.
    public func waitForConnection(timeout: Duration) async throws -> Bool {
        let timeUp = timer(timeout)
        let states = try await bus.subscribe(to: [Topic.connectionState.name], confirm: true)
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await message in states {
                    if (try? message.decode(ConnectionStatus.self))?.phase == .connected { return true }
                }
                return false
            }
            group.addTask {
                try? await timeUp()
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// Everything a front end draws its first frame from: its display snapshot, the
    /// connection identity and the latest `limit` transcript entries, with the revision
    /// they hold (see ``TranscriptModel``).
    /// With `session`, that session's transcript; without, the one chatted in.
    public func firstFrame(frontEnd: String, limit: Int = 1000, session: String? = nil) async throws(BusError) -> FirstFrame {
        // A page holds 1 to 1000 entries; none wanted is a page of one, left out.
        let reply = try await bus.request(
            SnapshotCommand.self, .init(frontEnd: frontEnd, limit: min(max(1, limit), TranscriptCommand.pageLimit), session: session))
        let shown = session ?? reply.session?.sessionKey
        let entries = limit > 0 ? try await olderPages(after: reply.transcript, limit: limit, session: shown) : []
        return FirstFrame(
            display: reply.display, identity: reply.identity, entries: entries, revision: reply.transcript.revision, streaming: reply.streaming,
            session: reply.session)
    }

    /// The entries of `first` preceded by older pages of `session`, up to `limit` in all, oldest first.
    private func olderPages(after first: TranscriptCommand.Reply, limit: Int, session: String?) async throws(BusError) -> [TranscriptEntry] {
        var pages = [first.entries]
        var remaining = limit - first.entries.count
        var before = first.nextBefore
        while remaining > 0, let next = before {
            let reply = try await bus.request(
                TranscriptCommand.self, .init(limit: min(remaining, TranscriptCommand.pageLimit), before: next, session: session))
            guard !reply.entries.isEmpty else { break }
            pages.append(reply.entries)
            remaining -= reply.entries.count
            before = reply.nextBefore
        }
        return pages.reversed().flatMap { $0 }
    }
}

/// What a front end needs for its first frame.
public struct FirstFrame: Sendable {
    /// The display as the front end last saved it.
    public var display: DisplaySnapshot?
    /// Who connd connects as.
    public var identity: ConnectionIdentity?
    /// The latest transcript entries, oldest first.
    public var entries: [TranscriptEntry]
    /// The entries hold every conversation change up to this revision.
    public var revision: Int
    /// Replies still streaming, as far as they came.
    public var streaming: [StreamProgress] = []
    /// The conversation whose transcript this is, as snapd last heard it on `conv.session`.
    public var session: ConversationSession?
}

/// Follows one sent message through the conversation events.
struct SendTracker: Sendable {
    let id: MessageID
    var status: DeliveryStatus
    /// What protod last said of it with its status (why it waits, where it is).
    var detail: String?
    /// The reply to it as far as it came, while it streams.
    var partial: StreamProgress?
    /// Steered into the reply in progress: the message whose reply answers it, and protod's words.
    var steered: (into: MessageID?, words: String)?
    /// Replies that ended while it was watched (a few): the one it is steered into may be among them.
    var endedReplies: [MessageID: TranscriptEntry] = [:]
    /// The message whose reply is this one's: its own, or the one it was steered into.
    var replyOf: MessageID { steered?.into ?? id }
    /// protod's words the sender is told at once: that the gateway cannot steer or interrupt.
    private var notes: [String] = []
    private var noted: Set<String> = []

    /// The words to tell the sender now, each once.
    mutating func takeNotes() -> [String] {
        defer { notes = [] }
        return notes
    }

    init(id: MessageID, initial: DeliveryStatus) {
        self.id = id
        self.status = initial
    }

    /// The outcome, once the events decide it.
    mutating func observe(_ message: BusMessage) -> SendOutcome? {
        switch message.topic {
        case .conversationDelivery:
            guard let update = try? message.decode(DeliveryUpdate.self), update.id == id else { return nil }
            if update.status.rank >= status.rank {
                status = update.status
                detail = update.detail
            }
            if update.status == .failed || update.status == .expired || update.status == .cancelled {
                return .failed("\(update.status.rawValue): \(update.detail ?? "the gateway refused the message")")
            }
            if update.status == .lost { return .lost(update.detail ?? "the outbox that held it was damaged") }
            if let words = update.detail, words.hasPrefix(WhileBusy.unavailableWordsPrefix), noted.insert(words).inserted { notes.append(words) }
            if update.unclaimedReply != nil { return .replyUnclaimed(update.detail ?? "the reply cannot be attached to it for certain") }
            if update.status == .delivered, let into = update.answeredWith {
                let words = update.detail ?? "steered into the reply in progress"
                steered = (into, words)
                // That reply may have ended before protod said where this message went.
                if let whole = endedReplies[into] { return .steered(whole, words: words) }
            } else if update.status == .delivered, update.detail?.hasPrefix("steered into") == true {
                // Into another client's reply: none of Tether's to print.
                return .steered(nil, words: update.detail ?? "steered into the reply in progress")
            }
        case .conversationStream:
            guard let progress = try? message.decode(StreamProgress.self), progress.inReplyTo == replyOf else { return nil }
            partial = progress.following(partial) ?? partial
        case .conversationMessage:
            guard let entry = try? message.decode(TranscriptEntry.self), let answered = entry.inReplyTo else { return nil }
            if entry.status == .received, endedReplies.count < 8 { endedReplies[answered] = entry }
            guard answered == replyOf else { return nil }
            // A reply implies the message was delivered, even if its acknowledgement event was missed.
            switch entry.status {
            case .received: return steered.map { .steered(entry, words: $0.words) } ?? .replied(entry)
            case .incomplete: return .replyIncomplete(entry)
            default: return nil
            }
        default:
            break
        }
        return nil
    }

    /// The outcome when time ran out. A reply that started shows the gateway had the message,
    /// acknowledged or not (some gateways acknowledge only after answering). Otherwise protod is
    /// asked where the message stands now (the same id sent again is answered with its status,
    /// never sent twice): events may have been missed, and the words must be true.
    func timedOut(asking bus: any Bus, _ request: SendMessageCommand.Request) async -> SendOutcome {
        if status == .delivered || partial != nil { return .deliveredWithoutReply(partial: partial) }
        guard let now = try? await bus.request(SendMessageCommand.self, request, timeout: .seconds(2), attempts: 1) else {
            return .unconfirmed(lastHeard: status)
        }
        switch now.status {
        case .delivered, .received, .incomplete: return .deliveredWithoutReply(partial: nil)
        case .failed, .expired, .cancelled: return .failed("\(now.status.rawValue) (the reason was said on the bus; tether watch shows it)")
        case .lost: return .lost(detail ?? "the outbox that held it was damaged (tether watch shows what was said of it)")
        case .queued, .sent, .accepted: return .notDelivered(now.status.rank >= status.rank ? now.status : status, detail: detail)
        }
    }
}
