public import Foundation
public import OpenClawWire
import TetherSchema
import TetherWire

/// An OpenClaw connection as protod knows it: the protocol in use, the session chatted in,
/// the event counter, and the history lookup under way.
struct OpenClawLink: Sendable, Equatable {
    var protocolVersion: Int
    /// The canonical session key (the `main` alias resolved with the gateway's defaults).
    var sessionKey: String
    /// The gateway's main session key, which a key as a person writes it is made canonical by.
    var mainSessionKey: String?
    /// The gateway's clock minus Tether's, in seconds.
    var clockOffset: TimeInterval
    /// When the gateway started, by Tether's clock, if it said: a run older than that died with it.
    var gatewayStartedAt: Date?
    /// The last event sequence number on this connection.
    var lastSequence: Int?
    /// The history lookup under way.
    var history: HistoryLookup?
    /// A history lookup answered since the connection began (or since frames may have been lost):
    /// messages may be written.
    var recovered = false
    /// Asked for another lookup once the one under way is answered.
    var lookupAgain = false
    /// A lookup was widened to the gateway's maximum on this connection: it is not widened again.
    var widened = false
    /// The largest frame the gateway reads (`policy.maxPayload`).
    var maximumPayload: Int?
    /// When an event of a run in the session chatted in (Tether's or not) was last heard.
    var sessionHeardAt: Date?
    private var requests = 0

    struct HistoryLookup: Sendable, Equatable {
        var id: String
        var limit: Int
        var sentAt: Date
    }

    init(_ gateway: GatewayInfo, requested: String?, now: Date) {
        protocolVersion = gateway.protocolVersion ?? 3
        sessionKey = OpenClawProtocol.canonicalSessionKey(requested, mainSessionKey: gateway.mainSessionKey)
        mainSessionKey = gateway.mainSessionKey
        clockOffset = Double(gateway.clockOffsetMilliseconds ?? 0) / 1000
        // The uptime is the handshake's: a protod that joins the connection later uses the start it gives.
        gatewayStartedAt = gateway.startedAt ?? gateway.uptimeMilliseconds.map { now.addingTimeInterval(-Double($0) / 1000) }
        maximumPayload = gateway.maximumPayload
    }

    /// Chats in `key` (canonical) from now on: its history is looked up before anything is
    /// written there, and nothing of the session before carries over.
    mutating func chatIn(_ key: String) {
        sessionKey = key
        recovered = false
        history = nil
        lookupAgain = false
        widened = false
        sessionHeardAt = nil
    }

    /// Whether `key` names the session chatted in, in either form: events carry the canonical
    /// key, `aborted` and `chat.history` the key as the client sent it.
    func names(_ key: String) -> Bool {
        key == sessionKey || OpenClawProtocol.canonicalSessionKey(key, mainSessionKey: mainSessionKey) == sessionKey
    }

    /// Whether a message's `chat.send` fits in the gateway's largest frame.
    func fits(_ content: String) -> Bool {
        guard let maximumPayload else { return true }
        return content.utf8.count + Self.sendOverhead <= maximumPayload
    }

    /// The bytes of a `chat.send` frame besides the message (ids, key, session, escapes aside).
    static let sendOverhead = 512

    private static let codec = OpenClawCodec()

    /// The id of the `chat.send` request of a message; its answer is matched by it.
    static func sendRequestID(_ message: String) -> String { "send:" + message }

    /// `chat.send` for a message: its id is the idempotency key, every time it is written.
    func sendRequest(_ message: DeliveryStateMachine.Pending) -> Data {
        Data(
            Self.codec.request(
                id: Self.sendRequestID(message.id), method: "chat.send",
                params: ChatSendParams(sessionKey: sessionKey, message: message.content, idempotencyKey: message.id)
            ).utf8)
    }

    /// The id of the question whether a message's run goes on; its answer is matched by it.
    static func askRequestID(_ message: String) -> String { "ask:" + message }

    /// `chat.send` again, with the same key, for a message whose run is under way: a question,
    /// not a copy. The gateway answers `in_flight` while the run goes on and `ok` once it
    /// ended, and starts nothing.
    func askRequest(id: String, content: String) -> Data {
        Data(
            Self.codec.request(
                id: Self.askRequestID(id), method: "chat.send", params: ChatSendParams(sessionKey: sessionKey, message: content, idempotencyKey: id)
            ).utf8)
    }

    /// A request any live gateway answers at once: the probe of a quiet connection.
    mutating func probeRequest() -> Data {
        requests += 1
        return Data(Self.codec.request(id: "probe:\(requests)", method: "health", params: [String: String]()).utf8)
    }

    mutating func historyRequest(limit: Int, now: Date) -> Data {
        requests += 1
        let id = "history:\(requests)"
        history = HistoryLookup(id: id, limit: limit, sentAt: now)
        return Data(Self.codec.request(id: id, method: "chat.history", params: ChatHistoryParams(sessionKey: sessionKey, limit: limit)).utf8)
    }

    /// A request made for a command; its answer is handed back as ``DeliveryStateMachine/Action/commandAnswered(id:ok:payload:error:)``.
    mutating func commandRequest(method: String, params: JSONValue?) -> (id: String, frame: Data) {
        requests += 1
        let id = "cmd:\(requests)"
        return (id, Data(Self.codec.encode(.request(id: id, method: method, params: params)).utf8))
    }
}

