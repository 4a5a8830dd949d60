import FoundationEssentials
public import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOWebSocket
import OpenClawWire
public import ServiceLifecycle
import Synchronization
public import TetherBus
public import TetherSchema
import TetherService

/// How connd reaches the gateway.
public struct ConnectionConfiguration: Sendable {
    /// `ws://` or `wss://` URL of the gateway's WebSocket endpoint.
    public var url: String
    public var credential: CredentialSource
    public var policy: ReconnectPolicy
    /// A CA certificate (PEM) trusted in addition to the system's, for wss://.
    public var caFile: String?
    /// How long a graceful close (suspend, shutdown) may take.
    public var closeDeadline: Duration
    /// The largest frame accepted from the gateway.
    public var maximumFrameSize: Int
    /// How long an attempt may take from the TCP connect to the end of the WebSocket upgrade
    /// (TLS handshake included); a gateway that takes longer is given up on.
    public var upgradeDeadline: Duration
    /// In `failed` for want of a gateway (unreachable, retries exhausted): how often its port
    /// is knocked at, so that a set nobody watches connects again once it is back.
    public var failedKnockInterval: Duration?
    /// Which dialect to speak; `nil` detects it on each connection (an OpenClaw gateway sends
    /// `connect.challenge` at once; one that sends nothing within ``autoDetectWait`` is a seed gateway).
    public var dialect: WireDialect?
    /// Where the OpenClaw device key and device tokens are kept.
    public var deviceKeys: DeviceKeyStore
    /// While a device waits for approval, how often the gateway is asked again.
    public var pairingCheckInterval: Duration

    /// How long an OpenClaw gateway has to send `connect.challenge` after the upgrade.
    public static let challengeWait: Duration = .seconds(6)
    /// How long detection waits for a `connect.challenge` before taking the gateway for a seed one.
    public static let autoDetectWait: Duration = .seconds(1)
    /// How long an OpenClaw gateway has to answer `connect` (it gives clients 10 s).
    public static let handshakeDeadline: Duration = .seconds(10)

    public init(
        url: String, credential: CredentialSource, policy: ReconnectPolicy = .default, caFile: String? = nil,
        closeDeadline: Duration = .seconds(5), maximumFrameSize: Int = 1 << 20, upgradeDeadline: Duration = .seconds(5),
        failedKnockInterval: Duration? = .seconds(30), dialect: WireDialect? = .seed,
        deviceKeys: DeviceKeyStore = DeviceKeyStore(directory: DeviceKeyStore.defaultDirectory),
        pairingCheckInterval: Duration = .seconds(5)
    ) {
        self.dialect = dialect
        self.deviceKeys = deviceKeys
        self.pairingCheckInterval = pairingCheckInterval
        self.url = url
        self.credential = credential
        self.policy = policy
        self.caFile = caFile
        self.closeDeadline = closeDeadline
        self.maximumFrameSize = maximumFrameSize
        self.upgradeDeadline = upgradeDeadline
        self.failedKnockInterval = failedKnockInterval
    }

    var tlsConfiguration: TLSConfiguration? {
        guard url.hasPrefix("wss://") else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.additionalTrustRoots = [.file(caFile)] }
        return tls
    }
}

/// The connection manager: keeps a WebSocket to the gateway open through gateway restarts,
/// dead peers, network changes and suspends, carries frames between it and the bus, and
/// publishes where it stands on `conn.state` (retained).
public struct ConnectionService: Service {
    private let bus: any Bus
    private let driver: ConnectionDriver
    private let lifecycle: LifecycleSettings
    private let logger: Logger

    /// - Parameters:
    ///   - phase: where the current phase is kept for the heartbeat to read.
    ///   - lifecycle: when front ends leaving or the machine sleeping suspend the connection.
    public init(
        bus: any Bus, configuration: ConnectionConfiguration, lifecycle: LifecycleSettings = LifecycleSettings(),
        phase: ConnectionPhaseBox = ConnectionPhaseBox(), logger: Logger
    ) {
        self.bus = bus
        self.logger = logger
        self.lifecycle = lifecycle
        self.driver = ConnectionDriver(bus: bus, configuration: configuration, lifecycle: lifecycle, phase: phase, logger: logger)
    }

