import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

extension DeliveryStateMachine {
    // MARK: Receipts (today's OpenClaw)

    /// The keys of the messages in the session chatted in whose fate the gateway must say:
    /// written before, and not known kept (unconfirmed, or answered for and not shown stored);
    /// nil when there are none, or the gateway has not shown it answers receipts.
    /// With `after`: only those after that message in the outbox (the next batch).
    func keysInDoubt(_ link: OpenClawLink, after: String? = nil) -> [String]? {
        let start = after.flatMap { key in pending.firstIndex { $0.id == key }.map { $0 + 1 } } ?? 0
        return receipts.keysToAsk(
            pending[min(start, pending.count)...].filter { message in
                message.everWritten && sessionOf(message) == link.sessionKey && (message.delivery.isDueForWrite || message.delivery.hold != nil)
            }.map(\.id))
    }

    /// Settles what the gateway's receipts say of the messages asked; the ids decided. Nothing
    /// is written here: a message the gateway does not have is left unconfirmed, to be written
    /// again with its key once the lookup is done.
    mutating func applyReceipts(_ reading: ReceiptCheck.Reading, now: Date, into actions: inout [Action]) -> Set<String> {
        if !reading.strays.isEmpty {
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .historyChecked,
                        detail:
                            "the gateway answered receipts for \(reading.strays.count) key(s) Tether did not ask (\(reading.strays.prefix(3).joined(separator: ", "))): ignored"
                    )))
        }
        var decided: Set<String> = []
        var tally: [String: Int] = [:]
        for (key, verdict) in reading.verdicts.sorted(by: { $0.key < $1.key }) {
            guard let index = pending.firstIndex(where: { $0.id == key }), let attempts = pending[index].delivery.attempts else { continue }
            decided.insert(key)
            switch verdict {
            case .consumed:
                tally["delivered", default: 0] += 1
                acknowledged(MessageAck(messageID: MessageID(key), status: .received, serverTimestamp: now), now: now, into: &actions)
            case .running:
                tally["running", default: 0] += 1
                // Held: never written again while the gateway runs it.
                pending[index].delivery = .held(pending[index].delivery.hold ?? .accepted(at: now), attempts)
                awaitRun(of: index, now: now, into: &actions)
            case .waiting(let queued):
                tally["waiting", default: 0] += 1
                if queued {
                    guard pending[index].delivery.hold?.isInGatewayQueue != true else { continue }
                    pending[index].delivery = .held(.inGatewayQueue(since: now), attempts)
                    actions.append(.persistInGatewayQueue(id: key, at: now))
                    actions.append(
                        .publishDelivery(
                            DeliveryUpdate(
                                id: pending[index].messageID, status: .accepted,
                                detail:
                                    "accepted, waiting in the gateway's queue behind the reply in progress: the gateway keeps it (its receipt says pending) and runs it after that one"
                            )))
                } else {
                    let said = pending[index].delivery.hold != nil
                    pending[index].delivery = .held(pending[index].delivery.hold ?? .accepted(at: now), attempts)
                    guard !said else { continue }
                    actions.append(
                        .publishDelivery(
                            DeliveryUpdate(
                                id: pending[index].messageID, status: .accepted,
                                detail: "accepted: the gateway keeps it (its receipt says pending) and runs it when its turn comes")))
                }
            case .cancelled:
                tally["cancelled", default: 0] += 1
                settle([key], as: .cancelled, into: &actions) { _ in
                    "cancelled at the gateway: it waited behind a run that was stopped, and the gateway will not run it"
                }
            case .interrupted:
                tally["written again", default: 0] += 1
                pending[index].delivery = .unconfirmed(hold: nil, attempts)
                actions.append(
                    .diagnose(
                        DiagnosticEvent(
                            kind: .historyChecked, messageID: MessageID(key),
                            detail:
                                "the gateway restarted while this message waited for its turn, and does not run it by itself: written again with its key")))
            case .absent:
                tally["written again", default: 0] += 1
                pending[index].delivery = .unconfirmed(hold: nil, attempts)
            }
        }
        receipts.count(byReceipt: decided.count, byText: 0)
        if !decided.isEmpty {
            let words = tally.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .historyChecked, count: tally["delivered"] ?? 0,
                        detail: "the gateway's receipts for \(decided.count) message(s): \(words); no text was compared")))
        }
        return decided
    }
}