/// Where an OpenClaw message stands between the outbox and the gateway's transcript. The
/// gateway stores a message when its turn starts; until then it may hold it in memory only.
enum OpenClawPlace: Sendable, Equatable {
    /// In the outbox, not written on the open connection.
    case outbox
    /// In the outbox, waiting for the reply in progress in its session to end (said once), so
    /// that the gateway runs it at once, with a run and a reply of its own.
    case behindRun
    /// Written; the gateway has not answered.
    case written
    /// The gateway answered `started` or `in_flight`; no sign of its run yet (a delta, an
    /// `agent` event, a final with text), which is what says it was stored.
    case accepted(at: Date)
    /// The gateway answered `started` and then ended the run with an empty `final`: it holds the
    /// message in the busy session's queue, in memory, to run later as a follow-up turn under a
    /// run id of its own. The history says when it ran, or that the queue's cap dropped it; a
    /// gateway that restarted since lost it.
    case inGatewayQueue(since: Date)
    /// Accepted or in the gateway's queue, and the session has been quiet for the reply stall
    /// deadline since: it no longer holds later messages back; the history still decides.
    case quiet(since: Date, queued: Bool)

    /// The gateway said it holds the message in its queue.
    var isInGatewayQueue: Bool {
        switch self {
        case .inGatewayQueue, .quiet(_, queued: true): true
        default: false
        }
    }

    /// When the gateway answered for it, if it did and has not shown it stored.
    var answeredAt: Date? {
        switch self {
        case .accepted(let at), .inGatewayQueue(let at), .quiet(let at, _): at
        case .outbox, .behindRun, .written: nil
        }
    }
}

/// A reply being streamed on OpenClaw: one run.
struct OpenClawRun: Sendable, Equatable {
    /// The message it answers (the run id is that message's id), when it is Tether's.
    var inReplyTo: MessageID?
    var startedAt: Date
    /// The reply so far.
    var text = ""
    /// False after frames may have been missed (a gap, a reconnect): a protocol-4 increment
    /// cannot be appended until a delta with the whole text so far comes.
    var synced = true
    var grewAt: Date
    /// When an event of the run was last heard (a delta, or an `agent` event): a run heard of
    /// for the reply stall deadline is incomplete.
    var heardAt: Date
    /// The model's failure the gateway last reported for the run, in its words, while it retries.
    var failure: String?
    /// The message's text, to ask the gateway with its key whether a failing run still goes on.
    var messageText: String?
    /// When the gateway was last asked whether the failing run goes on.
    var askedAt: Date?
    /// The session it runs in (canonical): its events and history are that session's.
    var session: String?
    var publishedAt: Date?
    /// The reply as last published: the next progress carries what was added to it.
    var publishedText = ""
    /// Its length when it was last published whole (0: not yet): it goes whole again once doubled.
    var wholeLength = 0
    var publicationDue = false
    var updates = 0

    var replyID: MessageID? { inReplyTo.map(HistoryMerge.replyID(of:)) }
}

extension DeliveryStateMachine {
    /// What is due on an OpenClaw connection: the history lookup's answer, a probe's, acknowledgements.
    func openClawDeadlines(_ open: Connection, _ link: OpenClawLink) -> [Date] {
        var deadlines: [Date] = []
        if let probe = open.probeDeadline { deadlines.append(probe) }
        if let lookup = link.history {
            // Unanswered and quiet: probe (a connection heard from since is not probed yet).
            if open.probeDeadline == nil { deadlines.append(max(lookup.sentAt, open.heardAt).addingTimeInterval(settings.probeAfter)) }
            // Unanswered while the gateway answers other things: ask for fewer.
            if open.heardAt > lookup.sentAt { deadlines.append(lookup.sentAt.addingTimeInterval(settings.probeAfter + settings.probeDeadline)) }
        }
        for message in pending where message.writtenOn == open.id {
            if let due = message.acknowledgementDue { deadlines.append(due) }
            if let late = message.lateAt { deadlines.append(late) }
        }
        if link.recovered {
            for run in runs.values {
                deadlines.append(run.heardAt.addingTimeInterval(settings.replyStallDeadline))
                if run.failure != nil, run.messageText != nil {
                    deadlines.append(max(run.heardAt, run.askedAt ?? .distantPast).addingTimeInterval(settings.probeAfter))
                }
            }
            for heard in otherRuns.values { deadlines.append(heard.addingTimeInterval(settings.replyStallDeadline)) }
            for message in pending {
                if let quiet = gatewayHoldEnds(message, link) { deadlines.append(quiet) }
            }
        }
        return deadlines
    }

    mutating func openClawConnectionUp(now: Date, into actions: inout [Action]) {
        // A gateway that does not replay: frames are never resumed, runs are recovered from history.
        gatewayResumes = false
    }

    /// The connection ended: partial replies can no longer be trusted to continue where they
    /// were (events are not replayed); they wait for the next connection's history lookup.
    mutating func openClawConnectionEnded(now: Date, into actions: inout [Action]) {
        for id in runs.keys { runs[id]?.synced = false }
    }