    public func run() async throws {
        let outbound = try await bus.subscribe(to: [Topic.wireOutbound.name])
        let network = try await bus.subscribe(to: [Topic.networkPath.name])
        let frontEnds = try await bus.subscribe(to: [Topic.frontEndPresence.name])
        let commands = try await bus.serve(endpoint: ConnectionCommand.endpoint)
        var builder = CommandDispatcher(bus: bus, logger: logger)
        let driver = self.driver
        builder.on(ConnectionCommand.self) { request in
            await driver.perform(request.action, reason: request.reason)
        }
        let dispatcher = builder
        await driver.start()
        await withDiscardingTaskGroup { group in
            group.addTask { await driver.forwardOutbound(outbound) }
            group.addTask { await driver.followNetwork(network) }
            group.addTask { await dispatcher.run(commands) }
            group.addTask { await driver.followFrontEnds(frontEnds) }
            if let logind = lifecycle.logind {
                let watcher = SleepWatcher(bus: logind, logger: logger)
                group.addTask { await watcher.run { sleeping in await driver.machineSleeps(sleeping) } }
            }
            try? await gracefulShutdown()
            await driver.stop()
            group.cancelAll()
        }
    }
}

/// Runs the state machine: performs its actions, turns what happens into its events and
/// publishes the state after each.
actor ConnectionDriver {
    private let bus: any Bus
    private let configuration: ConnectionConfiguration
    private let logger: Logger
    private let phase: ConnectionPhaseBox
    private var machine: ConnectionStateMachine

    /// The attempt or connection under way; events from any other are stale and ignored.
    private var currentAttempt = 0
    private var attemptTask: Task<Void, Never>?
    private var retryTask: Task<Void, Never>?
    private var nextAttemptAt: Date?
    /// The open connection's writer, for outbound frames and for closing it.
    private var writer: GatewayConnection?
    private var lastNetwork: NetworkPath?
    /// This process's name for its connections: with the epoch, unique across restarts.
    private let instance = UUID().uuidString.prefix(8).lowercased()
    /// The token the gateway rejected, to notice when it changes.
    private var rejectedToken: String?
    /// Who connd connects as: the same for every status.
    private let identity: ConnectionIdentity
    private let lifecycle: LifecycleSettings
    private var frontEnds: FrontEndTracker
    /// Wakes the front-end tracker when it is next due (a presence lapsing, the grace period
    /// ending); none runs while nothing is due.
    private var frontEndTimer: Task<Void, Never>?
    /// While the token was rejected or cannot be read: watching it for a change.
    private var credentialWatch: Task<Void, Never>?
    /// While the gateway is unreachable: knocking on its port between attempts.
    private var knocking: Task<Void, Never>?
    /// Until when a retry may be hastened by knocking on the gateway's port: the first
    /// minute after the connection was lost or the first attempt failed.
    private var knockUntil: ContinuousClock.Instant?
    /// What the open connection's gateway said of itself.
    private var gateway: GatewayInfo?
    /// The OpenClaw signature to send: v3, or v2 for a gateway that refused v3.
    private var signatureVersion = DeviceSignedPayload.Version.v3
    /// OpenClaw: the shared token the gateway refused while a device token it issued is
    /// stored: connd connects with the device token instead, until the token file changes.
    private var sharedTokenRefused: String?

    init(bus: any Bus, configuration: ConnectionConfiguration, lifecycle: LifecycleSettings, phase: ConnectionPhaseBox, logger: Logger) {
        self.bus = bus
        self.configuration = configuration
        self.lifecycle = lifecycle
        self.frontEnds = FrontEndTracker(idleSuspendAfter: lifecycle.idleSuspendAfter)
        self.phase = phase
        self.logger = logger
        self.machine = ConnectionStateMachine(
            policy: configuration.policy, closeDeadline: configuration.closeDeadline, pairingCheckInterval: configuration.pairingCheckInterval)
        self.identity = configuration.credential.identity(url: configuration.url)
    }

    func start() {
        try? bus.retain(identity, on: .connectionIdentity)
        try? bus.retain(AttachedFrontEnds(frontEnds: []), on: .frontEndsAttached)
        handle(.start)
    }

    func stop() async {
        handle(.stop)
        // The graceful close ends within its deadline.
        await closingTask?.wait()
    }

    private var closingTask: ClosingConnection?

    func perform(_ action: ConnectionCommand.Action, reason: String? = nil) -> ConnectionCommand.Reply {
        if let reason { logger.notice("asked to \(action.rawValue)", metadata: ["connection.reason": "\(reason)"]) }
        let accepted =
            switch action {
            case .reconnect: handle(.manualReconnect)
            case .suspend: handle(.suspend(.command))
            case .resume: handle(.resume(.command))
            }
        return ConnectionCommand.Reply(accepted: accepted, phase: machine.state.phase)
    }

    // MARK: Suspend and resume

    /// logind: the machine is about to sleep (true) or woke (false).
    func machineSleeps(_ sleeping: Bool) {
        logger.notice(sleeping ? "the machine is going to sleep: suspending" : "the machine woke")
        handle(sleeping ? .suspend(.sleep) : .resume(.sleep))
    }

    /// Follows front ends' presence: the first to arrive resumes an idle suspend; when the
    /// last has gone for the grace period, the connection is suspended.
    /// The front ends attached are retained on `frontend.attached` whenever they change.
    func followFrontEnds(_ subscription: BusSubscription) async {
        for await message in subscription {
            guard let presence = try? message.decode(FrontEndPresence.self) else { continue }
            carryOut(frontEnds.observe(presence, at: .now))
        }
        frontEndTimer?.cancel()
    }

    private func carryOut(_ actions: [FrontEndTracker.Action]) {
        for action in actions {
            switch action {
            case .attachedChanged(let attached):
                try? bus.retain(AttachedFrontEnds(frontEnds: attached), on: .frontEndsAttached)
            case .firstArrived:
                if machine.state == .suspended(.idle) {
                    logger.info("a front end arrived: resuming")
                    handle(.resume(.idle))
                }
            case .graceStarted(let grace):
                logger.info("the last front end left: suspending in \(grace) unless one comes back")
            case .graceElapsed:
                logger.notice("no front end for the grace period: suspending")
                handle(.suspend(.idle))
            }
        }
        frontEndTimer?.cancel()
        frontEndTimer = frontEnds.nextDeadline.map { due in
            Task {
                guard (try? await Task.sleep(until: due, clock: .continuous)) != nil else { return }
                self.carryOut(self.frontEnds.timePassed(at: .now))
            }
        }
    }

    // MARK: Events and actions

    @discardableResult
    private func handle(_ event: ConnectionStateMachine.Event) -> Bool {
        let before = machine.state
        let transition = machine.handle(event)
        guard transition.accepted else {
            logger.debug("ignored an event", metadata: ["connection.event": "\(event)", "connection.state": "\(before)"])
            return false
        }
        for action in transition.actions { perform(action) }
        followStateTimers()
        if machine.state != before {
            logger.info(
                "connection \(machine.state.phase.rawValue)",
                metadata: ["connection.attempt": "\(machine.state.attempt)", "connection.epoch": "\(machine.epoch)", "connection.event": "\(event)"])
        }
        publish()
        return true
    }

    private func perform(_ action: ConnectionStateMachine.Action) {
        switch action {
        case .connect(let attempt):
            nextAttemptAt = nil
            currentAttempt += 1
            let id = currentAttempt
            attemptTask = Task { await self.runConnection(id: id, attempt: attempt) }
        case .scheduleRetry(let delay, _):
            retryTask?.cancel()
            nextAttemptAt = Date().addingTimeInterval(delay.inSeconds)
            let deadline = ContinuousClock.now + delay
            let knocking = knockUntil.map { ContinuousClock.now < $0 } == true ? gatewayAddress : nil
            retryTask = Task {
                await Self.waitForRetry(until: deadline, knocking: knocking)
                guard !Task.isCancelled else { return }
                self.retryFired()
            }
        case .cancelRetry:
            retryTask?.cancel()
            retryTask = nil
            nextAttemptAt = nil
        case .cancelAttempt:
            currentAttempt += 1
            attemptTask?.cancel()
            attemptTask = nil
        case .closeConnection(let deadline):
            currentAttempt += 1
            let task = attemptTask
            let writer = self.writer
            self.writer = nil
            attemptTask = nil
            closingTask = ClosingConnection(task: task, writer: writer, deadline: deadline)
        }
    }

    /// The gateway's host and port, from its URL.
    private var gatewayAddress: (host: String, port: Int)? {
        guard let url = URL(string: configuration.url), let host = url.host else { return nil }
        return (host, url.port ?? (url.scheme == "wss" ? 443 : 80))
    }

    /// Waits until `deadline`. With `knocking`, while the gateway's host answers that nothing
    /// listens on its port (a gateway restarting), knocks every 50 ms and returns as soon as
    /// the port takes a connection again, so a restarted gateway is back in use within about
    /// 50 ms instead of at the end of the backoff. A port that takes the first knock (a
    /// gateway that closed the connection itself) and a host that does not answer are left
    /// to the backoff.
    private static func waitForRetry(until deadline: ContinuousClock.Instant, knocking: (host: String, port: Int)?) async {
        var refused = false
        while let knocking, ContinuousClock.now < deadline, !Task.isCancelled {
            switch await GatewayKnock.knock(host: knocking.host, port: knocking.port) {
            case .accepted where refused:
                return
            case .refused:
                refused = true
                try? await Task.sleep(until: min(deadline, .now + .milliseconds(50)))
            case .accepted, .silent:
                try? await Task.sleep(until: deadline)
            }
        }
        try? await Task.sleep(until: deadline)
    }

    private func retryFired() {
        retryTask = nil
        handle(.retryTimerFired)
    }

    private func publish() {
        let state = machine.state
        phase.value = state.phase
        let status = ConnectionStatus(
            phase: state.phase, url: configuration.url, epoch: machine.epoch,
            connectionID: state == .connected ? "\(instance)-\(machine.epoch)" : nil, attempt: state.attempt,
            nextAttemptAt: state == .connected ? nil : nextAttemptAt, lastError: state == .connected ? nil : machine.lastProblem?.detail,
            failure: state.failure, identity: identity, suspendReason: state.suspendReason,
            gateway: state == .connected ? gateway : nil)
        do {
            try bus.retain(status, on: .connectionState)
        } catch {
            logger.warning("cannot publish the connection state", metadata: ["bus.error": "\(error)"])
        }
    }

    // MARK: The connection

    private func runConnection(id: Int, attempt: Int) async {
        let token: String
        do {
            token = try await configuration.credential.read()
        } catch {
            attemptEnded(id: id, opened: false, problem: ConnectionProblem(.credentialUnavailable, "the token cannot be read: \(error)"), token: nil)
            return
        }
        let handshake: OpenClawHandshake?
        do {
            handshake =
                configuration.dialect == .seed
                ? nil : OpenClawHandshake(identity: try configuration.deviceKeys.identity(), signature: signatureVersion, instanceID: String(instance))
        } catch {
            attemptEnded(id: id, opened: false, problem: ConnectionProblem(.refused(.gatewayRefused), "\(error)"), token: token)
            return
        }
        var headers = HTTPHeaders()
        // The seed dialect authenticates on the upgrade; OpenClaw in its connect request.
        if configuration.dialect != .openclaw { headers.add(name: "Authorization", value: "Bearer \(token)") }
        let heartbeat = configuration.policy.heartbeat
        let bus = self.bus
        let url = configuration.url
        let dialect = configuration.dialect
        let deviceToken = configuration.deviceKeys.deviceToken(url: url)
        // The shared token was refused and this device holds a token of its own: that one.
        let withDeviceTokenOnly = sharedTokenRefused == token && deviceToken != nil
        if sharedTokenRefused != nil, !withDeviceTokenOnly { sharedTokenRefused = nil }
        let opened = OnceFlag()
        let deadPeer = OnceFlag()
        let refusal = Mutex<OpenClawHandshake.Outcome?>(nil)
        do {
            let closeFrame = try await GatewaySocket.connect(
                url: url, headers: headers, tls: configuration.tlsConfiguration, maximumMessageSize: configuration.maximumFrameSize,
                deadline: configuration.upgradeDeadline
            ) { connection in
                var messages = connection.messages.makeAsyncIterator()
                var info = GatewayInfo(dialect: .seed)
                var firstFrame: String?
                if let handshake {
                    switch await OpenClawConnect.run(
                        handshake, on: connection, messages: &messages, required: dialect == .openclaw, url: url,
                        token: withDeviceTokenOnly ? nil : token, deviceToken: deviceToken)
                    {
                    case .seed(let frame):
                        firstFrame = frame
                    case .ready(let gateway, let issued):
                        info = gateway
                        if withDeviceTokenOnly { info.connectedWithDeviceToken = true }
                        if let issued, issued != deviceToken { await self.store(deviceToken: issued) }
                    case .refused(let outcome):
                        refusal.withLock { $0 = outcome }
                        return
                    case .ended:
                        return
                    }
                }
                guard let epoch = await self.opened(id: id, connection: connection, gateway: info) else { return }
                opened.set()
                if let firstFrame { try? bus.publish(WireFrame(epoch: epoch, text: firstFrame), on: .wireInbound) }
                await withDiscardingTaskGroup { group in
                    if info.dialect == .openclaw {
                        // Ticks are the gateway's heartbeat: no frame for two intervals is a dead
                        // connection. Pings keep the path warm; their pongs count as frames.
                        let silence = Duration.milliseconds(2 * (info.tickIntervalMilliseconds ?? OpenClawProtocol.defaultTickIntervalMs))
                        group.addTask {
                            while (try? await Task.sleep(for: min(heartbeat, .seconds(1)))) != nil {
                                if ContinuousClock.now - connection.heardAt > silence {
                                    deadPeer.set()
                                    connection.abort()
                                    return
                                }
                            }
                        }
                        group.addTask {
                            while (try? await Task.sleep(for: heartbeat)) != nil { _ = try? await connection.ping() }
                        }
                    } else {
                        // The heartbeat: a ping each period; one still without its pong when the
                        // next is due means the gateway stopped answering.
                        group.addTask {
                            while (try? await Task.sleep(for: heartbeat)) != nil {
                                guard (try? await connection.ping()) != false else {
                                    deadPeer.set()
                                    connection.abort()
                                    return
                                }
                            }
                        }
                    }
                    while let inbound = await messages.next() {
                        guard case .text(let text) = inbound else { continue }
                        do {
                            try bus.publish(WireFrame(epoch: epoch, text: text), on: .wireInbound)
                        } catch {
                            // Too large for the bus, or the bus is gone: said, not silent.
                            await self.dropped(frameOf: text.utf8.count, error)
                        }
                    }
                    group.cancelAll()
                }
            }
            let silence = (gateway?.tickIntervalMilliseconds).map { "no frame for \(2 * $0 / 1000) s (two tick intervals)" }
            // The gateway's own close comes with a close frame. Without one, the connection
            // died: the gateway went away, or the heartbeat found no pong.
            var problem: ConnectionProblem =
                if let closeFrame {
                    ConnectionProblem(.unreachable, "the gateway closed the connection (\(closeFrame.code)\(closeFrame.reason.map { ": \($0)" } ?? ""))")
                } else if deadPeer.isSet {
                    ConnectionProblem(.unreachable, "the gateway went silent (\(silence ?? "no pong within \(heartbeat)")): the connection is dead")
                } else {
                    ConnectionProblem(.unreachable, "lost the connection to the gateway: it went away")
                }
            // A refusal in the handshake, in the answer or in the close frame's reason.
            var outcome = refusal.withLock { $0 }
            if outcome == nil, !opened.isSet, let handshake, let reason = closeFrame?.reason, !reason.isEmpty {
                if case .refused(let refused) = OpenClawHandshake.refusal(
                    GatewayErrorShape(code: "", message: reason), url: url, deviceID: handshake.identity.deviceID), refused.kind != .refused(.gatewayRefused)
                {
                    outcome = .refused(refused)
                }
            }
            switch outcome {
            case .refused(let refused)?:
                problem = refused
            case .deviceTokenRefused(let words)?:
                configuration.deviceKeys.forgetDeviceToken(url: url)
                problem = ConnectionProblem(.unavailable(retryAfter: .zero), words)
            case .sharedTokenRefused(let words)?:
                if deviceToken != nil, !withDeviceTokenOnly {
                    sharedTokenRefused = token
                    logger.warning("the shared token was refused: connecting with this device's token", metadata: ["connection.error": "\(words)"])
                    problem = ConnectionProblem(
                        .unavailable(retryAfter: .zero), words + ": connecting with the token the gateway issued to this device; update the token file")
                } else {
                    problem = ConnectionProblem(.credentialRejected, words + ": fix the token file, then reconnect")
                }
            case .signatureRefused(let words)?:
                if signatureVersion == .v3 {
                    signatureVersion = .v2
                    problem = ConnectionProblem(.unavailable(retryAfter: .zero), words + ": trying the v2 signature")
                } else {
                    problem = ConnectionProblem(.refused(.gatewayRefused), words)
                }
            case .ready?, nil:
                break
            }
            attemptEnded(id: id, opened: opened.isSet, problem: problem, token: token)
        } catch {
            let problem = await classify(error, token: token)
            attemptEnded(id: id, opened: opened.isSet, problem: problem, token: token)
        }
    }

    private func dropped(frameOf size: Int, _ error: any Error) {
        logger.warning("dropped a frame from the gateway: it could not go on the bus", metadata: ["wire.bytes": "\(size)", "bus.error": "\(error)"])
    }

    /// Keeps a device token the gateway issued, as a secret (never published or logged).
    private func store(deviceToken: String) {
        do {
            try configuration.deviceKeys.storeDeviceToken(deviceToken, url: configuration.url)
        } catch {
            logger.warning("cannot keep the device token the gateway issued", metadata: ["connection.error": "\(error)"])
        }
    }

    /// Called from inside the WebSocket handler once connected; the epoch, or nil when the
    /// attempt was abandoned meanwhile.
    private func opened(id: Int, connection: GatewayConnection, gateway: GatewayInfo) -> Int? {
        guard id == currentAttempt else { return nil }
        self.writer = connection
        self.gateway = gateway
        knockUntil = nil
        handle(.connectionSucceeded)
        rejectedToken = nil
        return machine.epoch
    }

    /// - Parameter token: the token the attempt used, nil when none could be read.
    private func attemptEnded(id: Int, opened: Bool, problem: ConnectionProblem, token: String?) {
        guard id == currentAttempt else { return }
        writer = nil
        attemptTask = nil
        if problem.kind == .credentialRejected { rejectedToken = token }
        if knockUntil == nil { knockUntil = .now + .seconds(60) }
        logger.warning(opened ? "connection lost" : "connection attempt failed", metadata: ["connection.error": "\(problem.detail)"])
        handle(opened ? .connectionLost(problem) : .connectionFailed(problem))
    }

    /// What went wrong with an attempt, in the machine's terms and in words.
    private func classify(_ error: any Error, token: String) async -> ConnectionProblem {
        let url = configuration.url
        if let error = error as? GatewaySocketError, case .upgradeTimedOut(let deadline) = error.code {
            return ConnectionProblem(.unreachable, "the gateway at \(url) did not complete the WebSocket upgrade within \(deadline)")
        }
        if let error = error as? GatewaySocketError, error.code == .upgradeRefused {
            // The upgrade was refused: ask the same URL why.
            if let status = try? await HTTPStatusProbe.status(url: url, token: token, tls: configuration.tlsConfiguration) {
                if status == 401 || status == 403 {
                    return ConnectionProblem(.credentialRejected, "the gateway at \(url) rejected the token (HTTP \(status))")
                }
                return ConnectionProblem(.unreachable, "the gateway at \(url) refused the connection (HTTP \(status))")
            }
            return ConnectionProblem(.unreachable, "the gateway at \(url) refused the WebSocket upgrade")
        }
        if let problem = TLSFailure.problem(error, url: url) { return problem }
        if let error = error as? IOError {
            return ConnectionProblem(.unreachable, "cannot reach the gateway at \(url): \(error.description)")
        }
        return ConnectionProblem(.unreachable, "cannot connect to \(url): \(error)")
    }

    // MARK: Inputs

    /// Writes `wire.out` frames to the open connection; frames for another connection are dropped.
    func forwardOutbound(_ subscription: BusSubscription) async {
        for await message in subscription {
            guard let frame = try? message.decode(WireFrame.self) else {
                logger.warning("dropped an unreadable wire.out message", metadata: ["bus.source": "\(message.header.source)"])
                continue
            }
            guard let writer, machine.state == .connected else {
                logger.debug("not connected: dropped an outbound frame")
                continue
            }
            if let wanted = frame.epoch, wanted != machine.epoch {
                logger.debug("dropped a frame meant for connection \(wanted)", metadata: ["connection.epoch": "\(machine.epoch)"])
                continue
            }
            do {
                try await writer.write(text: frame.text)
            } catch {
                logger.warning("cannot write a frame", metadata: ["connection.error": "\(error)"])
            }
        }
    }

    /// Turns `net.path` changes into network events.
    func followNetwork(_ subscription: BusSubscription) async {
        for await message in subscription {
            guard let path = try? message.decode(NetworkPath.self) else { continue }
            let previous = lastNetwork
            lastNetwork = path
            if !path.satisfied {
                if previous?.satisfied != false { handle(.networkLost) }
            } else if previous?.satisfied != true {
                handle(.networkAvailable(interfaceChanged: false))
            } else if let before = previous?.interface, before != path.interface {
                handle(.networkAvailable(interfaceChanged: true))
            }
        }
    }

    /// Starts the watches a state needs and stops those it does not: knocking while the
    /// gateway is unreachable, watching the token while it is refused or unreadable. No
    /// timer runs in any other state.
    private func followStateTimers() {
        let watchesCredential = machine.state == .failed(.credentialRejected) || machine.state == .failed(.credentialUnavailable)
        if watchesCredential, credentialWatch == nil {
            credentialWatch = Task { await self.watchCredential() }
        } else if !watchesCredential, let watch = credentialWatch {
            watch.cancel()
            credentialWatch = nil
        }
        let knocks = machine.state.awaitsGateway && configuration.failedKnockInterval != nil && gatewayAddress != nil
        if knocks, knocking == nil {
            knocking = Task { await self.knockWhileFailed() }
        } else if !knocks, let task = knocking {
            task.cancel()
            knocking = nil
        }
    }

    /// Knocks on the gateway's port every `failedKnockInterval` until cancelled; connects
    /// as soon as the port takes connections.
    private func knockWhileFailed() async {
        guard let interval = configuration.failedKnockInterval, let address = gatewayAddress else { return }
        for await _ in AsyncTimerSequence.repeating(every: interval) {
            guard machine.state.awaitsGateway else { continue }
            guard await GatewayKnock.knock(host: address.host, port: address.port, timeout: .seconds(2)) == .accepted else { continue }
            guard machine.state.awaitsGateway else { continue }
            logger.info("the gateway's port takes connections again: connecting")
            handle(.gatewayAnswered)
        }
    }

    /// While the gateway rejects the token, or it cannot be read, watches the credential for
    /// a change: a new token, or one that can be read again.
    private func watchCredential() async {
        for await _ in AsyncTimerSequence.repeating(every: .seconds(1)) {
            switch machine.state {
            case .failed(.credentialRejected):
                guard let token = try? await configuration.credential.read(), token != rejectedToken else { continue }
                logger.info("the credential changed: connecting again")
            case .failed(.credentialUnavailable):
                guard (try? await configuration.credential.read()) != nil else { continue }
                logger.info("the credential can be read again: connecting")
            default:
                continue
            }
            handle(.credentialChanged)
        }
    }
}

