import Foundation
public import TetherSchema

/// The inline banner at the top of a front end, in the words `conn.state` gives: what the connection
/// is doing when it is not simply connected, "Reconnected" for a moment after it comes back,
/// nothing otherwise. Never a modal: it can be dismissed, and comes back only when its
/// words change.
public struct Banner: Sendable, Equatable {
    /// How a banner looks.
    public enum Tone: Sendable, Equatable {
        /// Working on it: connecting, reconnecting, suspended, waiting for the network.
        case waiting
        /// Needs the user: the connection failed.
        case problem
        /// Good news, shown briefly.
        case good
    }

    public struct Shown: Sendable, Equatable {
        public var words: String
        public var tone: Tone
    }

    /// How long "Reconnected" stays.
    public static let reconnectedFor: Duration = .seconds(2)

    private var phase: ConnectionPhase?
    private var words = ""
    private var wasConnected = false
    private var reconnectedUntil: ContinuousClock.Instant?
    private var dismissedWords: String?

    public init() {}

    /// Follows a new connection status.
    public mutating func update(_ status: ConnectionStatus, at now: ContinuousClock.Instant) {
        let previous = phase
        phase = status.phase
        words = status.words
        if status.phase == .connected {
            // Back after a break: say so briefly. The first connection needs no news.
            if wasConnected || status.epoch > 1, previous != nil, previous != .connected { reconnectedUntil = now + Self.reconnectedFor }
            wasConnected = true
        } else {
            reconnectedUntil = nil
        }
    }

    /// Hides the banner until its words change.
    public mutating func dismiss(at now: ContinuousClock.Instant) {
        dismissedWords = shown(at: now)?.words
    }

    /// What the banner shows now; nil for no banner.
    public func shown(at now: ContinuousClock.Instant) -> Shown? {
        let banner: Shown? =
            switch phase {
            case nil: Shown(words: "Connecting…", tone: .waiting)
            case .connected: reconnectedUntil.map { now < $0 ? Shown(words: "Reconnected", tone: .good) : nil } ?? nil
            case .failed: Shown(words: words, tone: .problem)
            case .disconnected, .connecting, .reconnecting, .suspended, .waitingForNetwork: Shown(words: words, tone: .waiting)
            }
        guard let banner, banner.words != dismissedWords else { return nil }
        return banner
    }

    /// When what the banner shows changes by itself ("Reconnected" goes); nil when it shows
    /// what it will show until the next status.
    public func nextChange(after now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard phase == .connected, let until = reconnectedUntil, now < until else { return nil }
        return until
    }

    /// Whether the connection failed and waits for the user.
    public var isFailed: Bool { phase == .failed }
}
