public import TetherSchema

/// Why a connection attempt or an open connection ended.
public struct ConnectionProblem: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        /// The gateway could not be reached, or the connection dropped.
        case unreachable
        /// The gateway answered HTTP 401 or 403: the token was rejected.
        case credentialRejected
        /// The token could not be read here; the gateway was not asked.
        case credentialUnavailable
        /// The TLS handshake failed (an untrusted or mismatched certificate).
        case tls
        /// OpenClaw: the gateway waits for a person to approve this device.
        case pairingRequired
        /// The gateway refused for a reason only a person can change.
        case refused(ConnectionFailure)
        /// The gateway is starting and asks to be tried again after this long.
        case unavailable(retryAfter: Duration)
        /// OpenClaw: the gateway said it restarts, and about how long that takes.
        case restarting(expectedIn: Duration?)
    }

    public var kind: Kind
    /// In words, for the status line.
    public var detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }
}

/// The connection manager's state machine: an event in, the new state and the actions for
/// its owner out. It reads no clock and does no I/O; its owner runs the timers, the
/// attempts and the connection, and reports back with events.
public struct ConnectionStateMachine: Sendable {
    /// Where the connection stands.
    public enum State: Equatable, Sendable {
        /// Not started, or stopped.
        case disconnected
        /// Trying to connect for the first time (since start, resume or a manual reconnect).
        case connecting(attempt: Int, inFlight: Bool)
        case connected
        /// Trying to connect again after losing a connection.
        case reconnecting(attempt: Int, inFlight: Bool)
        /// Closed on purpose until a resume: "Disconnected (app suspended)". Of the reasons
        /// given, the strongest is kept (a command over sleep over idle): it decides what may
        /// resume the connection.
        case suspended(SuspendReason)
        /// No usable network path; no attempts are spent until one returns.
        case waitingForNetwork
        /// Given up; only a manual reconnect, a network change, a resume or (for a rejected
        /// credential) a changed credential starts again.
        case failed(ConnectionFailure)
    }

    /// What happened.
    public enum Event: Equatable, Sendable {
        case start
        case connectionSucceeded
        case connectionFailed(ConnectionProblem)
        case connectionLost(ConnectionProblem)
        case retryTimerFired
        case networkLost
        /// A usable path appeared, or the primary interface changed (`interfaceChanged`).
        case networkAvailable(interfaceChanged: Bool)
        /// Suspend, for a reason: a command, the machine going to sleep, no front end left.
        case suspend(SuspendReason)
        /// What would resume a suspended connection: a resume command (`command`) resumes
        /// whatever suspended it; the machine waking (`sleep`) and a front end arriving (`idle`)
        /// resume only what they suspended.
        case resume(SuspendReason)
        case manualReconnect
        case credentialChanged
        /// In `failed` (unreachable or retries exhausted), the slow knock found the
        /// gateway's port taking connections again.
        case gatewayAnswered
        case stop
    }

    /// What the owner must do, in order.
    public enum Action: Equatable, Sendable {
        /// Start connection attempt number `attempt` now.
        case connect(attempt: Int)
        /// Fire `retryTimerFired` after `delay`.
        case scheduleRetry(after: Duration, attempt: Int)
        case cancelRetry
        /// Abandon the attempt in flight.
        case cancelAttempt
        /// Close the open connection: gracefully within `deadline`, or at once when nil.
        case closeConnection(deadline: Duration?)
    }

    /// The outcome of one event.
    public struct Transition: Equatable, Sendable {
        /// False when the event is not valid in the state it arrived in; nothing changed.
        public var accepted: Bool
        public var actions: [Action]

        static let refused = Transition(accepted: false, actions: [])
        static func to(_ actions: Action...) -> Transition { Transition(accepted: true, actions: actions) }
    }

    public private(set) var state: State = .disconnected
    /// Whether a usable network path exists, as last reported.
    public private(set) var networkAvailable = true
    /// Counts the connections established, from 1; frames carry it.
    public private(set) var epoch = 0
    /// Counts events refused as invalid in their state.
    public private(set) var refusedTransitions = 0
    /// The last problem, for the status line.
    public private(set) var lastProblem: ConnectionProblem?

