import Foundation
import TetherSchema
import TetherWire

/// The seeds' dialect: what a frame from the gateway does (acknowledgements, a resumed
/// session, a reply's chunks and who it answers).
extension DeliveryStateMachine {
    mutating func receive(_ message: WireMessage, now: Date, into actions: inout [Action]) {
        // Any frame shows the connection and the gateway's reader alive.
        connection?.probeDeadline = nil
        connection?.heardAt = now
        connection?.verified = true
        if let sequence = Self.serverSequence(of: message) { session.lastSequence = max(session.lastSequence, sequence) }
        switch message {
        case .messageAck(let envelope):
            acknowledged(envelope.payload, now: now, into: &actions)
        case .botState(let envelope):
            botName = envelope.payload.botName
            botState = envelope.payload.state
            botDetail = envelope.payload.detail
            actions.append(.retainBotState(envelope.payload))
        case .streamingChunk(let envelope):
            chunk(envelope.payload, sequence: envelope.sequence, now: now, into: &actions)
        case .chatMessage(let envelope):
            let chat = envelope.payload
            if case .bot(let name) = chat.sender, !name.isEmpty { botName = name }
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

    mutating func acknowledged(_ ack: MessageAck, now: Date, into actions: inout [Action]) {
        guard let message = pending.first(where: { $0.id == ack.messageID.value }) else { return }
        if ack.status.isDelivered {
            pending.removeAll { $0.id == message.id }
            // Said before it is recorded, to save the front end a write's wait: the mark does
            // not wait for the disk anyway, and a protod that dies before recording it treats
            // the message as one written but unacknowledged, as it would had it died a moment
            // before the acknowledgement came (see ``Outbox``).
            actions.append(.publishDelivery(DeliveryUpdate(id: message.messageID, status: .delivered)))
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

    /// The gateway answered a resume: it replays and drops repeated ids. A new session means it restarted.
    mutating func resumed(_ answer: SessionResumed, now: Date, into actions: inout [Action]) {
        resumeSupport = .resumes
        connection?.resumeAskedAt = nil
        if answer.sessionID != session.sessionID {
            session = SessionPoint(sessionID: answer.sessionID, lastSequence: answer.lastSequence)
        }
        guard !answer.complete else { return }
        // What the gateway no longer has will not come: a stream still open stays cut.
        for id in openStreamsInOrder {
            cut(id, why: "the gateway lost the rest of the reply (it restarted)", now: now, into: &actions)
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