    mutating func decideOpenClaw(now: Date, into actions: inout [Action]) {
        guard var open = connection, case .openClaw(var link) = open.dialect else { return }
        // Another session is due (chosen, or a waiting message's): gone over to once nothing
        // of Tether's is unanswered in this one, so that each reply finds its message.
        let due = canonical(dueSessionRequest)
        if due != link.sessionKey, link.history == nil, !hasUnanswered(in: link.sessionKey) {
            // What this event published so far belongs to the session before.
            nameSessions(in: &actions)
            actions.append(.diagnose(DiagnosticEvent(kind: .sessionChanged, detail: "chatting in \(due) (was \(link.sessionKey))")))
            link.chatIn(due)
            chattingIn = due
            otherRuns = [:]
        }
        // Frames written before the bus path dropped, or by a protod that died, may not have
        // arrived: looked up again before anything is written.
        let uncertain = pending.indices.filter { pending[$0].writtenOn == open.id && isUncertain(pending[$0]) }
        if !uncertain.isEmpty {
            for index in uncertain {
                pending[index].writtenOn = nil
                pending[index].restored = false
            }
            if link.history == nil { link.recovered = false } else { link.lookupAgain = true }
        }
        if !link.recovered, link.history == nil {
            write(link.historyRequest(limit: settings.historyLimit, now: now), on: open.epoch, into: &actions)
        }
        if let lookup = link.history {
            // An answer too large for the bus never arrives while the gateway goes on
            // answering: ask again for fewer messages.
            if now >= lookup.sentAt.addingTimeInterval(settings.probeAfter + settings.probeDeadline), open.heardAt > lookup.sentAt {
                let fewer = max(10, lookup.limit / 4)
                actions.append(.diagnose(DiagnosticEvent(kind: .probeFailed, detail: "no answer to chat.history (limit \(lookup.limit)): asking for \(fewer)")))
                write(link.historyRequest(limit: fewer, now: now), on: open.epoch, into: &actions)
            }
        }
        open.dialect = .openClaw(link)
        connection = open
        if let lookup = link.history, now >= max(lookup.sentAt, open.heardAt).addingTimeInterval(settings.probeAfter) {
            startProbe(now: now, into: &actions)
        }
        if let deadline = connection?.probeDeadline, now >= deadline {
            recordOutcome(success: false, now: now, into: &actions)
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .probeFailed, detail: "the gateway answered no request within \(Self.words(settings.probeDeadline)): connecting again")))
            return replace(reason: "the gateway answered no request within \(Self.words(settings.probeDeadline))", into: &actions)
        }
        guard link.recovered, let current = connection else { return }
        checkRuns(now: now, into: &actions)
        writeDue(on: current, now: now, into: &actions)
        checkOverdue(now: now, into: &actions)
    }

    /// A run of Tether's that nothing was heard of for the reply stall deadline, on a live
    /// connection whose history was looked up, is incomplete: the gateway gave up (a model
    /// failure sends no `chat` event at all), or the reply stopped. Another client's run not
    /// heard of as long no longer holds Tether's messages back.
    mutating func checkRuns(now: Date, into actions: inout [Action]) {
        otherRuns = otherRuns.filter { now < $0.value.addingTimeInterval(settings.replyStallDeadline) }
        // A message the gateway answered for, in a session quiet since for the reply stall
        // deadline, is not being run: it holds nothing back any more; the history decides it.
        if case .openClaw(let link)? = connection?.dialect {
            var released = 0
            for index in pending.indices {
                guard let ends = gatewayHoldEnds(pending[index], link), now >= ends, let since = pending[index].place.answeredAt else { continue }
                pending[index].place = .quiet(since: since, queued: pending[index].place.isInGatewayQueue)
                released += 1
            }
            if released > 0 {
                actions.append(
                    .diagnose(
                        DiagnosticEvent(
                            kind: .historyChecked,
                            detail:
                                "\(released) message(s) the gateway answered for were not run within \(Self.words(settings.replyStallDeadline)) of its session going quiet: later messages are no longer held back, and the history is looked up"
                        )))
                lookUpHistory(now: now, into: &actions)
            }
        }
        // A run whose model failed goes quiet while the gateway waits to retry, and stays quiet
        // once it gave up: its key asked again says which (`in_flight` or `ok`).
        if let open = connection, case .openClaw(let link) = open.dialect {
            for (runID, run) in runs where run.failure != nil {
                guard let text = run.messageText, now >= max(run.heardAt, run.askedAt ?? .distantPast).addingTimeInterval(settings.probeAfter) else { continue }
                runs[runID]?.askedAt = now
                write(link.askRequest(id: runID, content: text), on: open.epoch, into: &actions)
            }
        }
        let stalled = runs.filter { now >= $0.value.heardAt.addingTimeInterval(settings.replyStallDeadline) }
        for (runID, run) in stalled.sorted(by: { $0.value.startedAt < $1.value.startedAt }) {
            let why =
                run.failure.map { "the model failed: \($0)" }
                ?? "the reply stopped: nothing came for \(Self.words(settings.replyStallDeadline))"
            end(runID, as: .incomplete, why: why, now: now, into: &actions)
        }
    }

    // MARK: Frames

    mutating func receive(_ frame: OpenClawFrame, now: Date, into actions: inout [Action]) {
        guard var open = connection, case .openClaw(var link) = open.dialect else { return }
        open.probeDeadline = nil
        open.heardAt = now
        open.verified = true
        var gap = false
        if case .event(_, _, let sequence?) = frame {
            if let last = link.lastSequence, sequence > last + 1 {
                // The counter is the whole gateway's: events for other clients (another device's
                // pairing, approvals outside this connection's scopes) leave gaps with nothing of
                // Tether's lost. Only a run of Tether's may have lost its end in one: not the run
                // this event is of, which has not ended before it.
                let arriving = Self.runID(of: frame)
                gap = runs.keys.contains { $0 != arriving }
                // A protocol-4 increment after missed events cannot be appended: the next delta's
                // whole text is taken instead.
                for id in runs.keys { runs[id]?.synced = false }
                let missed = "events \(last + 1)–\(sequence - 1) did not arrive"
                actions.append(
                    .diagnose(
                        DiagnosticEvent(
                            kind: .sequenceGap,
                            detail: gap
                                ? "\(missed): a reply under way may have ended among them; its text so far is kept and the history looked up"
                                : "\(missed): the gateway numbers events for all its clients, and no reply of Tether's was under way")))
            }
            link.lastSequence = max(link.lastSequence ?? sequence, sequence)
        }
        open.dialect = .openClaw(link)
        connection = open
        if gap { lookUpHistory(now: now, into: &actions) }
        switch frame {
        case .response(let id, let ok, let payload, let error):
            if id.hasPrefix("cmd:") {
                actions.append(.commandAnswered(id: id, ok: ok, payload: payload, error: error))
            } else if id.hasPrefix("send:") {
                sendAnswered(String(id.dropFirst("send:".count)), ok: ok, payload: payload, error: error, now: now, into: &actions)
            } else if id.hasPrefix("ask:") {
                askAnswered(String(id.dropFirst("ask:".count)), ok: ok, payload: payload, now: now, into: &actions)
            } else if link.history?.id == id {
                historyAnswered(ok ? try? payload?.decode(ChatHistoryResult.self) : nil, error: error, now: now, into: &actions)
            }
        case .event(name: "chat", let payload, _):
            guard let event = try? payload?.decode(ChatEventPayload.self) else { return }
            chat(event, now: now, into: &actions)
        case .event(name: "agent", let payload, _):
            guard let event = try? payload?.decode(AgentEventPayload.self) else { return }
            agent(event, now: now, into: &actions)
        case .event, .request:
            break
        }
    }

    /// The run a `chat` or `agent` event is of.
    static func runID(of frame: OpenClawFrame) -> String? {
        guard case .event(let name, let payload?, _) = frame, name == "chat" || name == "agent" else { return nil }
        return payload["runId"]?.stringValue
    }

    /// History is looked up; replies under way keep their text, but wait for a whole text before
    /// they grow again (an increment that follows missed frames cannot be appended).
    mutating func lookUpHistory(now: Date, into actions: inout [Action]) {
        guard var open = connection, case .openClaw(var link) = open.dialect else { return }
        for id in runs.keys { runs[id]?.synced = false }
        if link.history != nil {
            link.lookupAgain = true
        } else {
            write(link.historyRequest(limit: settings.historyLimit, now: now), on: open.epoch, into: &actions)
        }
        open.dialect = .openClaw(link)
        connection = open
    }

    /// The answer to a `chat.send`: `started`, `in_flight` and a cached answer all say the gateway has it.
    private mutating func sendAnswered(_ id: String, ok: Bool, payload: JSONValue?, error: GatewayErrorShape?, now: Date, into actions: inout [Action]) {
        let result = try? payload?.decode(ChatSendResult.self)
        if ok || error?.code == "UNAVAILABLE" && result?.status == "error" {
            if ok, result?.status == "started" || result?.status == "in_flight", let index = pending.firstIndex(where: { $0.id == id }) {
                // The gateway has it: a run began, or it waits in the gateway's queue (an empty
                // `final` follows then). Delivered once its run shows.
                if runs[id] == nil {
                    runs[id] = OpenClawRun(
                        inReplyTo: MessageID(id), startedAt: now, grewAt: now, heardAt: now, messageText: pending[index].content, session: chattingIn)
                    setBotState(.thinking, now: now, into: &actions)
                }
                if pending[index].place == .written { pending[index].place = .accepted(at: now) }
                pending[index].acknowledgementDue = nil
                pending[index].lateAt = nil
                return
            }
            acknowledged(MessageAck(messageID: MessageID(id), status: .received, serverTimestamp: now), now: now, into: &actions)
            if !ok {
                actions.append(
                    .diagnose(
                        DiagnosticEvent(
                            kind: .deliveryFailed, messageID: MessageID(id), willRetry: false,
                            detail: "the gateway has the message, and its run failed: \(result?.summary ?? error?.message ?? "no reason given")")))
            }
            return
        }
        guard pending.contains(where: { $0.id == id }) else { return }
        let reason = error.map { "\($0.code) \($0.message)" } ?? "refused without a reason"
        settle([id], as: .failed, into: &actions) { _ in "the gateway refused the message: \(reason)" }
        actions.append(
            .diagnose(DiagnosticEvent(kind: .deliveryFailed, messageID: MessageID(id), willRetry: false, detail: "the gateway refused it: \(reason)")))
        recordOutcome(success: false, now: now, into: &actions)
    }

    /// The gateway keeps the message in its busy session's queue, in memory: said in words,
    /// and the message stays in the outbox until the history shows its turn ran.
    private mutating func heldByGateway(_ index: Int, now: Date, into actions: inout [Action]) {
        let id = pending[index].id
        runs[id] = nil
        pending[index].place = .inGatewayQueue(since: now)
        actions.append(.persistInGatewayQueue(id: id, at: now))
        pending[index].acknowledgementDue = nil
        pending[index].lateAt = nil
        actions.append(
            .publishDelivery(
                DeliveryUpdate(
                    id: pending[index].messageID, status: .accepted,
                    detail:
                        "accepted, waiting in the gateway's queue: its session was busy with another reply; the gateway runs it after that one, and its reply is shown then"
                )))
        settleBotState(now: now, into: &actions)
    }

    /// A run is under way in the session (Tether's or another client's), or a message written
    /// on this connection has no answer yet: the next message waits, so that the gateway never
    /// queues one of Tether's in memory, where a crash or its queue's cap loses it.
    func openClawSessionBusy(on open: Connection, now: Date) -> Bool {
        guard case .openClaw(let link) = open.dialect else { return false }
        return !runs.isEmpty || !otherRuns.isEmpty
            || pending.contains { message in
                switch message.place {
                case .written: message.writtenOn == open.id
                // The gateway is busy until its queue has run: a message written now would join
                // it. A session quiet for the reply stall deadline is not running it: no longer.
                case .accepted, .inGatewayQueue: gatewayHoldEnds(message, link).map { now < $0 } ?? false
                case .outbox, .behindRun, .quiet: false
                }
            }
    }

    /// When a message the gateway answered for (and has not shown stored) stops holding later
    /// ones back: the reply stall deadline after the session was last heard of, or after it
    /// was answered for, whichever is later; nil when it holds nothing back.
    func gatewayHoldEnds(_ message: Pending, _ link: OpenClawLink) -> Date? {
        switch message.place {
        case .accepted(let since), .inGatewayQueue(let since): max(since, link.sessionHeardAt ?? since).addingTimeInterval(settings.replyStallDeadline)
        default: nil
        }
    }

    /// An event of a run in the session was heard: the session is not quiet.
    mutating func heardInSession(now: Date) {
        guard var open = connection, case .openClaw(var link) = open.dialect else { return }
        link.sessionHeardAt = now
        open.dialect = .openClaw(link)
        connection = open
    }

    /// Says once that a message waits for the reply in progress.
    mutating func holdBehindRun(_ index: Int, into actions: inout [Action]) {
        guard pending[index].place == .outbox else { return }
        pending[index].place = .behindRun
        actions.append(
            .publishDelivery(
                DeliveryUpdate(
                    id: pending[index].messageID, status: pending[index].everWritten ? .sent : .queued,
                    detail: "waiting for the reply in progress: it is sent when that reply ends, so that it gets a run and a reply of its own")))
    }

    /// Whether a failing run goes on: `in_flight` while it does; any other answer says it ended
    /// with no reply, the gateway having given up on the model.
    private mutating func askAnswered(_ id: String, ok: Bool, payload: JSONValue?, now: Date, into actions: inout [Action]) {
        guard let failure = runs[id]?.failure else { return }
        if ok, (try? payload?.decode(ChatSendResult.self))?.status == "in_flight" {
            runs[id]?.heardAt = now
        } else {
            end(id, as: .incomplete, why: "the model failed: \(failure); the gateway gave up", now: now, into: &actions)
        }
    }

    // MARK: Commands

    /// Writes a request for a command (`sessions.list`, `chat.abort`); nil when no OpenClaw
    /// connection is open, or frames do not reach connd. `params` may name the session with
    /// ``sessionKeyPlaceholder``, which is replaced by the session chatted in.
    public mutating func gatewayRequest(_ method: String, params: JSONValue?, now: Date) -> (id: String, actions: [Action])? {
        guard wireHeard, var open = connection, !open.replacing, case .openClaw(var link) = open.dialect else { return nil }
        var params = params
        if case .object(var object)? = params, object["sessionKey"] == .string(Self.sessionKeyPlaceholder) {
            object["sessionKey"] = .string(link.sessionKey)
            params = .object(object)
        }
        let (id, frame) = link.commandRequest(method: method, params: params)
        open.dialect = .openClaw(link)
        connection = open
        var actions: [Action] = []
        write(frame, on: open.epoch, into: &actions)
        return (id, actions)
    }

    /// Stands for the session chatted in, in ``gatewayRequest(_:params:now:)``'s params.
    public static let sessionKeyPlaceholder = "$session"

    // MARK: Replies

    private mutating func chat(_ event: ChatEventPayload, now: Date, into actions: inout [Action]) {
        guard case .openClaw(let link)? = connection?.dialect else { return }
        // Another session's events are not this conversation's.
        if let key = event.sessionKey, !link.names(key) { return }
        heardInSession(now: now)
        // A run is Tether's when its id is a message Tether sent: open, pending, or in the transcript.
        let ours = runs[event.runId] != nil || pending.contains { $0.id == event.runId } || knownEntries[MessageID(event.runId)] != nil
        guard ours else {
            // A run another client started (or the gateway's follow-up turn): Tether's messages
            // wait while it goes on; its messages come from the history, once it ended.
            if event.state == .delta {
                otherRuns[event.runId] = now
            } else {
                otherRuns[event.runId] = nil
                lookUpHistory(now: now, into: &actions)
            }
            return
        }
        let message = MessageID(event.runId)
        var run = runs[event.runId] ?? OpenClawRun(inReplyTo: message, startedAt: now, grewAt: now, heardAt: now, session: chattingIn)
        if event.state == .final, event.message == nil, run.text.isEmpty, let index = pending.firstIndex(where: { $0.id == event.runId }) {
            // Not a reply: the session was busy, and the gateway keeps the message in its queue.
            return heldByGateway(index, now: now, into: &actions)
        }
        // A run shows the gateway stored the message: as good as its acknowledgement.
        if pending.contains(where: { $0.id == event.runId }) {
            acknowledged(MessageAck(messageID: message, status: .received, serverTimestamp: now), now: now, into: &actions)
        }
        run.heardAt = now
        run.failure = nil
        let replyID = HistoryMerge.replyID(of: message)
        switch event.state {
        case .delta:
            let before = run.text
            if link.protocolVersion >= 4, let increment = event.deltaText {
                if event.replace == true {
                    run.text = increment
                    run.synced = true
                } else if run.synced {
                    run.text += increment
                } else if let whole = event.message?.text {
                    run.text = whole
                    run.synced = true
                }
            } else if let whole = event.message?.text, whole.count >= run.text.count || !run.synced {
                run.text = whole
                run.synced = true
            }
            guard run.text != before else {
                runs[event.runId] = run
                return
            }
            run.grewAt = now
            runs[event.runId] = run
            if knownEntries[replyID]?.status == .received { return }
            setBotState(.typing, now: now, into: &actions)
            let due = (run.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval)
            if due <= now { publishRun(event.runId, isFinal: false, now: now, into: &actions) } else { runs[event.runId]?.publicationDue = true }
        case .final:
            run.text = event.message?.text ?? run.text
            runs[event.runId] = run
            guard !run.text.isEmpty else {
                // A run that ended with no text at all has no reply to show.
                let why = run.failure.map { "the model failed: \($0)" } ?? "the gateway ended the run with no reply"
                return end(event.runId, as: .incomplete, why: why, now: now, into: &actions)
            }
            publishRun(event.runId, isFinal: true, now: now, into: &actions)
            runs[event.runId] = nil
            actions.append(
                .publishEntry(
                    TranscriptEntry(
                        id: replyID, sender: .bot(name: botName), content: run.text, timestamp: now, status: .received, inReplyTo: message,
                        attribution: .gateway)))
            settleBotState(now: now, into: &actions)
        case .aborted, .error:
            runs[event.runId] = run
            let why: String =
                if event.state == .error {
                    "the gateway reported an error: \(event.errorMessage ?? "no reason given")"
                } else {
                    switch event.stopReason {
                    case "rpc"?: "the reply was stopped (chat.abort)"
                    case "stop"?: "the reply was stopped (/stop)"
                    case "timeout"?: "the gateway gave up on the reply (timeout)"
                    default: "the reply was stopped (\(event.stopReason ?? "aborted"))"
                    }
                }
            end(event.runId, as: .incomplete, why: why, now: now, into: &actions)
        }
    }

    /// Ends a run of Tether's as it came, in the transcript with the reason it ended there;
    /// the bot is idle once no run of Tether's is open.
    mutating func end(_ runID: String, as status: DeliveryStatus, why: String, now: Date, into actions: inout [Action]) {
        guard let run = runs.removeValue(forKey: runID) else { return }
        actions.append(
            .publishEntry(
                TranscriptEntry(
                    id: run.replyID ?? MessageID(runID), sender: .bot(name: botName), content: run.text, timestamp: now, status: status,
                    inReplyTo: run.inReplyTo, attribution: .gateway, detail: why)))
        settleBotState(now: now, into: &actions, detail: why)
    }

    /// An `agent` event: the run is alive; a lifecycle error is the model failing, said at once
    /// in the gateway's words while the gateway retries (it sends no `chat` event for it).
    private mutating func agent(_ event: AgentEventPayload, now: Date, into actions: inout [Action]) {
        guard case .openClaw(let link)? = connection?.dialect else { return }
        if let key = event.sessionKey, !link.names(key) { return }
        heardInSession(now: now)
        let phase = event.stream == "lifecycle" ? event.data?["phase"]?.stringValue : nil
        let isPending = pending.contains { $0.id == event.runId }
        guard runs[event.runId] != nil || isPending else {
            // Another client's run, or the gateway's follow-up turn: Tether's messages wait for it.
            if phase == "end" { otherRuns[event.runId] = nil } else if knownEntries[MessageID(event.runId)] == nil { otherRuns[event.runId] = now }
            return
        }
        var run =
            runs[event.runId]
            ?? OpenClawRun(
                inReplyTo: MessageID(event.runId), startedAt: now, grewAt: now, heardAt: now,
                messageText: pending.first { $0.id == event.runId }?.content, session: chattingIn)
        // Its run shows the gateway stored the message.
        if isPending { acknowledged(MessageAck(messageID: MessageID(event.runId), status: .received, serverTimestamp: now), now: now, into: &actions) }
        run.heardAt = now
        if phase == "error" {
            let error = event.data?["error"]?.stringValue ?? "no reason given"
            run.failure = error
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .replyFailed, messageID: run.inReplyTo, willRetry: true, detail: "the model failed: \(error); the gateway is retrying")))
            setBotState(.thinking, detail: "the model failed: \(error); the gateway is retrying", now: now, into: &actions)
        }
        runs[event.runId] = run
    }

    private mutating func publishRun(_ runID: String, isFinal: Bool, now: Date, into actions: inout [Action]) {
        guard var run = runs[runID], let id = run.replyID else { return }
        let published = run.publishedText.utf8.count
        let length = run.text.utf8.count
        // A text that was replaced rather than extended (taken whole after a gap) goes whole.
        let extends = length >= published && run.text.utf8.starts(with: run.publishedText.utf8)
        guard isFinal || !extends || length != published else { return }
        let whole = !extends || run.wholeLength == 0 || length >= 2 * run.wholeLength
        actions.append(
            .publishStream(
                StreamProgress(
                    id: id, chunkIndex: run.updates, chunk: extends ? String(decoding: run.text.utf8.dropFirst(published), as: UTF8.self) : run.text,
                    offset: extends ? published : 0, content: whole ? run.text : nil, isFinal: isFinal, inReplyTo: run.inReplyTo, attribution: .gateway)))
        run.updates += 1
        run.publishedAt = now
        run.publishedText = run.text
        if whole { run.wholeLength = length }
        run.publicationDue = false
        runs[runID] = run
    }

    /// Publishes the growth of replies whose interval ended.
    mutating func publishDueRuns(now: Date, into actions: inout [Action]) {
        for (id, run) in runs where run.publicationDue {
            guard (run.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval) <= now else { continue }
            publishRun(id, isFinal: false, now: now, into: &actions)
        }
    }

    /// The bot is idle once no run of Tether's is open.
    private mutating func settleBotState(now: Date, into actions: inout [Action], detail: String? = nil) {
        guard runs.isEmpty else { return }
        setBotState(.idle, detail: detail.map { "reply incomplete: \($0)" }, now: now, into: &actions)
    }

    // MARK: History

    /// A history answer: Tether's messages the gateway has are delivered, the others are
    /// written again (same idempotency key); entries Tether lacks are published; replies found
    /// whole close their runs; runs the gateway lost in a restart are incomplete.
    private mutating func historyAnswered(_ result: ChatHistoryResult?, error: GatewayErrorShape?, now: Date, into actions: inout [Action]) {
        guard var open = connection, case .openClaw(var link) = open.dialect, let lookup = link.history else { return }
        link.history = nil
        guard let result else {
            // Without history nothing can be confirmed: what is unknown is written again with
            // its key, which a gateway that still remembers the key drops.
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .deliveryFailed, willRetry: true,
                        detail:
                            "chat.history failed (\(error.map { "\($0.code) \($0.message)" } ?? "unreadable answer")): unconfirmed messages are sent again with their idempotency key"
                    )))
            link.recovered = true
            open.dialect = .openClaw(link)
            connection = open
            return
        }
        let known = knownEntries
        let publishedIDs = publishedGatewayIDs
        let awaited = Set(pending.map(\.messageID))
        let merge = HistoryMerge.merge(
            result.messages, limit: lookup.limit,
            context: HistoryMerge.Context(
                // Only this session's: the same text sent in another is not in this history.
                sent: sentMessages.filter { sent in (sent.session.map { $0 == link.sessionKey } ?? true) && !pending.contains { $0.messageID == sent.id } }
                    + pending.filter { $0.everWritten && sessionOf($0) == link.sessionKey }.map {
                        HistoryMerge.Sent(id: $0.messageID, text: $0.content, createdAt: $0.firstWrittenAt ?? $0.createdAt)
                    },
                clockOffset: link.clockOffset, botName: botName, ownLabel: OpenClawProtocol.ownSenderLabel, known: { known[$0] },
                published: { publishedIDs[$0] }))
        // A message the window may not reach is looked up in a larger one, once.
        let unsure = pending.filter { message in
            message.everWritten && sessionOf(message) == link.sessionKey && !merge.found.contains(message.messageID)
                && merge.windowStart.map { (message.firstWrittenAt ?? message.createdAt) < $0 } == true
        }
        if !unsure.isEmpty, lookup.limit < 1000, !link.widened {
            link.widened = true
            write(link.historyRequest(limit: 1000, now: now), on: open.epoch, into: &actions)
            open.dialect = .openClaw(link)
            connection = open
            return
        }
        // Messages the gateway answered for and has not stored yet: still with it unless it
        // restarted since (its queue is in memory); named in an overflow summary, dropped.
        let dropped = HistoryMerge.droppedAtCap(result.messages)
        var held: [MessageID] = []
        for index in pending.indices {
            let since: Date
            guard let at = pending[index].place.answeredAt else { continue }
            since = at
            let id = pending[index].messageID
            if merge.found.contains(id) {
                held.append(id)
            } else if pending[index].place.isInGatewayQueue, dropped.contains(pending[index].content) {
                continue  // settled below
            } else if let started = link.gatewayStartedAt, started > since {
                // Lost with the gateway's memory: written again (its key is forgotten too).
                pending[index].place = .outbox
                pending[index].writtenOn = nil
            } else {
                pending[index].writtenOn = open.id
            }
        }
        let lostAtCap = pending.filter { message in
            message.place.isInGatewayQueue && !merge.found.contains(message.messageID) && dropped.contains(message.content)
        }
        settle(lostAtCap.map(\.id), as: .failed, into: &actions) { _ in
            "dropped by the gateway: its session was busy and its queue, which holds 20 messages, was full; the gateway names it only in a summary turn and never answers it"
        }
        let unknown = pending.filter { $0.everWritten && $0.writtenOn != open.id }.map(\.messageID)
        let confirmed = unknown.filter { merge.found.contains($0) }
        for id in confirmed + held {
            acknowledged(MessageAck(messageID: id, status: .received, serverTimestamp: now), now: now, into: &actions)
        }
        if !unknown.isEmpty {
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .historyChecked, count: confirmed.count,
                        detail:
                            "\(confirmed.count) of \(unknown.count) unacknowledged messages are in the gateway's history; \(unknown.count - confirmed.count) are written again with their idempotency key"
                    )))
        }
        for entry in merge.entries { actions.append(.publishEntry(entry)) }
        // Messages whose turn is over with a reply that cannot be attached to them for certain:
        // their senders are told, and the reply is in the conversation without a claim.
        let answered = Set(runs.values.compactMap(\.inReplyTo)).union(awaited)
        for (owner, reply) in merge.unclaimed.sorted(by: { $0.key.value < $1.key.value }) where answered.contains(owner) {
            actions.append(
                .publishDelivery(
                    DeliveryUpdate(
                        id: owner, status: .delivered,
                        detail:
                            "a reply followed it in the gateway's history, but the gateway does not say which message that reply answers, and it cannot be told for certain: it is shown without a claim",
                        unclaimedReply: reply)))
        }
        // Runs: whole in history, or lost with a gateway that restarted since they began; the
        // others go on, and the reply stall counts from now.
        for (runID, run) in runs {
            if let owner = run.inReplyTo, merge.replies[owner] != nil {
                runs[runID] = nil
            } else if let owner = run.inReplyTo, merge.unclaimed[owner] != nil {
                runs[runID] = nil
            } else if let started = link.gatewayStartedAt, run.startedAt < started {
                // A session's first message is stored only with its first reply: a gateway that
                // restarted before that has neither it nor its key. Written again, same key.
                if let owner = run.inReplyTo, !merge.found.contains(owner), let sent = sentMessages.last(where: { $0.id == owner }),
                    sent.session.map({ $0 == link.sessionKey }) ?? true, merge.windowStart.map({ $0 <= sent.createdAt }) ?? true
                {
                    runs[runID] = nil
                    requeue(sent, into: &actions)
                } else {
                    end(runID, as: .incomplete, why: "the gateway restarted during the reply: it will not be finished", now: now, into: &actions)
                }
            } else {
                runs[runID]?.heardAt = now
            }
        }
        settleBotState(now: now, into: &actions)
        link.recovered = true
        if link.lookupAgain {
            link.lookupAgain = false
            write(link.historyRequest(limit: settings.historyLimit, now: now), on: open.epoch, into: &actions)
        }
        open.dialect = .openClaw(link)
        connection = open
    }

    /// Puts a message the gateway lost back at the head of the outbox, to be written again
    /// with its key: its sender goes on waiting for its reply.
    mutating func requeue(_ sent: HistoryMerge.Sent, into actions: inout [Action]) {
        let first = (pending.map(\.sequence).min() ?? 1) - 1
        // Written before (the gateway lost it): it does not expire as a message never sent.
        pending.insert(
            Pending(
                id: sent.id.value, sequence: first, content: sent.text, createdAt: sent.createdAt, strategy: .queued, kind: nil, retry: .default,
                everWritten: true, firstWrittenAt: sent.createdAt, session: sent.session),
            at: 0)
        actions.append(.persistRequeued(id: sent.id.value))
        actions.append(
            .diagnose(
                DiagnosticEvent(
                    kind: .historyChecked, messageID: sent.id,
                    detail:
                        "the gateway restarted before it stored this message (a session's first message is stored with its first reply): written again with its key"
                )))
    }

    // MARK: What the transcript holds

    /// Remembers a published entry: its content and status, the gateway entry it stands for,
    /// and the text of a message Tether sent.
    mutating func remember(_ entry: TranscriptEntry) {
        if knownEntries[entry.id] == nil {
            knownOrder.append(entry.id)
            if entry.sender == .user, entry.status != .failed, entry.status != .cancelled, entry.status != .expired, entry.isTethers {
                sentMessages.append(HistoryMerge.Sent(id: entry.id, text: entry.content, createdAt: entry.timestamp, session: entry.session))
            }
        }
        knownEntries[entry.id] = (entry.content, entry.status)
        if let gatewayID = entry.gatewayID { publishedGatewayIDs[gatewayID] = entry.id }
        if knownOrder.count > Self.knownLimit {
            let excess = knownOrder.count - Self.knownLimit
            for id in knownOrder.prefix(excess) { knownEntries[id] = nil }
            knownOrder.removeFirst(excess)
        }
        if sentMessages.count > Self.knownLimit { sentMessages.removeFirst(sentMessages.count - Self.knownLimit) }
        if publishedGatewayIDs.count > 2 * Self.knownLimit {
            let kept = Set(knownOrder)
            publishedGatewayIDs = publishedGatewayIDs.filter { kept.contains($0.value) }
        }
    }
}