    public let policy: ReconnectPolicy
    /// How long a graceful close (suspend, stop) may take.
    public let closeDeadline: Duration
    /// While a device waits for a person to approve it, how often the gateway is asked again.
    public let pairingCheckInterval: Duration
    /// In `failed(.pairingRequired)`: an attempt to see whether the device was approved is under way.
    private var pairingCheckInFlight = false
    private let random: @Sendable () -> Double

    /// - Parameter random: a number in -1...1 for each backoff's jitter; tests fix it.
    public init(
        policy: ReconnectPolicy, closeDeadline: Duration = .seconds(5), pairingCheckInterval: Duration = .seconds(5),
        random: @escaping @Sendable () -> Double = { Double.random(in: -1...1) }
    ) {
        self.policy = policy
        self.closeDeadline = closeDeadline
        self.pairingCheckInterval = pairingCheckInterval
        self.random = random
    }

    /// Feeds an event; returns the actions to perform.
    public mutating func handle(_ event: Event) -> Transition {
        let transition = transition(for: event)
        if !transition.accepted { refusedTransitions += 1 }
        return transition
    }

    // MARK: Transitions

    private mutating func transition(for event: Event) -> Transition {
        switch (state, event) {
        // Network reports are recorded in every state; what they change depends on it.
        case (_, .networkLost):
            networkAvailable = false
            return networkLost()
        case (_, .networkAvailable(let interfaceChanged)):
            let wasAvailable = networkAvailable
            networkAvailable = true
            return networkAvailable(wasAvailable: wasAvailable, interfaceChanged: interfaceChanged)

        case (_, .stop):
            let actions = teardown(graceful: true)
            state = .disconnected
            return Transition(accepted: true, actions: actions)

        case (.disconnected, .start):
            return beginConnecting()

        case (.connecting(let attempt, true), .connectionSucceeded), (.reconnecting(let attempt, true), .connectionSucceeded):
            _ = attempt
            epoch += 1
            lastProblem = nil
            state = .connected
            return .to()

        // Waiting for a person to approve the device: ask again now and then.
        case (.failed(.pairingRequired), .retryTimerFired) where !pairingCheckInFlight:
            pairingCheckInFlight = true
            return .to(.connect(attempt: 1))
        case (.failed(.pairingRequired), .connectionSucceeded) where pairingCheckInFlight:
            pairingCheckInFlight = false
            epoch += 1
            lastProblem = nil
            state = .connected
            return .to()
        case (.failed(.pairingRequired), .connectionFailed(let problem)) where pairingCheckInFlight:
            pairingCheckInFlight = false
            return attemptFailed(problem, attempt: 1, reconnecting: epoch > 0)

        case (.connecting(let attempt, true), .connectionFailed(let problem)):
            return attemptFailed(problem, attempt: attempt, reconnecting: false)
        case (.reconnecting(let attempt, true), .connectionFailed(let problem)):
            return attemptFailed(problem, attempt: attempt, reconnecting: true)

        case (.connected, .connectionLost(let problem)):
            lastProblem = problem
            guard networkAvailable else {
                state = .waitingForNetwork
                return .to()
            }
            if case .restarting(let expected?) = problem.kind {
                // Tried once the gateway said it would be back (a minute at most), not before.
                state = .reconnecting(attempt: 1, inFlight: false)
                return .to(.scheduleRetry(after: min(max(expected, .milliseconds(100)), .seconds(60)), attempt: 1))
            }
            return scheduleRetry(attempt: 1, reconnecting: true)

        case (.connecting(let attempt, false), .retryTimerFired):
            state = .connecting(attempt: attempt, inFlight: true)
            return .to(.connect(attempt: attempt))
        case (.reconnecting(let attempt, false), .retryTimerFired):
            state = .reconnecting(attempt: attempt, inFlight: true)
            return .to(.connect(attempt: attempt))

        case (.suspended(let current), .suspend(let reason)):
            guard reason != current else { return .refused }
            if reason.strength > current.strength { state = .suspended(reason) }
            return .to()
        case (_, .suspend(let reason)):
            let actions = teardown(graceful: true)
            state = .suspended(reason)
            return Transition(accepted: true, actions: actions)

        case (.suspended(let current), .resume(let cause)) where cause == .command || cause == current:
            return beginConnecting()

        case (.suspended, .manualReconnect):
            return .refused
        case (_, .manualReconnect):
            let actions = teardown(graceful: false)
            state = firstAttempt
            return Transition(accepted: true, actions: actions + [.connect(attempt: 1)])

        case (.failed(.unreachable), .gatewayAnswered), (.failed(.retriesExhausted), .gatewayAnswered):
            state = firstAttempt
            return .to(.connect(attempt: 1))

        case (.failed(.credentialRejected), .credentialChanged), (.failed(.credentialUnavailable), .credentialChanged):
            state = firstAttempt
            return .to(.connect(attempt: 1))
        case (_, .credentialChanged):
            // The next attempt reads the new credential; nothing to do now.
            return .to()

        default:
            return .refused
        }
    }