/// A connection being closed: a close frame, then the task is cancelled if the deadline passes.
struct ClosingConnection: Sendable {
    private let done: Task<Void, Never>

    init(task: Task<Void, Never>?, writer: GatewayConnection?, deadline: Duration?) {
        done = Task {
            guard let task else { return }
            if let deadline, let writer {
                try? await writer.close(.normalClosure, reason: "closing")
                let timer = Task {
                    try? await Task.sleep(for: deadline)
                    task.cancel()
                }
                await task.value
                timer.cancel()
            } else {
                task.cancel()
                await task.value
            }
        }
    }

    /// Returns once the connection is closed, or cut at the deadline.
    func wait() async {
        await done.value
    }
}

/// The connection phase, readable from any task (the heartbeat reads it).
public final class ConnectionPhaseBox: Sendable {
    private let phase = Mutex(ConnectionPhase.disconnected)
    /// Notified when the phase changes, so the heartbeat says so at once.
    public let changed = ChangeSignal()

    public init() {}

    public var value: ConnectionPhase {
        get { phase.withLock { $0 } }
        set {
            let before = phase.withLock { phase in
                defer { phase = newValue }
                return phase
            }
            if before != newValue { changed.notify() }
        }
    }

    /// The phase's name.
    public var read: @Sendable () -> String {
        { self.value.rawValue }
    }
}
