import Foundation
import TetherBus
import TetherSchema
import TetherWire

/// The seeds' dialect: what a frame from the gateway does (acknowledgements, a resumed
/// session, a reply's chunks and who it answers).
extension DeliveryStateMachine {
    mutating func receive(_ message: WireMessage, now: Date, into actions: inout [Action]) {
        // Any frame shows the connection and the gateway's reader alive.
        connection?.heard(at: now)
        if let sequence = Self.serverSequence(of: message) {
            // A jump past the next frame: those between were dropped on the way here.
            if sequence > session.lastSequence + 1, session.lastSequence > 0 { framesMissed(after: session.lastSequence) }
            session.lastSequence = max(session.lastSequence, sequence)
        }
        switch message {
        case .messageAck(let envelope):
            acknowledged(envelope.payload, now: now, into: &actions)
        case .botState(let envelope):
            bot = BotPresence(name: envelope.payload.botName, state: envelope.payload.state, detail: envelope.payload.detail)
            actions.append(.retainBotState(envelope.payload))
        case .streamingChunk(let envelope):
            chunk(envelope.payload, sequence: envelope.sequence, now: now, into: &actions)
        case .chatMessage(let envelope):
            let chat = envelope.payload
            if case .bot(let name) = chat.sender, !name.isEmpty { bot.name = name }
            let (target, attribution) = attribute(chat.replyTo, now: now, into: &actions)
            actions.append(
                .publishEntry(
                    TranscriptEntry(
                        id: chat.id, sender: chat.sender, content: chat.content, timestamp: chat.timestamp, status: .received, inReplyTo: target,
                        attribution: attribution)))
        case .ping(let envelope):
            if let open = connection { write(try? codec.encodePong(sequence: envelope.sequence, timestamp: now), on: open.epoch, into: &actions) }
        case .sessionResumed(let envelope):
            resumed(envelope.payload, now: now, into: &actions)
        case .pong, .sessionResume, .unknown:
            break
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

    /// `detail`, `answeredWith`: said with the delivered mark (a steered message's words and
    /// the message whose reply answers it).
    mutating func acknowledged(_ ack: MessageAck, now: Date, into actions: inout [Action], detail: String? = nil, answeredWith: MessageID? = nil) {
        guard let message = pending.first(where: { $0.id == ack.messageID.value }) else { return }
        if ack.status.isDelivered {
            pending.removeAll { $0.id == message.id }
            // Said before it is recorded, to save the front end a write's wait: the mark does
            // not wait for the disk anyway, and a protod that dies before recording it treats
            // the message as one written but unacknowledged, as it would had it died a moment
            // before the acknowledgement came (see ``Outbox``).
            actions.append(.publishDelivery(DeliveryUpdate(id: message.messageID, status: .delivered, detail: detail, answeredWith: answeredWith)))
            actions.append(.persistDelivered(id: message.id))
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .messageSent, messageID: message.messageID, durationMilliseconds: Int(now.timeIntervalSince(message.createdAt) * 1000))))
            recordOutcome(success: true, now: now, into: &actions)
        } else {
            settle([message.id], as: .failed, into: &actions) { _ in "the gateway refused the message" }
            actions.append(.diagnose(DiagnosticEvent(kind: .deliveryFailed, messageID: message.messageID, willRetry: false, detail: "the gateway refused it")))
            recordOutcome(success: false, now: now, into: &actions)
        }
    }

    /// Frames after `last` did not reach this side (protod fell behind the bus, whose buffers
    /// then drop them): a gateway that resumes sends them again. One that does not (the seeds'
    /// JSON alone) need not number its frames one by one, so a jump there says nothing.
    mutating func framesMissed(after last: Int) {
        guard resumeSupport == .resumes, case .seed(var link)? = connection?.dialect, link.resume == nil else { return }
        link.resume = .due(after: last)
        connection?.dialect = .seed(link)
    }

    /// The gateway answered a resume: it replays and drops repeated ids. A new session means it restarted.
    mutating func resumed(_ answer: SessionResumed, now: Date, into actions: inout [Action]) {
        resumeSupport = .resumes
        if case .seed(var link)? = connection?.dialect, case .asked? = link.resume {
            link.resume = nil
            connection?.dialect = .seed(link)
        }
        let restarted = answer.sessionID != session.sessionID
        if restarted {
            session = SessionPoint(sessionID: answer.sessionID, lastSequence: answer.lastSequence)
        }
        guard !answer.complete else { return }
        // What the gateway no longer has will not come: a stream still open stays cut.
        let why =
            restarted ? "the gateway lost the rest of the reply (it restarted)" : "the gateway no longer holds the part of the reply that tether-protod missed"
        for id in openStreamsInOrder {
            cut(id, why: why, now: now, into: &actions)
        }
    }

    /// The message a reply answers: the one the gateway names, else the oldest written
    /// message not yet answered (a gateway answers in order). A reply the gateway names a
    /// message for shows it has the message: as good as its acknowledgement.
    mutating func attribute(_ named: MessageID?, now: Date, into actions: inout [Action]) -> (MessageID?, ReplyAttribution?) {
        if let named {
            awaitingReply.removeAll { $0 == named }
            acknowledged(MessageAck(messageID: named, status: .received, serverTimestamp: now), now: now, into: &actions)
            return (named, .gateway)
        }
        guard !awaitingReply.isEmpty else { return (nil, nil) }
        return (awaitingReply.removeFirst(), .order)
    }
}