// MARK: Sessions

extension DeliveryStateMachine {
    /// `key` as the gateway names it (`side` → `agent:main:side`), by the latest connection's
    /// main session key.
    func canonical(_ key: String?) -> String {
        OpenClawProtocol.canonicalSessionKey(key, mainSessionKey: mainSessionKey)
    }

    /// Whether the gateway may speak OpenClaw: the open connection does, or, with none open,
    /// the last one did or none was seen since protod started.
    var mayBeOpenClaw: Bool {
        connection == nil ? lastSession?.dialect != .seed : speaksOpenClaw
    }

    /// Whether the open connection speaks OpenClaw, or the last one did when none is open.
    var speaksOpenClaw: Bool {
        guard let open = connection else { return lastSession?.dialect == .openclaw }
        if case .openClaw = open.dialect { return true }
        return false
    }

    /// The session a message goes to.
    func sessionOf(_ message: Pending) -> String {
        canonical(message.session ?? settings.sessionKey)
    }

    /// The session to chat in, as it was asked for: that of a reply of Tether's still coming,
    /// else of the oldest message written and unanswered (it may be in the gateway), else of
    /// the oldest waiting, else the one chosen.
    var dueSessionRequest: String? {
        if let replying = runs.values.first(where: { $0.inReplyTo != nil && $0.session != nil })?.session { return replying }
        guard let first = pending.first(where: \.everWritten) ?? pending.first else { return chosenSession }
        return first.session ?? settings.sessionKey
    }

