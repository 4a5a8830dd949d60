public import Foundation
import OpenClawWire
public import TetherSchema
import TetherService
import TetherWire

extension DeliveryStateMachine {
    // MARK: The connection

    mutating func connectionEnded(now: Date, into actions: inout [Action]) {
        guard let ended = connection else { return }
        connection = nil
        // What the gateway has of a message written on it is unknown until the next one shows.
        for index in pending.indices { pending[index].delivery = pending[index].delivery.unconfirmed }
        ended.dialect.rules.connectionEnded(&self, now: now, into: &actions)
    }

    /// The bus path to connd dropped: what was written on the open connection, and what it
    /// asked of the gateway, may be lost in the bus.
    mutating func wirePathLost() {
        guard let open = connection else { return }
        for index in pending.indices {
            switch pending[index].delivery {
            case .written(_, let attempts): pending[index].delivery = .uncertain(on: open.id, hold: nil, attempts)
            case .held(let hold, let attempts): pending[index].delivery = .uncertain(on: open.id, hold: hold, attempts)
            case .queued, .uncertain, .unconfirmed: break
            }
        }
        open.dialect.rules.wirePathLost(&self)
    }

    /// When the acknowledgements of messages written on the open connection are due or late.
    var acknowledgementDeadlines: [Date] {
        pending.flatMap { message -> [Date] in
            guard case .written(let written, _) = message.delivery else { return [] }
            return [written.acknowledgementDue] + (written.lateAt.map { [$0] } ?? [])
        }
    }

    /// What the open connection needs now, as its dialect decides.
    mutating func decide(now: Date, into actions: inout [Action]) {
        guard let open = decidable else { return }
        open.dialect.rules.decide(&self, now: now, into: &actions)
    }

    /// A frame for connd to write on the connection of `epoch`, from what the codec encoded
    /// (nothing when it could not encode it).
    func write(_ encoded: Data?, on epoch: Int, into actions: inout [Action]) {
        guard let encoded else { return }
        actions.append(.write(WireFrame(epoch: epoch, text: String(decoding: encoded, as: UTF8.self))))
    }

    mutating func replace(reason: String, into actions: inout [Action]) {
        connection?.phase = .replacing
        actions.append(.reconnect(reason: reason))
    }

    /// Writes, in order, every pending message not yet written on this connection. Messages
    /// written on an earlier connection go again only once this one has shown it is alive
    /// (a pong or any frame), unless the gateway drops repeats: a connection that is as
    /// silent as the last one would only add a copy the gateway may read later.
    mutating func writeDue(on open: Connection, now: Date, into actions: inout [Action]) {
        // The gateway asked for a pause (`UNAVAILABLE`, `retryAfterMs`): the outbox waits it out.
        guard availability.allowsWrites(now: now) else { return }
        if !open.heard.verified, resumeSupport != .resumes, pending.contains(where: { $0.everWritten && $0.delivery.isDueForWrite }) {
            return startProbe(now: now, force: true, into: &actions)
        }
        var written: [String] = []
        for index in pending.indices where pending[index].delivery.isDueForWrite {
            let message = pending[index]
            guard let frame = open.dialect.rules.messageFrame(index, of: &self, on: open, now: now, into: &actions) else { continue }
            write(frame, on: open.epoch, into: &actions)
            written.append(message.id)
            if !message.everWritten {
                actions.append(.publishDelivery(DeliveryUpdate(id: message.messageID, status: .sent)))
                awaitingReply.append(message.messageID)
            }
            let attempts = message.delivery.attempts ?? Attempts(firstAt: now, toldWaiting: message.delivery == .queued(toldWaiting: true))
            // Late by its retry policy counts against health once per message.
            let lateAt = attempts.countedLate ? nil : now.addingTimeInterval(Double(message.retry.timeoutMilliseconds) / 1000)
            pending[index].delivery = .written(
                Written(acknowledgementDue: now.addingTimeInterval(settings.probeAfter + Self.transferAllowance(bytes: message.frameBytes)), lateAt: lateAt),
                attempts)
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
        guard connection != nil else { return }
        var probe = false
        for index in pending.indices {
            guard case .written(var written, var attempts) = pending[index].delivery else { continue }
            if let late = written.lateAt, now >= late {
                probe = true
                written.lateAt = nil
                attempts.countedLate = true
                let policy = pending[index].retry
                recordOutcome(success: false, now: now, into: &actions)
                actions.append(
                    .diagnose(
                        DiagnosticEvent(
                            kind: .acknowledgementOverdue, messageID: pending[index].messageID, willRetry: false,
                            detail: "no acknowledgement within \(policy.timeoutMilliseconds) ms; the connection is probed, and the message is kept")))
                offer(Suggestions.messagesNotAcknowledged, now: now, into: &actions)
            }
            if now >= written.acknowledgementDue {
                probe = true
                written.acknowledgementDue = now.addingTimeInterval(settings.probeAfter)
            }
            pending[index].delivery = .written(written, attempts)
        }
        if probe { startProbe(now: now, into: &actions) }
    }

    /// The bytes of the messages written on the open connection and not answered yet: a probe
    /// written behind them reaches the gateway only after them.
    var unansweredBytes: Int {
        pending.reduce(0) { total, message in
            if case .written = message.delivery { total + message.frameBytes } else { total }
        }
    }

    /// How much longer than usual an answer may take behind `bytes` written before it: a frame
    /// of megabytes (images) takes seconds to cross a slow link or a loaded machine, and a probe
    /// that counted from its own writing would replace a connection that is only busy reading
    /// it, again and again. Frames up to 64 KiB get none; beyond, a second for each 256 KiB.
    public static func transferAllowance(bytes: Int) -> TimeInterval {
        Double(max(0, bytes - 65_536)) / 262_144
    }

    /// Pings the gateway, unless a probe is under way or (unless `force`) the connection was
    /// heard from within `probeAfter` (it is alive).
    mutating func startProbe(now: Date, force: Bool = false, into actions: inout [Action]) {
        guard var open = connection, open.phase == .live, force || now >= open.heard.lastAt.addingTimeInterval(settings.probeAfter) else { return }
        open.phase = .probing(deadline: now.addingTimeInterval(settings.probeDeadline + Self.transferAllowance(bytes: unansweredBytes)))
        connection = open
        let probe = open.dialect.rules.probeFrame(&self, now: now)
        write(probe, on: open.epoch, into: &actions)
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
