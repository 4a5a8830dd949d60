import Foundation
import Testing
import TetherSchema

@testable import ConnectionManager

/// connd's decisions on a manual clock: the machine, the time, what it asked for, and the
/// status it published last.
struct MachineRig {
    typealias Action = ConnectionManagerMachine.Action
    typealias Event = ConnectionManagerMachine.Event

    static let url = "ws://gateway:8080/ws"
    var machine: ConnectionManagerMachine
    var now = ContinuousClock.now
    /// The status retained last, and when the next attempt was said to start.
    var published: ConnectionStatus?
    var retryIn: Duration?

    /// A machine with a 10 s heartbeat, a 5 s upgrade deadline, a 1 s backoff without jitter
    /// that doubles, a 5 s close deadline and a 30 s grace period for front ends.
    init(dialect: WireDialect? = .seed, maxAttempts: Int = 3, failedKnockInterval: Duration? = .seconds(30), scopes: [String]? = nil) {
        var settings = ConnectionManagerMachine.Settings(
            url: Self.url, dialect: dialect, identity: ConnectionIdentity(url: Self.url, user: nil, authMethod: "bearer-token", keyID: "file:/token"),
            instanceID: "test", heartbeat: .seconds(10), upgradeDeadline: .seconds(5), failedKnockInterval: failedKnockInterval, knocksWhileWaiting: true)
        if let scopes { settings.scopes = scopes }
        let policy = ReconnectPolicy(backoff: Backoff(base: .seconds(1), cap: .seconds(30), jitter: 0), maxAttempts: maxAttempts, heartbeat: .seconds(10))
        machine = ConnectionManagerMachine(
            settings: settings, connection: ConnectionStateMachine(policy: policy, closeDeadline: .seconds(5), random: { 0 }),
            frontEnds: FrontEndTracker(idleSuspendAfter: .seconds(30)))
    }

    var state: ConnectionStateMachine.State { machine.connection.state }

    /// Feeds an event now; returns its actions but the logs and the publications (the last
    /// of which is kept in ``published``).
    @discardableResult
    mutating func send(_ event: Event) -> [Action] {
        keep(machine.handle(event, now: now))
    }

    /// A command now: whether it was taken, and its actions as ``send(_:)`` returns them.
    @discardableResult
    mutating func command(_ command: ConnectionCommand.Action) -> (accepted: Bool, actions: [Action]) {
        let (accepted, actions) = machine.command(command, now: now)
        return (accepted, keep(actions))
    }

    /// Lets `duration` pass as the driver would: `timePassed` at each deadline on the way.
    @discardableResult
    mutating func wait(_ duration: Duration) -> [Action] {
        let end = now + duration
        var actions: [Action] = []
        var rounds = 0
        while let due = machine.nextDeadline, due <= end {
            rounds += 1
            guard rounds < 10_000 else {
                Issue.record("a deadline that passing time does not move: \(due)")
                break
            }
            now = max(now, due)
            actions += send(.timePassed)
        }
        now = end
        return actions
    }

    /// Starts, and opens attempt 1 on a seed gateway.
    mutating func connect(token: String = "token") {
        send(.start)
        send(.attempt(1, .prepared(token: token, identity: nil, deviceToken: nil)))
        send(.attempt(1, .upgraded))
    }

    private mutating func keep(_ actions: [Action]) -> [Action] {
        var kept: [Action] = []
        for action in actions {
            switch action {
            case .log:
                continue
            case .publishState(let status, let retryIn):
                published = status
                self.retryIn = retryIn
            default:
                kept.append(action)
            }
        }
        return kept
    }
}

/// An error an attempt might end with.
struct Unreachable: Error, CustomStringConvertible {
    var description: String { "connection refused" }
}
