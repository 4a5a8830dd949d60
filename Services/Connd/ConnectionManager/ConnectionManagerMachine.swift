import FoundationEssentials
import Logging
import OpenClawWire
import TetherSchema
import TetherService

/// Everything connd decides, as one value run by a ``MachineDriver``: the connection's state
/// (``ConnectionStateMachine``), the front ends attached (``FrontEndTracker``), the attempt
/// under way and the connection it opened (its deadlines, the OpenClaw handshake, liveness),
/// what an attempt's end means, and when to retry, knock at the gateway's port or look at the
/// credential again. Events in, actions out, time passed in; it reads no clock and does no
/// I/O. ``ConnectionIO`` carries its actions out and reports what happened as events.
struct ConnectionManagerMachine: Sendable {
    typealias Instant = ContinuousClock.Instant

    /// What connd was asked to run with.
    struct Settings: Sendable {
        var url: String
        /// The dialect to speak; nil detects it on each connection.
        var dialect: WireDialect?
        var identity: ConnectionIdentity
        /// This process's name for its connections: with the epoch, unique across restarts.
        var instanceID: String
        /// OpenClaw: the scopes to ask for.
        var scopes: [String] = OpenClawProtocol.chatScopes
        var heartbeat: Duration
        var upgradeDeadline: Duration
        /// How often the gateway's port is knocked at while failed for want of a gateway; nil
        /// never (also when the URL names no host to knock at).
        var failedKnockInterval: Duration?
        /// Whether the gateway's port may be knocked at while a retry waits.
        var knocksWhileWaiting: Bool
    }

    /// What happened.
    enum Event: Sendable {
        case start
        /// Shut down: close the connection within the close deadline, then ``Action/finished``.
        case stop
        case networkPath(NetworkPath)
        case frontEnd(FrontEndPresence)
        /// logind: the machine is about to sleep (true) or woke (false).
        case machineSleeps(Bool)
        /// A frame protod asks to write.
        case outbound(WireFrame)
        /// What an attempt, or the connection it opened, reports; `attempt` is the id its
        /// ``Action/prepare(attempt:)`` carried.
        case attempt(Int, AttemptReport)
        /// The answer to a ``Action/knock(_:)``.
        case knockAnswered(GatewayKnock.Answer, Knock)
        /// The answer to a ``Action/checkCredential``: the token, nil when it cannot be read.
        case credentialChecked(token: String?)
        case timePassed
    }

    /// What the attempt under way, or its connection, found.
    enum AttemptReport: Sendable {
        /// The credential and the device's keys were read.
        case prepared(token: String, identity: DeviceIdentity?, deviceToken: String?)
        /// The token cannot be read, in words.
        case credentialUnreadable(String)
        /// The device key cannot be read or made, in words.
        case deviceKeyUnusable(String, token: String)
        /// The WebSocket is open.
        case upgraded
        /// The gateway refused the upgrade; a plain request to the same URL was answered with
        /// this status (nil: no answer).
        case upgradeRefused(httpStatus: Int?)
        /// A text message from the gateway, read at `date` on the wall clock.
        case text(String, date: Date)
        /// A ping was sent, or not because the one before was still without its pong.
        case pinged(previousAnswered: Bool)
        /// When the gateway was last heard from.
        case lastHeard(Instant)
        /// The connection ended, with the gateway's close frame or without one.
        case ended(GatewayCloseFrame?)
        /// The attempt or the connection failed.
        case failed(any Error)
    }

    /// Why the gateway's port is knocked at.
    enum Knock: Sendable, Equatable {
        /// While a retry waits: a port refusing, then taking connections, is a gateway back
        /// from a restart; the retry is made at once.
        case duringRetryWait
        /// In failed for want of a gateway: a port taking connections starts again.
        case whileFailed

        /// How long a knock waits for an answer.
        var timeout: Duration { self == .duringRetryWait ? .milliseconds(200) : .seconds(2) }
    }