    /// Attempt 1 in flight: reconnecting once a connection was ever made, else connecting.
    private var firstAttempt: State {
        epoch > 0 ? .reconnecting(attempt: 1, inFlight: true) : .connecting(attempt: 1, inFlight: true)
    }

    /// Starts attempt 1 now, or waits for the network.
    private mutating func beginConnecting() -> Transition {
        guard networkAvailable else {
            state = .waitingForNetwork
            return .to()
        }
        state = firstAttempt
        return .to(.connect(attempt: 1))
    }

    private mutating func attemptFailed(_ problem: ConnectionProblem, attempt: Int, reconnecting: Bool) -> Transition {
        lastProblem = problem
        switch problem.kind {
        case .credentialRejected:
            // Retrying cannot help until the credential changes.
            state = .failed(.credentialRejected)
            return .to()
        case .credentialUnavailable:
            state = .failed(.credentialUnavailable)
            return .to()
        case .tls:
            state = .failed(.tls)
            return .to()
        case .refused(let failure):
            state = .failed(failure)
            return .to()
        case .pairingRequired:
            // Approval is a person's step on the gateway; the device connects once it is done.
            state = .failed(.pairingRequired)
            return .to(.scheduleRetry(after: pairingCheckInterval, attempt: 1))
        case .unavailable(let retryAfter):
            guard attempt < policy.maxAttempts else {
                state = .failed(reconnecting ? .retriesExhausted : .unreachable)
                return .to()
            }
            state = reconnecting ? .reconnecting(attempt: attempt + 1, inFlight: false) : .connecting(attempt: attempt + 1, inFlight: false)
            return .to(.scheduleRetry(after: max(retryAfter, .milliseconds(100)), attempt: attempt + 1))
        case .unreachable, .restarting:
            guard networkAvailable else {
                state = .waitingForNetwork
                return .to()
            }
            guard attempt < policy.maxAttempts else {
                state = .failed(reconnecting ? .retriesExhausted : .unreachable)
                return .to()
            }
            return scheduleRetry(attempt: attempt + 1, reconnecting: reconnecting)
        }
    }

    private mutating func scheduleRetry(attempt: Int, reconnecting: Bool) -> Transition {
        state = reconnecting ? .reconnecting(attempt: attempt, inFlight: false) : .connecting(attempt: attempt, inFlight: false)
        // A first connection tries at once, so its attempt n is retry n - 1; after a lost
        // connection every attempt is a retry. Retry r waits the backoff's step r.
        let retry = reconnecting ? attempt : attempt - 1
        let delay = policy.backoff.delay(forAttempt: max(1, retry), random: random())
        return .to(.scheduleRetry(after: delay, attempt: attempt))
    }

    private mutating func networkLost() -> Transition {
        switch state {
        case .connected:
            state = .waitingForNetwork
            return .to(.closeConnection(deadline: nil))
        case .connecting(_, let inFlight), .reconnecting(_, let inFlight):
            state = .waitingForNetwork
            return .to(inFlight ? .cancelAttempt : .cancelRetry)
        case .disconnected, .suspended, .waitingForNetwork, .failed:
            return .to()
        }
    }