    /// Whether a reply of Tether's is still coming in `session`.
    func isReplying(in session: String) -> Bool {
        runs.values.contains { $0.inReplyTo != nil && ($0.session ?? session) == session }
    }

    /// Whether a message of Tether's was written in `session` and is not settled, or a reply
    /// to one is still coming: its events and history are that session's.
    func hasUnanswered(in session: String) -> Bool {
        isReplying(in: session) || pending.contains { $0.everWritten && sessionOf($0) == session }
    }

    /// The conversation as `conv.session` says it: the session chosen and, while Tether still
    /// chats in another for messages sent before the choice, that one with how many wait there.
    var conversation: ConversationSession? {
        let dialect: WireDialect
        switch connection?.dialect {
        case .seed?: return ConversationSession(dialect: .seed, sessionKey: nil)
        case .openClaw?: dialect = .openclaw
        case nil:
            // Not connected: what the last connection showed, with the choice made since.
            guard let last = lastSession, last.dialect == .openclaw else { return lastSession }
            dialect = last.dialect
        }
        let chosen = canonical(chosenSession)
        let behind = pending.filter { sessionOf($0) != chosen }
        let finishing: String? =
            if case .openClaw(let link)? = connection?.dialect, link.sessionKey != chosen {
                link.sessionKey
            } else {
                behind.first.map(sessionOf)
            }
        let waiting =
            finishing.map { key in pending.count { sessionOf($0) == key } + runs.values.count { $0.inReplyTo != nil && ($0.session ?? key) == key } } ?? 0
        return ConversationSession(
            dialect: dialect, sessionKey: chosen, requested: chosenSession.flatMap { $0 == chosen ? nil : $0 },
            finishing: waiting > 0 ? finishing : nil, finishingMessages: waiting > 0 ? waiting : nil)
    }

    /// Entries and replies of an OpenClaw conversation name the session they belong to: the
    /// one chatted in (an own message names its own when it is accepted).
    func nameSessions(in actions: inout [Action]) {
        guard let session = chattingIn, speaksOpenClaw else { return }
        for index in actions.indices {
            switch actions[index] {
            case .publishEntry(var entry) where entry.session == nil:
                entry.session = session
                actions[index] = .publishEntry(entry)
            case .publishStream(var progress) where progress.session == nil:
                progress.session = session
                actions[index] = .publishStream(progress)
            default: break
            }
        }
    }
}

extension TranscriptEntry {
    /// A message this Tether sent, not one read from the gateway's transcript (another
    /// client's, or from before this Tether's time).
    var isTethers: Bool { sender == .user && author == nil && gatewayID == nil && !id.value.hasPrefix("oc:") }
}