    /// What the service carries out, in order.
    enum Action: Sendable, Equatable {
        /// Start attempt `attempt`: read the credential and the device's keys, report `prepared`.
        case prepare(attempt: Int)
        /// Open the WebSocket, with `token` as a bearer token on the upgrade when `authorize`.
        case openSocket(attempt: Int, token: String, authorize: Bool)
        /// Write a text message on the attempt's connection.
        case write(attempt: Int, String)
        case ping(attempt: Int)
        case readLastHeard(attempt: Int)
        /// Send a close frame; the connection ends when the gateway answers.
        case closeGracefully(attempt: Int)
        /// The attempt is over, or given up: its task is cancelled if it still runs, and its
        /// socket closed.
        case end(attempt: Int)
        /// A frame from the gateway, for protod on `wire.in`.
        case publishInbound(epoch: Int, text: String)
        /// Retain the connection's status; `retryIn` is when the next attempt starts.
        case publishState(ConnectionStatus, retryIn: Duration?)
        /// Retain the front ends attached on `frontend.attached`.
        case retainAttached([FrontEndPresence])
        case knock(Knock)
        case checkCredential
        /// Keep a device token the gateway issued (a secret).
        case storeDeviceToken(String)
        /// Forget the device token the gateway refused.
        case forgetDeviceToken
        case log(Logger.Level, String, [String: String])
        /// Stopped: the connection is closed and nothing is left to do.
        case finished
    }

    let settings: Settings
    private(set) var connection: ConnectionStateMachine
    var frontEnds: FrontEndTracker
    /// The attempt under way, or the connection it opened.
    var current: ConnectionAttempt?
    /// Connections closing gracefully, by attempt id.
    var closing: [Int: Closing] = [:]
    /// The id of the last attempt started. Attempts are numbered here: a report names its
    /// attempt, and one from an attempt this machine has ended changes nothing (as the
    /// supervisor's machine ignores the exit of a pid that is no longer its program's).
    var lastAttemptID = 0
    /// What the open connection's gateway said of itself.
    var gateway: GatewayInfo?
    var lastNetwork: NetworkPath?
    /// When the retry waited for is due.
    var retryDue: Instant?
    /// While a retry waits within a minute of losing the gateway: knocking at its port.
    var retryKnocks: RetryKnocks?
    /// Until when a retry may be hastened by knocking: the first minute after the connection
    /// was lost or the first attempt failed.
    var knockUntil: Instant?
    var knockInFlight = false
    /// Failed for want of a gateway: when its port is next knocked at.
    var nextFailedKnock: Instant?
    /// Failed for the credential: when it is next read to see whether it changed.
    var nextCredentialCheck: Instant?
    var credentialCheckInFlight = false
    /// The token the gateway rejected, to notice when it changes.
    var rejectedToken: String?
    /// The OpenClaw signature to send: v3, or v2 for a gateway that refused v3.
    var signatureVersion = DeviceSignedPayload.Version.v3
    /// OpenClaw: the shared token the gateway refused while a device token it issued is
    /// stored: connd connects with the device token instead, until the token changes.
    var sharedTokenRefused: String?
    /// OpenClaw: the gateway wants a person to approve the wider scopes asked for (its
    /// request id, empty when it named none): connd asks for the chat scopes only, until a
    /// reconnect is asked for (`tether reconnect`, after approving).
    var scopeUpgradeWaiting: String?
    /// Stopping: waiting for the connections closing.
    var stopping = false
    private var finished = false

    /// A connection closing gracefully: what the gateway still sends until it answers the
    /// close is carried, with the connection's epoch.
    struct Closing: Sendable, Equatable {
        /// When it is cut if still open.
        var deadline: Instant
        var epoch: Int?
    }

    /// Knocking at the gateway's port while a retry waits.
    struct RetryKnocks: Sendable, Equatable {
        /// The port refused a knock: it is a gateway restarting.
        var refusedSeen = false
        /// When the next knock is due; nil while one is awaited, or once knocking stopped.
        var next: Instant?
    }

    init(settings: Settings, connection: ConnectionStateMachine, frontEnds: FrontEndTracker) {
        self.settings = settings
        self.connection = connection
        self.frontEnds = frontEnds
    }

    /// The phase, for a command's answer.
    var phase: ConnectionPhase { connection.state.phase }

