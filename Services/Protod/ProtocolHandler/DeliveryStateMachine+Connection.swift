public import Foundation
public import OpenClawWire
public import TetherSchema
public import TetherService
public import TetherWire

extension DeliveryStateMachine {
    // MARK: The connection

    mutating func connectionEnded(now: Date, into actions: inout [Action]) {
        guard let ended = connection else { return }
        connection = nil
        if case .openClaw = ended.dialect { return openClawConnectionEnded(now: now, into: &actions) }
        // Without a gateway that resumes, what a reply still lacked is gone with the connection.
        guard resumeSupport != .resumes else { return }
        for id in openStreamsInOrder {
            cut(id, why: "the connection ended before the reply was complete", now: now, into: &actions)
        }
    }

    /// What the open connection needs now: the resume request, messages to write, probes,
    /// a replacement.
    mutating func decide(now: Date, into actions: inout [Action]) {
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
        if resumeSupport == .unknown, let asked = open.resumeAskedAt, now >= asked.addingTimeInterval(settings.probeDeadline) {
            resumeSupport = .replaysNothing
            open.resumeAskedAt = nil
        }
        connection = open

        // Frames written on this connection before the bus path dropped, or by a protod that
        // died, may be lost: to a gateway that drops repeated ids they are written again;
        // otherwise the connection is replaced (and they are written on the new one), never
        // written twice on it.
        let uncertain = pending.indices.filter { pending[$0].writtenOn == open.id && isUncertain(pending[$0]) }
        if !uncertain.isEmpty {
            switch resumeSupport {
            case .resumes:
                for index in uncertain {
                    pending[index].writtenOn = nil
                    pending[index].restored = false
                }
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
        if !open.verified, resumeSupport != .resumes, pending.contains(where: { $0.everWritten && $0.writtenOn != open.id }) {
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
