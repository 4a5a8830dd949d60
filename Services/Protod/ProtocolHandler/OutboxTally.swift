import TetherSchema

/// What `outbox.summary` says beside the messages pending: those that left without delivery
/// since protod started, by final status, and the latest of them.
struct OutboxTally: Sendable {
    private var undelivered: [String: Int] = [:]
    private var lastUndelivered: DeliveryUpdate?
    private var lastRetained: OutboxSummary?

    /// Counts a message's final status (a delivered one is not counted).
    mutating func count(_ update: DeliveryUpdate) {
        guard update.status != .delivered else { return }
        undelivered[update.status.rawValue, default: 0] += 1
        lastUndelivered = update
    }

    /// The summary with `pending` messages and how `receipts` decided, when it differs from the one retained last.
    mutating func changedSummary(pending: Int, receipts: ReceiptCheck) -> OutboxSummary? {
        var summary = OutboxSummary(pending: pending, undelivered: undelivered.isEmpty ? nil : undelivered, lastUndelivered: lastUndelivered)
        if receipts.support != .unknown || receipts.decidedByReceipt + receipts.decidedByText > 0 {
            summary.confirmations = OutboxSummary.Confirmations(
                receipts: receipts.support == .offered, byReceipt: receipts.decidedByReceipt, byText: receipts.decidedByText)
        }
        guard summary != lastRetained else { return nil }
        lastRetained = summary
        return summary
    }
}