    /// Feeds an event that happened at `now`; returns the actions to carry out.
    mutating func handle(_ event: Event, now: Instant) -> [Action] {
        guard !finished else { return [] }
        var actions: [Action]
        switch event {
        case .start: actions = decide(.start, now: now).actions
        case .stop:
            stopping = true
            actions = decide(.stop, now: now).actions
        case .networkPath(let path): actions = network(path, now: now)
        case .frontEnd(let presence): actions = frontEndActions(frontEnds.observe(presence, at: now), now: now)
        case .machineSleeps(let sleeping):
            actions = [.log(.notice, sleeping ? "the machine is going to sleep: suspending" : "the machine woke", [:])]
            actions += decide(sleeping ? .suspend(.sleep) : .resume(.sleep), now: now).actions
        case .outbound(let frame): actions = outbound(frame)
        case .attempt(let id, let report): actions = attemptReported(id, report, now: now)
        case .knockAnswered(let answer, let knock): actions = knockAnswered(answer, knock, now: now)
        case .credentialChecked(let token): actions = credentialChecked(token, now: now)
        case .timePassed: actions = timePassed(now: now)
        }
        if stopping, current == nil, closing.isEmpty {
            finished = true
            actions.append(.finished)
        }
        return actions
    }

    /// A command: reconnect, suspend or resume. Returns whether it was taken.
    mutating func command(_ command: ConnectionCommand.Action, now: Instant) -> (accepted: Bool, actions: [Action]) {
        guard !stopping else { return (false, []) }
        switch command {
        case .reconnect:
            // Asked for after approving a scope upgrade, as the words said: the wider scopes again.
            scopeUpgradeWaiting = nil
            return decide(.manualReconnect, now: now)
        case .suspend: return decide(.suspend(.command), now: now)
        case .resume: return decide(.resume(.command), now: now)
        }
    }

    // MARK: The connection's state

    /// Feeds the state machine; carries its actions into this machine's, starts and stops
    /// what its new state waits on, and publishes the state.
    mutating func decide(_ event: ConnectionStateMachine.Event, now: Instant) -> (accepted: Bool, actions: [Action]) {
        let before = connection.state
        let transition = connection.handle(event)
        guard transition.accepted else {
            return (false, [.log(.debug, "ignored an event", ["connection.event": "\(event)", "connection.state": "\(before)"])])
        }
        var actions = transition.actions.flatMap { carry($0, now: now) }
        followState(now: now)
        let state = connection.state
        if state != before {
            actions.append(
                .log(
                    .info, "connection \(state.phase.rawValue)",
                    ["connection.attempt": "\(state.attempt)", "connection.epoch": "\(connection.epoch)", "connection.event": "\(event)"]))
        }
        actions.append(publication(now: now))
        return (true, actions)
    }

    /// What one of the state machine's actions comes to.
    private mutating func carry(_ action: ConnectionStateMachine.Action, now: Instant) -> [Action] {
        switch action {
        case .connect:
            retryDue = nil
            retryKnocks = nil
            var actions = abandonCurrent()
            lastAttemptID += 1
            current = ConnectionAttempt(id: lastAttemptID)
            actions.append(.prepare(attempt: lastAttemptID))
            return actions
        case .scheduleRetry(let delay, _):
            retryDue = now + delay
            retryKnocks = nil
            guard settings.knocksWhileWaiting, let knockUntil, now < knockUntil else { return [] }
            retryKnocks = RetryKnocks(next: now)
            return knockIfDue(now: now)
        case .cancelRetry:
            retryDue = nil
            retryKnocks = nil
            return []
        case .cancelAttempt:
            return abandonCurrent()
        case .closeConnection(let deadline):
            guard let attempt = current else { return [] }
            current = nil
            guard let deadline else { return [.end(attempt: attempt.id)] }
            let epoch: Int? = if case .open(let epoch, _) = attempt.phase { epoch } else { nil }
            closing[attempt.id] = Closing(deadline: now + deadline, epoch: epoch)
            return [.closeGracefully(attempt: attempt.id)]
        }
    }

    private mutating func abandonCurrent() -> [Action] {
        guard let attempt = current else { return [] }
        current = nil
        return [.end(attempt: attempt.id)]
    }

