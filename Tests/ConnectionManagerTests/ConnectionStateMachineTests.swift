import ConnectionManager
import Testing
import TetherSchema

/// Every state of the connection machine against every event.
@Suite struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine
    typealias State = Machine.State
    typealias Event = Machine.Event
    typealias Action = Machine.Action

    static let policy = ReconnectPolicy(backoff: Backoff(base: .seconds(1), cap: .seconds(30), jitter: 0.2), maxAttempts: 3, heartbeat: .seconds(30))
    static let unreachable = ConnectionProblem(.unreachable, "refused")
    static let rejected = ConnectionProblem(.credentialRejected, "401")
    static let tls = ConnectionProblem(.tls, "untrusted")
    static let lost = ConnectionProblem(.unreachable, "closed")

    /// A machine driven into a named state; jitter fixed at its midpoint.
    static func machine(in name: String) -> Machine {
        var machine = Machine(policy: policy, closeDeadline: .seconds(5), random: { 0 })
        let paths: [String: [Event]] = [
            "disconnected": [],
            "connecting in flight": [.start],
            "connecting, waiting": [.start, .connectionFailed(unreachable)],
            "connected": [.start, .connectionSucceeded],
            "reconnecting, waiting": [.start, .connectionSucceeded, .connectionLost(lost)],
            "reconnecting in flight": [.start, .connectionSucceeded, .connectionLost(lost), .retryTimerFired],
            "suspended: command": [.start, .connectionSucceeded, .suspend(.command)],
            "suspended: sleep": [.start, .connectionSucceeded, .suspend(.sleep)],
            "suspended: idle": [.start, .connectionSucceeded, .suspend(.idle)],
            "waiting for network": [.start, .networkLost],
            "failed: credential": [.start, .connectionFailed(rejected)],
            "failed: tls": [.start, .connectionFailed(tls)],
            "failed: unreachable": [
                .start, .connectionFailed(unreachable), .retryTimerFired, .connectionFailed(unreachable), .retryTimerFired,
                .connectionFailed(unreachable),
            ],
            "failed: retries exhausted": [
                .start, .connectionSucceeded, .connectionLost(lost), .retryTimerFired, .connectionFailed(unreachable), .retryTimerFired,
                .connectionFailed(unreachable), .retryTimerFired, .connectionFailed(unreachable),
            ],
        ]
        for event in paths[name]! {
            #expect(machine.handle(event).accepted, "the path to \(name) was refused at \(event)")
        }
        return machine
    }

    static let events: [String: Event] = [
        "start": .start,
        "succeeded": .connectionSucceeded,
        "failed: unreachable": .connectionFailed(unreachable),
        "failed: credential": .connectionFailed(rejected),
        "failed: tls": .connectionFailed(tls),
        "lost": .connectionLost(lost),
        "retry timer": .retryTimerFired,
        "network lost": .networkLost,
        "network available": .networkAvailable(interfaceChanged: false),
        "interface changed": .networkAvailable(interfaceChanged: true),
        "suspend: command": .suspend(.command),
        "suspend: sleep": .suspend(.sleep),
        "suspend: idle": .suspend(.idle),
        "resume: command": .resume(.command),
        "resume: woke": .resume(.sleep),
        "resume: front end": .resume(.idle),
        "manual reconnect": .manualReconnect,
        "credential changed": .credentialChanged,
        "gateway answered": .gatewayAnswered,
        "stop": .stop,
    ]

    /// The expected outcome: the next state and the actions; nil state means "refused".
    struct Outcome {
        var state: State?
        var actions: [Action] = []
        static let refused = Outcome(state: nil)
        static func stays(_ state: State) -> Outcome { Outcome(state: state) }
    }

    // Left as written by the formatter: the table reads as one state a block.
    // swift-format-ignore
    static let expectations: [String: (State, [String: Outcome])] = [
        "disconnected": (.disconnected, [
            "start": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "network lost": .stays(.disconnected), "network available": .stays(.disconnected), "interface changed": .stays(.disconnected),
            "suspend: command": Outcome(state: .suspended(.command)),
            "suspend: sleep": Outcome(state: .suspended(.sleep)),
            "suspend: idle": Outcome(state: .suspended(.idle)),
            "manual reconnect": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": .stays(.disconnected),
            "stop": .stays(.disconnected),
        ]),
        "connecting in flight": (.connecting(attempt: 1, inFlight: true), [
            "succeeded": Outcome(state: .connected),
            "failed: unreachable": Outcome(state: .connecting(attempt: 2, inFlight: false), actions: [.scheduleRetry(after: .seconds(1), attempt: 2)]),
            "failed: credential": Outcome(state: .failed(.credentialRejected)),
            "failed: tls": Outcome(state: .failed(.tls)),
            "network lost": Outcome(state: .waitingForNetwork, actions: [.cancelAttempt]),
            "network available": .stays(.connecting(attempt: 1, inFlight: true)),
            "interface changed": .stays(.connecting(attempt: 1, inFlight: true)),
            "suspend: command": Outcome(state: .suspended(.command), actions: [.cancelAttempt]),
            "suspend: sleep": Outcome(state: .suspended(.sleep), actions: [.cancelAttempt]),
            "suspend: idle": Outcome(state: .suspended(.idle), actions: [.cancelAttempt]),
            "manual reconnect": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.cancelAttempt, .connect(attempt: 1)]),
            "credential changed": .stays(.connecting(attempt: 1, inFlight: true)),
            "stop": Outcome(state: .disconnected, actions: [.cancelAttempt]),
        ]),
        "connecting, waiting": (.connecting(attempt: 2, inFlight: false), [
            "retry timer": Outcome(state: .connecting(attempt: 2, inFlight: true), actions: [.connect(attempt: 2)]),
            "network lost": Outcome(state: .waitingForNetwork, actions: [.cancelRetry]),
            "network available": .stays(.connecting(attempt: 2, inFlight: false)),
            "interface changed": Outcome(state: .connecting(attempt: 2, inFlight: true), actions: [.cancelRetry, .connect(attempt: 2)]),
            "suspend: command": Outcome(state: .suspended(.command), actions: [.cancelRetry]),
            "suspend: sleep": Outcome(state: .suspended(.sleep), actions: [.cancelRetry]),
            "suspend: idle": Outcome(state: .suspended(.idle), actions: [.cancelRetry]),
            "manual reconnect": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.cancelRetry, .connect(attempt: 1)]),
            "credential changed": .stays(.connecting(attempt: 2, inFlight: false)),
            "stop": Outcome(state: .disconnected, actions: [.cancelRetry]),
        ]),
        "connected": (.connected, [
            "lost": Outcome(state: .reconnecting(attempt: 1, inFlight: false), actions: [.scheduleRetry(after: .seconds(1), attempt: 1)]),
            "network lost": Outcome(state: .waitingForNetwork, actions: [.closeConnection(deadline: nil)]),
            "network available": .stays(.connected),
            "interface changed": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.closeConnection(deadline: nil), .connect(attempt: 1)]),
            "suspend: command": Outcome(state: .suspended(.command), actions: [.closeConnection(deadline: .seconds(5))]),
            "suspend: sleep": Outcome(state: .suspended(.sleep), actions: [.closeConnection(deadline: .seconds(5))]),
            "suspend: idle": Outcome(state: .suspended(.idle), actions: [.closeConnection(deadline: .seconds(5))]),
            "manual reconnect": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.closeConnection(deadline: nil), .connect(attempt: 1)]),
            "credential changed": .stays(.connected),
            "stop": Outcome(state: .disconnected, actions: [.closeConnection(deadline: .seconds(5))]),
        ]),
        "reconnecting, waiting": (.reconnecting(attempt: 1, inFlight: false), [
            "retry timer": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "network lost": Outcome(state: .waitingForNetwork, actions: [.cancelRetry]),
            "network available": .stays(.reconnecting(attempt: 1, inFlight: false)),
            "interface changed": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.cancelRetry, .connect(attempt: 1)]),
            "suspend: command": Outcome(state: .suspended(.command), actions: [.cancelRetry]),
            "suspend: sleep": Outcome(state: .suspended(.sleep), actions: [.cancelRetry]),
            "suspend: idle": Outcome(state: .suspended(.idle), actions: [.cancelRetry]),
            "manual reconnect": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.cancelRetry, .connect(attempt: 1)]),
            "credential changed": .stays(.reconnecting(attempt: 1, inFlight: false)),
            "stop": Outcome(state: .disconnected, actions: [.cancelRetry]),
        ]),
        "reconnecting in flight": (.reconnecting(attempt: 1, inFlight: true), [
            "succeeded": Outcome(state: .connected),
            "failed: unreachable": Outcome(state: .reconnecting(attempt: 2, inFlight: false), actions: [.scheduleRetry(after: .seconds(2), attempt: 2)]),
            "failed: credential": Outcome(state: .failed(.credentialRejected)),
            "failed: tls": Outcome(state: .failed(.tls)),
            "network lost": Outcome(state: .waitingForNetwork, actions: [.cancelAttempt]),
            "network available": .stays(.reconnecting(attempt: 1, inFlight: true)),
            "interface changed": .stays(.reconnecting(attempt: 1, inFlight: true)),
            "suspend: command": Outcome(state: .suspended(.command), actions: [.cancelAttempt]),
            "suspend: sleep": Outcome(state: .suspended(.sleep), actions: [.cancelAttempt]),
            "suspend: idle": Outcome(state: .suspended(.idle), actions: [.cancelAttempt]),
            "manual reconnect": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.cancelAttempt, .connect(attempt: 1)]),
            "credential changed": .stays(.reconnecting(attempt: 1, inFlight: true)),
            "stop": Outcome(state: .disconnected, actions: [.cancelAttempt]),
        ]),
        "suspended: command": (.suspended(.command), [
            "network lost": .stays(.suspended(.command)), "network available": .stays(.suspended(.command)),
            "interface changed": .stays(.suspended(.command)),
            // A weaker reason while suspended by a command: taken, and the command's stays.
            "suspend: sleep": .stays(.suspended(.command)), "suspend: idle": .stays(.suspended(.command)),
            "resume: command": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": .stays(.suspended(.command)),
            "stop": Outcome(state: .disconnected),
        ]),
        "suspended: sleep": (.suspended(.sleep), [
            "network lost": .stays(.suspended(.sleep)), "network available": .stays(.suspended(.sleep)),
            "interface changed": .stays(.suspended(.sleep)),
            "suspend: command": .stays(.suspended(.command)), "suspend: idle": .stays(.suspended(.sleep)),
            "resume: command": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "resume: woke": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": .stays(.suspended(.sleep)),
            "stop": Outcome(state: .disconnected),
        ]),
        "suspended: idle": (.suspended(.idle), [
            "network lost": .stays(.suspended(.idle)), "network available": .stays(.suspended(.idle)),
            "interface changed": .stays(.suspended(.idle)),
            "suspend: command": .stays(.suspended(.command)), "suspend: sleep": .stays(.suspended(.sleep)),
            "resume: command": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "resume: front end": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": .stays(.suspended(.idle)),
            "stop": Outcome(state: .disconnected),
        ]),
        "waiting for network": (.waitingForNetwork, [
            "network lost": .stays(.waitingForNetwork),
            "network available": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "interface changed": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "suspend: command": Outcome(state: .suspended(.command)),
            "suspend: sleep": Outcome(state: .suspended(.sleep)),
            "suspend: idle": Outcome(state: .suspended(.idle)),
            "manual reconnect": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": .stays(.waitingForNetwork),
            "stop": Outcome(state: .disconnected),
        ]),
        "failed: credential": (.failed(.credentialRejected), [
            "network lost": .stays(.failed(.credentialRejected)),
            "network available": .stays(.failed(.credentialRejected)),
            "interface changed": .stays(.failed(.credentialRejected)),
            "suspend: command": Outcome(state: .suspended(.command)),
            "suspend: sleep": Outcome(state: .suspended(.sleep)),
            "suspend: idle": Outcome(state: .suspended(.idle)),
            "manual reconnect": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "stop": Outcome(state: .disconnected),
        ]),
        "failed: tls": (.failed(.tls), [
            "network lost": .stays(.failed(.tls)),
            "network available": .stays(.failed(.tls)),
            "interface changed": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "suspend: command": Outcome(state: .suspended(.command)),
            "suspend: sleep": Outcome(state: .suspended(.sleep)),
            "suspend: idle": Outcome(state: .suspended(.idle)),
            "manual reconnect": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": .stays(.failed(.tls)),
            "stop": Outcome(state: .disconnected),
        ]),
        "failed: unreachable": (.failed(.unreachable), [
            "network lost": .stays(.failed(.unreachable)),
            "network available": .stays(.failed(.unreachable)),
            "interface changed": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "suspend: command": Outcome(state: .suspended(.command)),
            "suspend: sleep": Outcome(state: .suspended(.sleep)),
            "suspend: idle": Outcome(state: .suspended(.idle)),
            "manual reconnect": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": .stays(.failed(.unreachable)),
            "gateway answered": Outcome(state: .connecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "stop": Outcome(state: .disconnected),
        ]),
        "failed: retries exhausted": (.failed(.retriesExhausted), [
            "network lost": .stays(.failed(.retriesExhausted)),
            "network available": .stays(.failed(.retriesExhausted)),
            "interface changed": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "suspend: command": Outcome(state: .suspended(.command)),
            "suspend: sleep": Outcome(state: .suspended(.sleep)),
            "suspend: idle": Outcome(state: .suspended(.idle)),
            "manual reconnect": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "credential changed": .stays(.failed(.retriesExhausted)),
            "gateway answered": Outcome(state: .reconnecting(attempt: 1, inFlight: true), actions: [.connect(attempt: 1)]),
            "stop": Outcome(state: .disconnected),
        ]),
    ]

    static let pairs: [(String, String)] = expectations.keys.sorted().flatMap { state in events.keys.sorted().map { (state, $0) } }

    @Test(arguments: pairs)
    func stateAndEvent(state stateName: String, event eventName: String) throws {
        var machine = Self.machine(in: stateName)
        let (start, table) = try #require(Self.expectations[stateName])
        #expect(machine.state == start, "the path to \(stateName) ended in \(machine.state)")
        let refusedBefore = machine.refusedTransitions
        let outcome = table[eventName] ?? .refused
        let transition = machine.handle(try #require(Self.events[eventName]))
        if let expected = outcome.state {
            #expect(transition.accepted)
            #expect(machine.state == expected)
            #expect(transition.actions == outcome.actions)
            #expect(machine.refusedTransitions == refusedBefore)
        } else {
            #expect(!transition.accepted, "\(eventName) in \(stateName) was accepted: now \(machine.state)")
            #expect(machine.state == start, "a refused event changed the state")
            #expect(transition.actions.isEmpty)
            #expect(machine.refusedTransitions == refusedBefore + 1, "a refused event is counted")
        }
    }

    @Test func backoffFollowsThePresetUntilFailed() {
        var machine = Machine(policy: .aggressive, random: { 0 })
        _ = machine.handle(.start)
        _ = machine.handle(.connectionSucceeded)
        var delays: [Duration] = []
        var transition = machine.handle(.connectionLost(Self.lost))
        for _ in 1...ReconnectPolicy.aggressive.maxAttempts {
            guard case .scheduleRetry(let delay, _) = transition.actions.first else { break }
            delays.append(delay)
            _ = machine.handle(.retryTimerFired)
            transition = machine.handle(.connectionFailed(Self.unreachable))
        }
        #expect(
            delays == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10), .seconds(10), .seconds(10), .seconds(10),
            ])
        #expect(machine.state == .failed(.retriesExhausted))
    }

    @Test func aGatewayThatSaidItRestartsIsTriedAgainWhenItSaidItWouldBeBack() {
        var machine = Machine(policy: .aggressive, random: { 0 })
        _ = machine.handle(.start)
        _ = machine.handle(.connectionSucceeded)
        let restart = machine.handle(.connectionLost(ConnectionProblem(.restarting(expectedIn: .milliseconds(1500)), "restarting")))
        #expect(restart.actions == [.scheduleRetry(after: .milliseconds(1500), attempt: 1)], "not at once, when the port is still closed")
        #expect(machine.state == .reconnecting(attempt: 1, inFlight: false))
        _ = machine.handle(.retryTimerFired)
        // Not back yet: the backoff goes on from there, as after any lost connection.
        #expect(machine.handle(.connectionFailed(Self.unreachable)).actions == [.scheduleRetry(after: .seconds(1), attempt: 2)])
        var long = Machine(policy: .aggressive, random: { 0 })
        _ = long.handle(.start)
        _ = long.handle(.connectionSucceeded)
        #expect(
            long.handle(.connectionLost(ConnectionProblem(.restarting(expectedIn: .seconds(600)), "restarting"))).actions == [
                .scheduleRetry(after: .seconds(60), attempt: 1)
            ], "a minute at most")
    }

    @Test func epochCountsConnections() {
        var machine = Machine(policy: Self.policy, random: { 0 })
        _ = machine.handle(.start)
        _ = machine.handle(.connectionSucceeded)
        #expect(machine.epoch == 1)
        _ = machine.handle(.connectionLost(Self.lost))
        _ = machine.handle(.retryTimerFired)
        _ = machine.handle(.connectionSucceeded)
        #expect(machine.epoch == 2)
        #expect(machine.lastProblem == nil)
    }

    @Test func presets() {
        #expect(ReconnectPolicy.default.backoff == Backoff(base: .seconds(1), cap: .seconds(30), jitter: 0.2))
        #expect(ReconnectPolicy.default.maxAttempts == 5)
        #expect(ReconnectPolicy.default.heartbeat == .seconds(30))
        #expect(ReconnectPolicy.aggressive.backoff == Backoff(base: .milliseconds(500), cap: .seconds(10), jitter: 0.1))
        #expect(ReconnectPolicy.aggressive.maxAttempts == 10)
        #expect(ReconnectPolicy.aggressive.heartbeat == .seconds(15))
    }

    @Test func bannerWords() {
        #expect(ConnectionPhase.suspended.words == "Disconnected (app suspended)")
        #expect(ConnectionPhase.waitingForNetwork.words == "No network — waiting for connection.")
        #expect(ConnectionPhase.reconnecting.words == "Reconnecting…")
        let failed = ConnectionStatus(phase: .failed, url: "ws://x", epoch: 1, failure: .credentialRejected)
        #expect(failed.words.hasPrefix("Connection lost — press r to reconnect"))
        #expect(failed.words.contains("token was rejected"))
    }
}
