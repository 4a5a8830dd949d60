import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

extension DeliveryStateMachine {
    // MARK: A gateway that is not taking messages (today's OpenClaw)

    /// `chat.send` answered `UNAVAILABLE`. Retryable (a restart, a suspension, a transcript
    /// being rebuilt): the gateway did not take the message; it waits in the outbox for the
    /// pause the gateway asked, and is written again under its key. Not retryable: the
    /// gateway holds an earlier copy it stopped retrying so as not to run it twice; it is
    /// never written again on this connection, and the next lookup says what became of it.
    mutating func notTaken(_ index: Int, _ error: GatewayErrorShape, now: Date, into actions: inout [Action]) {
        let message = pending[index]
        let attempts = message.delivery.attempts ?? Attempts(firstAt: now)
        guard GatewayAvailability.isRetryable(error) else {
            pending[index].delivery = .held(message.delivery.hold ?? .accepted(at: now), attempts)
            let detail =
                "the gateway accepted it before and stopped retrying it by itself, so as not to run it twice (\(error.message)); it is not sent again, and the gateway's history says whether it ran"
            actions.append(.publishDelivery(DeliveryUpdate(id: message.messageID, status: .accepted, detail: detail)))
            actions.append(.diagnose(DiagnosticEvent(kind: .deliveryFailed, messageID: message.messageID, willRetry: false, detail: detail)))
            return
        }
        let pause = availability.refused(error, now: now)
        pending[index].delivery = .unconfirmed(hold: nil, attempts)
        runs[message.id] = nil
        let detail = "not taken: \(GatewayAvailability.words(error)); it waits in Tether's outbox and is sent again in \(Self.words(pause))"
        actions.append(.publishDelivery(DeliveryUpdate(id: message.messageID, status: .queued, detail: detail)))
        actions.append(.diagnose(DiagnosticEvent(kind: .deliveryFailed, messageID: message.messageID, willRetry: true, detail: detail)))
        settleBotState(now: now, into: &actions)
    }
}