    /// Starts the waits a state needs and ends those it does not: knocking at the gateway's
    /// port while it is unreachable, reading the token again while it is refused or unreadable.
    private mutating func followState(now: Instant) {
        let state = connection.state
        let watchesCredential = state == .failed(.credentialRejected) || state == .failed(.credentialUnavailable)
        if !watchesCredential {
            nextCredentialCheck = nil
        } else if nextCredentialCheck == nil {
            nextCredentialCheck = now + .seconds(1)
        }
        if let interval = settings.failedKnockInterval, state.awaitsGateway {
            if nextFailedKnock == nil { nextFailedKnock = now + interval }
        } else {
            nextFailedKnock = nil
        }
    }

    /// The status retained on `conn.state`.
    private func publication(now: Instant) -> Action {
        let state = connection.state
        let connected = state == .connected
        let status = ConnectionStatus(
            phase: state.phase, url: settings.url, epoch: connection.epoch, connectionID: connected ? "\(settings.instanceID)-\(connection.epoch)" : nil,
            attempt: state.attempt, lastError: connected ? nil : connection.lastProblem?.detail, failure: state.failure, identity: settings.identity,
            suspendReason: state.suspendReason, gateway: connected ? gateway : nil)
        return .publishState(status, retryIn: connected ? nil : retryDue.map { $0 - now })
    }

    // MARK: Inputs

    /// `net.path` changes as network events: lost, back, or a new primary interface.
    private mutating func network(_ path: NetworkPath, now: Instant) -> [Action] {
        let previous = lastNetwork
        lastNetwork = path
        if !path.satisfied {
            return previous?.satisfied != false ? decide(.networkLost, now: now).actions : []
        }
        if previous?.satisfied != true { return decide(.networkAvailable(interfaceChanged: false), now: now).actions }
        if let before = previous?.interface, before != path.interface { return decide(.networkAvailable(interfaceChanged: true), now: now).actions }
        return []
    }

    /// Whether the gateway last connected to granted the scope to see and answer approvals
    /// (OpenClaw's `operator.approvals`, or `operator.admin` that holds every scope).
    var holdsApprovals: Bool {
        gateway?.scopes.map(OpenClawProtocol.grantsApprovals) == true
    }

    /// The front-end tracker's actions: the first to arrive resumes an idle suspend; the grace
    /// period after the last left ends in one, unless the connection holds the gateway's
    /// approvals (``holdsApprovals``).
    mutating func frontEndActions(_ tracked: [FrontEndTracker.Action], now: Instant) -> [Action] {
        var actions: [Action] = []
        for action in tracked {
            switch action {
            case .attachedChanged(let attached):
                actions.append(.retainAttached(attached))
            case .firstArrived:
                guard connection.state == .suspended(.idle) else { continue }
                actions.append(.log(.info, "a front end arrived: resuming", [:]))
                actions += decide(.resume(.idle), now: now).actions
            case .graceStarted(let grace):
                actions.append(.log(.info, "the last front end left: suspending in \(grace) unless one comes back", [:]))
            case .graceElapsed:
                // Suspended, the connection could not hear the gateway's approvals: the gateway
                // gives up at once on one nobody can answer, and the next front end would never see it.
                if holdsApprovals {
                    actions.append(.log(.info, "no front end for the grace period: staying connected, to keep the gateway's approvals for the next one", [:]))
                    continue
                }
                actions.append(.log(.notice, "no front end for the grace period: suspending", [:]))
                actions += decide(.suspend(.idle), now: now).actions
            }
        }
        return actions
    }

    /// A frame for the open connection is written; one for another connection, or while none
    /// is open, is dropped.
    private func outbound(_ frame: WireFrame) -> [Action] {
        guard let attempt = current, case .open(let epoch, _) = attempt.phase, connection.state == .connected else {
            return [.log(.debug, "not connected: dropped an outbound frame", [:])]
        }
        if let wanted = frame.epoch, wanted != epoch {
            return [.log(.debug, "dropped a frame meant for connection \(wanted)", ["connection.epoch": "\(epoch)"])]
        }
        return [.write(attempt: attempt.id, frame.text)]
    }
}

extension ConnectionManagerMachine: DrivenMachine {
    static var timePassed: Event { .timePassed }
}
