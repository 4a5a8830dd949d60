import Foundation
import TetherSchema
import TetherWire

extension DeliveryStateMachine {
    /// An outbox found damaged: the damage is a failed outcome (what it took beyond the
    /// messages recovered is not known), and each message lost with it is said lost in its own
    /// words, counted among those that left without delivery and recorded as a failure too, so
    /// that `health` is not healthy while the transcript names messages that will never be sent.
    /// Deliveries that succeed afterwards make it healthy again.
    mutating func outboxWasDamaged(lost updates: [DeliveryUpdate], now: Date, into actions: inout [Action]) {
        recordOutcome(success: false, now: now, into: &actions)
        for update in updates where update.status == .lost {
            pending.removeAll { $0.id == update.id.value }
            actions.append(.publishDelivery(update))
            tally.count(update)
            recordOutcome(success: false, now: now, into: &actions)
        }
    }
}