    private mutating func networkAvailable(wasAvailable: Bool, interfaceChanged: Bool) -> Transition {
        let changed = !wasAvailable || interfaceChanged
        switch state {
        case .waitingForNetwork:
            state = firstAttempt
            return .to(.connect(attempt: 1))
        case .connecting(let attempt, false) where changed, .reconnecting(let attempt, false) where changed:
            // A new path: try now rather than wait out the backoff.
            state = state.isReconnecting ? .reconnecting(attempt: attempt, inFlight: true) : .connecting(attempt: attempt, inFlight: true)
            return .to(.cancelRetry, .connect(attempt: attempt))
        case .connected where interfaceChanged:
            // The connection's local address may be gone with the old interface.
            state = .reconnecting(attempt: 1, inFlight: true)
            return .to(.closeConnection(deadline: nil), .connect(attempt: 1))
        case .failed(let failure) where changed && failure != .credentialRejected && failure != .credentialUnavailable:
            let actions = teardown(graceful: false)
            state = firstAttempt
            return Transition(accepted: true, actions: actions + [.connect(attempt: 1)])
        default:
            return .to()
        }
    }

    /// The actions that end whatever is under way.
    private mutating func teardown(graceful: Bool) -> [Action] {
        defer { pairingCheckInFlight = false }
        return switch state {
        case .connected: [.closeConnection(deadline: graceful ? closeDeadline : nil)]
        case .connecting(_, true), .reconnecting(_, true): [.cancelAttempt]
        case .connecting(_, false), .reconnecting(_, false): [.cancelRetry]
        case .failed(.pairingRequired): [pairingCheckInFlight ? .cancelAttempt : .cancelRetry]
        case .disconnected, .suspended, .waitingForNetwork, .failed: []
        }
    }
}

extension ConnectionStateMachine.State {
    /// Failed for want of a gateway that answers: a slow knock at its port may bring it back
    /// (a rejected credential or certificate waits for a person instead).
    public var awaitsGateway: Bool {
        self == .failed(.unreachable) || self == .failed(.retriesExhausted)
    }

    var isReconnecting: Bool {
        if case .reconnecting = self { return true }
        return false
    }

    /// The phase published on the bus.
    public var phase: ConnectionPhase {
        switch self {
        case .disconnected: .disconnected
        case .connecting: .connecting
        case .connected: .connected
        case .reconnecting: .reconnecting
        case .suspended: .suspended
        case .waitingForNetwork: .waitingForNetwork
        case .failed: .failed
        }
    }

    /// The attempt number while connecting or reconnecting.
    public var attempt: Int {
        switch self {
        case .connecting(let attempt, _), .reconnecting(let attempt, _): attempt
        default: 0
        }
    }

    public var failure: ConnectionFailure? {
        if case .failed(let failure) = self { return failure }
        return nil
    }

    /// Why the connection is suspended, while it is.
    public var suspendReason: SuspendReason? {
        if case .suspended(let reason) = self { return reason }
        return nil
    }
}

extension SuspendReason {
    /// Which reason wins when two apply: the stronger needs more to resume.
    var strength: Int {
        switch self {
        case .idle: 0
        case .sleep: 1
        case .command: 2
        }
    }
}

/// How persistently connd reconnects.
public struct ReconnectPolicy: Sendable, Hashable {
    public var backoff: Backoff
    /// Attempts before giving up: the state becomes failed.
    public var maxAttempts: Int
    /// How often the gateway is pinged; a pong must arrive before the next ping is due.
    public var heartbeat: Duration

    public init(backoff: Backoff, maxAttempts: Int, heartbeat: Duration) {
        self.backoff = backoff
        self.maxAttempts = max(1, maxAttempts)
        self.heartbeat = heartbeat
    }

    /// 1 s base, 30 s cap, 5 attempts, 0.2 jitter, 30 s heartbeat.
    public static let `default` = ReconnectPolicy(
        backoff: Backoff(base: .seconds(1), cap: .seconds(30), jitter: 0.2), maxAttempts: 5, heartbeat: .seconds(30))
    /// 0.5 s base, 10 s cap, 10 attempts, 0.1 jitter, 15 s heartbeat.
    public static let aggressive = ReconnectPolicy(
        backoff: Backoff(base: .milliseconds(500), cap: .seconds(10), jitter: 0.1), maxAttempts: 10, heartbeat: .seconds(15))

    /// A preset by name: `default` or `aggressive`.
    public static func preset(named name: String) -> ReconnectPolicy? {
        switch name {
        case "default": .default
        case "aggressive": .aggressive
        default: nil
        }
    }
}