/// The seeds' dialect on a connection: `session.resume` first and after frames may have been
/// lost in the bus; what was written again only to a gateway that drops repeated ids.
enum SeedDialect: DeliveryDialect {
    typealias Machine = DeliveryStateMachine

    /// The resume's answer, a probe's, acknowledgements, replies that stopped growing.
    static func deadlines(of machine: Machine, on open: Machine.Connection) -> [Date] {
        guard case .seed(let link) = open.dialect else { return [] }
        let settings = machine.settings
        var deadlines: [Date] = []
        if machine.resumeSupport == .unknown, case .asked(let asked)? = link.resume {
            deadlines.append(asked.addingTimeInterval(settings.probeDeadline))
        }
        // Until the gateway says whether it resumes, nothing written before a loss is decided.
        guard machine.resumeSupport != .unknown || !machine.pending.contains(where: \.delivery.isUncertain) else { return deadlines }
        if let probe = open.probeDeadline { deadlines.append(probe) }
        deadlines += machine.acknowledgementDeadlines
        for stream in machine.streams.values {
            if open.probeDeadline == nil {
                deadlines.append(max(stream.grewAt, open.heard.lastAt).addingTimeInterval(settings.probeAfter))
            }
            deadlines.append(stream.grewAt.addingTimeInterval(settings.replyStallDeadline))
        }
        return deadlines
    }

    static func decide(_ machine: inout Machine, now: Date, into actions: inout [Machine.Action]) {
        machine.decideSeed(now: now, into: &actions)
    }

    /// Without a gateway that resumes, what a reply still lacked is gone with the connection.
    static func connectionEnded(_ machine: inout Machine, now: Date, into actions: inout [Machine.Action]) {
        guard machine.resumeSupport != .resumes else { return }
        for id in machine.openStreamsInOrder {
            machine.cut(id, why: "the connection ended before the reply was complete", now: now, into: &actions)
        }
    }

    /// What the gateway sent meanwhile may be lost too: the session is resumed again, from
    /// the earliest point asked for.
    static func wirePathLost(_ machine: inout Machine) {
        guard case .seed(var link)? = machine.connection?.dialect else { return }
        let after = if case .due(let after)? = link.resume { after } else { Int.max }
        link.resume = .due(after: min(after, machine.session.lastSequence))
        machine.connection?.dialect = .seed(link)
    }

    static func messageFrame(
        _ index: Int, of machine: inout Machine, on open: Machine.Connection, now: Date, into actions: inout [Machine.Action]
    ) -> Data? {
        let message = machine.pending[index]
        let chat = ChatMessage(id: message.messageID, content: message.content, sender: .user, timestamp: message.createdAt, status: .pending)
        return try? machine.codec.encode(chatMessage: chat, sequence: message.sequence)
    }

    static func probeFrame(_ machine: inout Machine, now: Date) -> Data? {
        try? machine.codec.encodePing(sequence: 0, timestamp: now)
    }

    /// The seeds' JSON sets no limit of its own (the bus's is checked before a send reaches
    /// protod), and carries no images.
    static func refusal(for content: String, attachments: [Attachment], on open: Machine.Connection) -> Machine.Refusal? {
        attachments.isEmpty ? nil : Machine.Refusal(.attachmentRefused, Machine.attachmentsUnavailable + "; the message was not queued")
    }
}

extension DeliveryStateMachine {
    /// What a seed-dialect connection needs now: the resume request, what may have been lost,
    /// messages to write, probes, a replacement.
    mutating func decideSeed(now: Date, into actions: inout [Action]) {
        guard var open = decidable, case .seed(var link) = open.dialect else { return }
        if case .due(let after)? = link.resume {
            link.resume = .asked(at: now)
            write(
                try? codec.encode(
                    SessionResume(sessionID: session.sessionID, lastSequence: after), type: WireMessageType.sessionResume.rawValue, sequence: 0),
                on: open.epoch, into: &actions)
        }
        // A gateway that has not answered session.resume in time does not know it.
        if resumeSupport == .unknown, case .asked(let asked)? = link.resume, now >= asked.addingTimeInterval(settings.probeDeadline) {
            resumeSupport = .replaysNothing
            link.resume = nil
            // Replies a protod before this one was receiving: such a gateway sends nothing again.
            for id in openStreamsInOrder where streams[id]?.restored == true {
                cut(id, why: "the gateway does not resume sessions: the rest of the reply will not come", now: now, into: &actions)
            }
        }
        open.dialect = .seed(link)
        connection = open

        // Frames written on this connection before the bus path dropped, or by a protod that
        // died, may be lost: to a gateway that drops repeated ids they are written again;
        // otherwise the connection is replaced (and they are written on the new one), never
        // written twice on it.
        let uncertain = pending.indices.filter { pending[$0].delivery.isUncertain }
        if !uncertain.isEmpty {
            switch resumeSupport {
            case .resumes:
                for index in uncertain { pending[index].delivery = pending[index].delivery.unconfirmed }
            case .replaysNothing:
                return replace(reason: "frames to or from the gateway may have been lost in the bus", into: &actions)
            case .unknown:
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

        // Images accepted before any gateway was heard cannot go to this one: the message
        // fails saying so, rather than going without them.
        let withImages = pending.filter { !$0.attachments.isEmpty && !$0.everWritten }.map(\.id)
        if !withImages.isEmpty {
            settle(withImages, as: .failed, into: &actions) { _ in "not sent: \(Self.attachmentsUnavailable); send the text again without them" }
        }
        writeDue(on: open, now: now, into: &actions)
        checkOverdue(now: now, into: &actions)
        checkStreams(now: now, into: &actions)
    }
}
