import Foundation
import OpenClawWire

/// Whether the gateway takes messages now, as its `UNAVAILABLE` answers say: today's gateway
/// refuses `chat.send` while it restarts, suspends or closes (`details.reason`), or while a
/// session's transcript is rebuilt, and says when to try again (`retryAfterMs`). Such a
/// message was not taken: it stays in the outbox and is written again, under its key, once
/// the pause is over; a gateway that keeps refusing is asked less and less often, never in a
/// tight loop.
///
/// A value: the delivery machine hands it each refusal and each acceptance; it says until
/// when nothing is written, and in what words.
struct GatewayAvailability: Sendable, Equatable {
    /// The longest pause between two tries, however often the gateway refused.
    static let longestPause: TimeInterval = 30
    /// The pause when the gateway names none.
    static let defaultPause: TimeInterval = 1

    /// Nothing is written before this.
    private(set) var pausedUntil: Date?
    /// Refusals in a row since the gateway last took a message.
    private(set) var refusals = 0

    /// What the gateway's reason means, in words.
    static func words(_ error: GatewayErrorShape) -> String {
        let reason = error.details?["reason"]?.stringValue
        let what =
            switch reason {
            case "gateway-restarting": "the gateway is restarting"
            case "gateway-suspending": "the gateway is suspending"
            case "gateway-closing": "the gateway is closing"
            default: "the gateway is not taking messages now"
            }
        return "\(what) (\(error.message))"
    }

    /// A refusal that asks to be tried again: the pause it asks for, doubled for each refusal
    /// in a row after the first, at most ``longestPause``. Returns the pause.
    @discardableResult
    mutating func refused(_ error: GatewayErrorShape, now: Date) -> TimeInterval {
        refusals += 1
        let asked = error.retryAfterMs.map { max(Double($0) / 1000, 0.1) } ?? Self.defaultPause
        let pause = min(asked * pow(2, Double(min(refusals - 1, 10))), max(asked, Self.longestPause))
        pausedUntil = max(pausedUntil ?? now, now.addingTimeInterval(pause))
        return pause
    }

    /// The gateway took a message, or a new connection began: writing goes on at once.
    mutating func available() {
        pausedUntil = nil
        refusals = 0
    }

    /// Time passed: a pause that is over is forgotten (the refusals in a row are not).
    mutating func passTime(now: Date) {
        if let until = pausedUntil, now >= until { pausedUntil = nil }
    }

    /// Whether messages may be written now.
    func allowsWrites(now: Date) -> Bool { pausedUntil.map { now >= $0 } ?? true }

    /// Whether an `UNAVAILABLE` refusal of `chat.send` means the message was not taken and may
    /// be written again: the gateway says it is retryable (or says nothing of it, as a
    /// restart's does not always), and it is not the refusal of a retry the gateway stopped
    /// to avoid running the message twice.
    static func isRetryable(_ error: GatewayErrorShape) -> Bool {
        // The stopped retry is told by its words too, in case a gateway leaves `retryable` out of it
        // (`chat-restart-recovery.ts`: "automatic retry stopped to avoid duplicate execution").
        error.code == "UNAVAILABLE" && error.retryable != false && !error.message.contains(stoppedRetryWords)
    }

    /// The words of today's gateway for a retry it stopped so as not to run a message twice.
    static let stoppedRetryWords = "automatic retry stopped to avoid duplicate execution"
}
