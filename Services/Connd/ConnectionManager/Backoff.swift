/// Exponential backoff with jitter and a cap.
public struct Backoff: Sendable, Hashable {
    /// The first delay.
    public var base: Duration
    /// The largest delay.
    public var cap: Duration
    /// How far each delay may stray from its nominal value, as a fraction (0.2 is ±20%).
    public var jitter: Double

    public init(base: Duration = .seconds(1), cap: Duration = .seconds(30), jitter: Double = 0.2) {
        self.base = base
        self.cap = cap
        self.jitter = min(max(jitter, 0), 1)
    }

    /// The delay before attempt `attempt` (1 for the first retry), nominal value times a random factor.
    public func delay(forAttempt attempt: Int, random: Double = Double.random(in: -1...1)) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let nominal = min(base * (1 << exponent), cap)
        let factor = 1 + jitter * min(max(random, -1), 1)
        return nominal * factor
    }
}
