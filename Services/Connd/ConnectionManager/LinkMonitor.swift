/// Whether an open connection's gateway is still there, decided from the time: when to ping,
/// and when what was heard, or not, means the connection is dead. Time is passed in; the
/// service pings and reads the connection as asked, and reports what it found.
struct LinkMonitor: Equatable, Sendable {
    typealias Instant = ContinuousClock.Instant

    /// How the gateway shows it is alive.
    enum Rule: Equatable, Sendable {
        /// A seed gateway answers pings: a ping still without its pong when the next is due,
        /// and nothing else heard since it was sent, means the gateway stopped answering.
        case pongs
        /// An OpenClaw gateway ticks every `intervalMilliseconds`: no frame for two intervals
        /// means the connection is dead. Pings keep the path warm; their pongs count as frames.
        case ticks(intervalMilliseconds: Int)
    }

    enum Action: Equatable, Sendable {
        /// Send a ping, and report whether the gateway answered the one before it, by its pong
        /// or by any frame since (``pinged(previousAnswered:)``).
        case ping
        /// Report when the gateway was last heard from, any frame counting (``lastHeard(at:now:)``).
        case readLastHeard
        /// The gateway is gone: the connection is dead, for the reason in words.
        case dead(String)
    }

    /// How often the gateway is pinged.
    let heartbeat: Duration
    let rule: Rule
    private var nextPing: Instant
    /// When silence is next looked at (ticks only); nil while a reading is awaited.
    private var nextSilenceCheck: Instant?
    private var isDead = false

    init(heartbeat: Duration, rule: Rule, openedAt now: Instant) {
        self.heartbeat = heartbeat
        self.rule = rule
        nextPing = now + heartbeat
        if case .ticks = rule { nextSilenceCheck = now + silence }
    }

    /// How long no frame may come (ticks).
    private var silence: Duration {
        guard case .ticks(let interval) = rule else { return heartbeat }
        return .milliseconds(2 * interval)
    }

    /// When ``timePassed(now:)`` is next due; nil once the connection is found dead.
    var nextDeadline: Instant? {
        guard !isDead else { return nil }
        return [nextPing, nextSilenceCheck].compactMap(\.self).min()
    }

    mutating func timePassed(now: Instant) -> [Action] {
        guard !isDead else { return [] }
        var actions: [Action] = []
        if now >= nextPing {
            nextPing = now + heartbeat
            actions.append(.ping)
        }
        if let check = nextSilenceCheck, now >= check {
            nextSilenceCheck = nil
            actions.append(.readLastHeard)
        }
        return actions
    }

    /// A ping was sent, or not: the one before it was still without its pong.
    mutating func pinged(previousAnswered: Bool) -> [Action] {
        guard !isDead, rule == .pongs, !previousAnswered else { return [] }
        isDead = true
        return [.dead("the gateway went silent (no pong within \(heartbeat)): the connection is dead")]
    }

    /// The gateway was last heard from `at`.
    mutating func lastHeard(at heard: Instant, now: Instant) -> [Action] {
        guard !isDead, case .ticks(let interval) = rule else { return [] }
        guard now - heard > silence else {
            nextSilenceCheck = heard + silence
            return []
        }
        isDead = true
        return [.dead("the gateway went silent (no frame for \(2 * interval / 1000) s (two tick intervals)): the connection is dead")]
    }
}
