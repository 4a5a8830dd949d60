public import Foundation
public import OpenClawWire
import TetherBus
import TetherSchema
import TetherWire

extension DeliveryStateMachine {
    /// What is due on an OpenClaw connection: the history lookup's answer, a probe's, acknowledgements.
    func openClawDeadlines(_ open: Connection, _ link: OpenClawLink) -> [Date] {
        var deadlines: [Date] = []
        if let probe = open.probeDeadline { deadlines.append(probe) }
        if let lookup = link.history {
            // Unanswered and quiet: probe (a connection heard from since is not probed yet).
            if open.probeDeadline == nil { deadlines.append(max(lookup.sentAt, open.heard.lastAt).addingTimeInterval(settings.probeAfter)) }
            // Unanswered while the gateway answers other things: ask for fewer.
            if open.heard.lastAt > lookup.sentAt { deadlines.append(lookup.sentAt.addingTimeInterval(settings.probeAfter + settings.probeDeadline)) }
        }
        deadlines += acknowledgementDeadlines
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
            // Only while quiet: a run under way ends with a new due time, and a past one would spin.
            if link.history == nil, isQuiet(link), let renewal = catchUp.renewalDue(link.sessionKey) { deadlines.append(renewal) }
        }
        return deadlines
    }

    /// An OpenClaw connection opened: it chats in the session due, and its history is looked
    /// up before anything is written.
    mutating func openClawConnectionUp(epoch: Int, id: String, gateway: GatewayInfo, now: Date) {
        let link = OpenClawLink(gateway, requested: dueSessionRequest, now: now)
        receipts.meet(release: gateway.generation?.release)
        catchUp.meet(release: gateway.generation?.release)
        availability.available()
        mainSessionKey = gateway.mainSessionKey
        chattingIn = link.sessionKey
        connection = Connection(epoch: epoch, id: id, openedAt: now, dialect: .openClaw(link))
        // A gateway that does not replay: frames are never resumed, runs are recovered from history.
        resumeSupport = .replaysNothing
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
        let uncertain = pending.indices.filter { pending[$0].delivery.isUncertain }
        if !uncertain.isEmpty {
            for index in uncertain { pending[index].delivery = pending[index].delivery.unconfirmed }
            if link.history == nil { link.recovered = false } else { link.lookupAgain = true }
        }
        if !link.recovered, link.history == nil {
            write(recoveryLookup(&link, now: now), on: open.epoch, into: &actions)
        }
        if let lookup = link.history {
            // An answer too large for the bus never arrives while the gateway goes on
            // answering: ask again for fewer messages.
            if now >= lookup.sentAt.addingTimeInterval(settings.probeAfter + settings.probeDeadline), open.heard.lastAt > lookup.sentAt {
                let fewer = max(10, lookup.limit / 4)
                actions.append(.diagnose(DiagnosticEvent(kind: .probeFailed, detail: "no answer to chat.history (limit \(lookup.limit)): asking for \(fewer)")))
                write(link.historyRequest(limit: fewer, now: now, asking: keysInDoubt(link)), on: open.epoch, into: &actions)
            }
        }
        open.dialect = .openClaw(link)
        connection = open
        if let lookup = link.history, now >= max(lookup.sentAt, open.heard.lastAt).addingTimeInterval(settings.probeAfter) {
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
        guard link.recovered else { return }
        checkRuns(now: now, into: &actions)
        renewCursorIfDue(now: now, into: &actions)
        // Queued before this gateway's limit was known, and never written: it cannot be.
        let tooLarge = pending.filter { !$0.everWritten && !link.fits($0.content) }.map(\.id)
        let limit = link.maximumPayload ?? 0
        settle(tooLarge, as: .failed, into: &actions) { _ in "too large for the gateway: it reads frames of at most \(limit) bytes" }
        guard let current = connection else { return }
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
                guard let ends = gatewayHoldEnds(pending[index], link), now >= ends, let hold = pending[index].delivery.hold else { continue }
                pending[index].delivery = pending[index].delivery.holding(.quiet(since: hold.answeredAt, queued: hold.isInGatewayQueue), now: now)
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
        open.heard(at: now)
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
        if receiveApprovals(frame, now: now, into: &actions) { return }
        switch frame {
        case .response(let id, let ok, let payload, let error):
            if id.hasPrefix(OpenClawLink.settingsRequestPrefix) {
                settingsAnswered(ok ? try? payload?.decode(SessionsListResult.self) : nil, now: now, into: &actions)
            } else if id.hasPrefix("cmd:") {
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
            // A run of the session ended (a reply, or a setting the gateway answered): its usage
            // and settings are asked for again.
            if event.state != .delta, event.sessionKey.map(link.names) ?? true { askForSettings(into: &actions) }
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
            write(recoveryLookup(&link, now: now), on: open.epoch, into: &actions)
        }
        open.dialect = .openClaw(link)
        connection = open
    }

    /// The answer to a `chat.send`: `started`, `in_flight` and a cached answer all say the gateway has it.
    private mutating func sendAnswered(_ id: String, ok: Bool, payload: JSONValue?, error: GatewayErrorShape?, now: Date, into actions: inout [Action]) {
        let result = try? payload?.decode(ChatSendResult.self)
        if ok { availability.available() }
        if !ok, let error, error.code == "UNAVAILABLE", result?.status != "error", let index = pending.firstIndex(where: { $0.id == id }) {
            return notTaken(index, error, now: now, into: &actions)
        }
        if ok || error?.code == "UNAVAILABLE" && result?.status == "error" {
            if ok, result?.status == "started" || result?.status == "in_flight", let index = pending.firstIndex(where: { $0.id == id }) {
                // The gateway has it: a run began, or it waits in the gateway's queue (an empty
                // `final` follows then). Delivered once its run shows.
                if pending[index].wroteWhileBusy != .steer { awaitRun(of: index, now: now, into: &actions) }
                wroteIntoRunAnswered(index, result, now: now, into: &actions)
                if pending[index].everWritten, pending[index].delivery.hold == nil {
                    pending[index].delivery = pending[index].delivery.holding(.accepted(at: now), now: now)
                }
                // Today's gateways give the turn's place once it is in the transcript: kept.
                if result?.messageSeq != nil {
                    acknowledged(MessageAck(messageID: MessageID(id), status: .received, serverTimestamp: now), now: now, into: &actions)
                }
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

    /// The gateway has a message and runs it (under its key): its reply is awaited, and the bot thinks.
    mutating func awaitRun(of index: Int, now: Date, into actions: inout [Action]) {
        let id = pending[index].id
        guard runs[id] == nil else { return }
        runs[id] = OpenClawRun(
            inReplyTo: MessageID(id), startedAt: now, grewAt: now, heardAt: now, messageText: pending[index].content, session: chattingIn)
        setBotState(.thinking, now: now, into: &actions)
    }

    /// The gateway keeps the message in its busy session's queue, in memory: said in words,
    /// and the message stays in the outbox until the history shows its turn ran.
    mutating func heldByGateway(_ index: Int, now: Date, into actions: inout [Action], because why: String? = nil) {
        let id = pending[index].id
        runs[id] = nil
        pending[index].delivery = pending[index].delivery.holding(.inGatewayQueue(since: now), now: now)
        actions.append(.persistInGatewayQueue(id: id, at: now))
        actions.append(
            .publishDelivery(
                DeliveryUpdate(
                    id: pending[index].messageID, status: .accepted,
                    detail: (why.map { $0 + ": " } ?? "")
                        + "accepted, waiting in the gateway's queue: its session was busy with another reply; the gateway runs it after that one, and its reply is shown then"
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
                switch message.delivery {
                case .written, .uncertain(_, nil, _): true
                // The gateway is busy until its queue has run: a message written now would join
                // it. A session quiet for the reply stall deadline is not running it: no longer.
                case .held, .uncertain, .unconfirmed: gatewayHoldEnds(message, link).map { now < $0 } ?? false
                case .queued: false
                }
            }
    }

    /// When a message the gateway answered for (and has not shown stored) stops holding later
    /// ones back: the reply stall deadline after the session was last heard of, or after it
    /// was answered for, whichever is later; nil when it holds nothing back.
    func gatewayHoldEnds(_ message: Pending, _ link: OpenClawLink) -> Date? {
        switch message.delivery.hold {
        case .accepted(let since)?, .inGatewayQueue(let since)?: max(since, link.sessionHeardAt ?? since).addingTimeInterval(settings.replyStallDeadline)
        case .quiet?, nil: nil
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
        switch pending[index].delivery {
        case .queued(toldWaiting: false): pending[index].delivery = .queued(toldWaiting: true)
        case .unconfirmed(let hold, var attempts) where !attempts.toldWaiting:
            attempts.toldWaiting = true
            pending[index].delivery = .unconfirmed(hold: hold, attempts)
        default: return
        }
        actions.append(
            .publishDelivery(
                DeliveryUpdate(
                    id: pending[index].messageID, status: pending[index].everWritten ? .sent : .queued,
                    detail: pending[index].whileBusy.map(Self.cannotGoIntoRun)
                        ?? "waiting for the reply in progress: it is sent when that reply ends, so that it gets a run and a reply of its own")))
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
        guard var open = decidable, case .openClaw(var link) = open.dialect else { return nil }
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
}

/// OpenClaw's gateway protocol on a connection: the session's history looked up first and
/// after frames may have been lost; one message written and unanswered at a time, only while
/// no run is under way in the session; `health` as the probe; the gateway's frame limit.
enum OpenClawDialect: DeliveryDialect {
    typealias Machine = DeliveryStateMachine

    static func deadlines(of machine: Machine, on open: Machine.Connection) -> [Date] {
        guard case .openClaw(let link) = open.dialect else { return [] }
        return machine.openClawDeadlines(open, link)
    }

    static func decide(_ machine: inout Machine, now: Date, into actions: inout [Machine.Action]) {
        machine.decideOpenClaw(now: now, into: &actions)
    }

    static func connectionEnded(_ machine: inout Machine, now: Date, into actions: inout [Machine.Action]) {
        machine.openClawConnectionEnded(now: now, into: &actions)
    }

    /// Nothing more: what was written is uncertain, and the next decision looks the history up.
    static func wirePathLost(_ machine: inout Machine) {}

    /// `chat.send` with the message's id as its idempotency key, when the message is of the
    /// session chatted in and the session is not busy; else it waits (said once).
    static func messageFrame(
        _ index: Int, of machine: inout Machine, on open: Machine.Connection, now: Date, into actions: inout [Machine.Action]
    ) -> Data? {
        guard case .openClaw(let link) = open.dialect else { return nil }
        let message = machine.pending[index]
        // A message the gateway lost goes again only with its images, once read back from the outbox.
        guard !message.imagesToRead else { return nil }
        // Another session's message waits until the connection goes over to it.
        guard machine.sessionOf(message) == link.sessionKey else { return nil }
        // One run at a time in a session, and one message written and unanswered at a time:
        // the rest waits for the reply in progress, and what a reconnect leaves unknown is
        // always one message.
        guard !machine.openClawSessionBusy(on: open, now: now) else {
            // Asked to steer or interrupt the reply in progress: written into it, where the gateway takes that.
            if let choice = machine.goesIntoRun(message, on: open, link: link) {
                machine.pending[index].wroteWhileBusy = choice
                return link.sendRequest(message, queueMode: choice)
            }
            machine.holdBehindRun(index, into: &actions)
            return nil
        }
        machine.pending[index].wroteWhileBusy = nil
        return link.sendRequest(message)
    }

    static func probeFrame(_ machine: inout Machine, now: Date) -> Data? {
        guard case .openClaw(var link)? = machine.connection?.dialect else { return nil }
        let request = link.probeRequest()
        machine.connection?.dialect = .openClaw(link)
        return request
    }

    static func refusal(for content: String, attachments: [Attachment], on open: Machine.Connection) -> Machine.Refusal? {
        guard case .openClaw(let link) = open.dialect, !link.fits(content, attachments: attachments) else { return nil }
        guard !attachments.isEmpty else {
            return Machine.Refusal(
                .tooLarge, "the message is \(content.utf8.count) bytes; the gateway reads frames of at most \(link.maximumPayload ?? 0) bytes: shorten it")
        }
        return Machine.Refusal(
            .tooLarge,
            "the message's frame would be about \((OpenClawLink.frameSize(content, attachments: attachments)).grouped) bytes with its images in base64; the gateway reads frames of at most \((link.maximumPayload ?? 0).grouped) bytes: send \(attachments.count == 1 ? "a smaller image" : "fewer or smaller images")"
        )
    }
}
