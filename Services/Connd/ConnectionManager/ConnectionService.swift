import FoundationEssentials
public import Logging
import NIOSSL
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
    /// The largest frame accepted from the gateway. 16 MiB by default, as OpenClaw's own
    /// clients read: its `chat.history` answers hold up to 6 MiB of JSON.
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
    /// OpenClaw: whether to ask for `operator.approvals`, to see and answer the gateway's
    /// approvals. A device paired without it must be approved again for it (a scope upgrade).
    public var approvals: Bool

    /// How long an OpenClaw gateway has to send `connect.challenge` after the upgrade.
    public static let challengeWait: Duration = .seconds(6)
    /// How long detection waits for a `connect.challenge` before taking the gateway for a seed one.
    public static let autoDetectWait: Duration = .seconds(1)
    /// How long an OpenClaw gateway has to answer `connect` (it gives clients 10 s).
    public static let handshakeDeadline: Duration = .seconds(10)

    public init(
        url: String, credential: CredentialSource, policy: ReconnectPolicy = .default, caFile: String? = nil,
        closeDeadline: Duration = .seconds(5), maximumFrameSize: Int = 16 << 20, upgradeDeadline: Duration = .seconds(5),
        failedKnockInterval: Duration? = .seconds(30), dialect: WireDialect? = .seed,
        deviceKeys: DeviceKeyStore = DeviceKeyStore(directory: DeviceKeyStore.defaultDirectory),
        pairingCheckInterval: Duration = .seconds(5), approvals: Bool = false
    ) {
        self.approvals = approvals
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

    /// The gateway's host and port, from its URL; nil when it names no host.
    var gatewayAddress: (host: String, port: Int)? {
        guard let url = URL(string: url), let host = url.host else { return nil }
        return (host, url.port ?? (url.scheme == "wss" ? 443 : 80))
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
///
/// What to do and when is decided by ``ConnectionManagerMachine``, run by a ``MachineDriver``:
/// bus messages, commands, logind's signals and what the connection's I/O finds arrive as its
/// events, one at a time; one timer wakes it at its next deadline; ``ConnectionIO`` carries
/// its actions out, in order.
public struct ConnectionService: Service {
    private let bus: any Bus
    private let configuration: ConnectionConfiguration
    private let lifecycle: LifecycleSettings
    private let phase: ConnectionPhaseBox
    private let logger: Logger

    /// - Parameters:
    ///   - phase: where the current phase is kept for the heartbeat to read.
    ///   - lifecycle: when front ends leaving or the machine sleeping suspend the connection.
    public init(
        bus: any Bus, configuration: ConnectionConfiguration, lifecycle: LifecycleSettings = LifecycleSettings(),
        phase: ConnectionPhaseBox = ConnectionPhaseBox(), logger: Logger
    ) {
        self.bus = bus
        self.configuration = configuration
        self.lifecycle = lifecycle
        self.phase = phase
        self.logger = logger
    }

    public func run() async throws {
        let outbound = try await bus.subscribe(to: [Topic.wireOutbound.name])
        let network = try await bus.subscribe(to: [Topic.networkPath.name])
        let frontEnds = try await bus.subscribe(to: [Topic.frontEndPresence.name])
        let commands = try await bus.serve(endpoint: ConnectionCommand.endpoint)
        let driver = MachineDriver<ConnectionManagerMachine, ContinuousClock>(clock: ContinuousClock())
        let io = ConnectionIO(bus: bus, configuration: configuration, phase: phase, logger: logger, driver: driver)
        let dispatcher = commandDispatcher(driver: driver)
        let machine = ConnectionManagerMachine(configuration: configuration, lifecycle: lifecycle)
        try? bus.retain(machine.settings.identity, on: .connectionIdentity)
        try? bus.retain(AttachedFrontEnds(frontEnds: []), on: .frontEndsAttached)
        let logger = self.logger
        await withDiscardingTaskGroup { group in
            group.addTask { await driver.run(machine) { await io.carryOut($0) } }
            group.addTask {
                await withDiscardingTaskGroup { jobs in
                    for await job in io.jobs { jobs.addTask { await job() } }
                }
            }
            group.addTask {
                for await message in outbound {
                    guard let frame = try? message.decode(WireFrame.self) else {
                        logger.warning("dropped an unreadable wire.out message", metadata: ["bus.source": "\(message.header.source)"])
                        continue
                    }
                    driver.send(.outbound(frame))
                }
            }
            group.addTask {
                for await message in network {
                    if let path = try? message.decode(NetworkPath.self) { driver.send(.networkPath(path)) }
                }
            }
            group.addTask {
                for await message in frontEnds {
                    if let presence = try? message.decode(FrontEndPresence.self) { driver.send(.frontEnd(presence)) }
                }
            }
            group.addTask { await dispatcher.run(commands) }
            if let logind = lifecycle.logind {
                let watcher = SleepWatcher(bus: logind, logger: logger)
                group.addTask { await watcher.run { sleeping in driver.send(.machineSleeps(sleeping)) } }
            }
            driver.send(.start)
            try? await gracefulShutdown()
            // The connection closes within the close deadline; then everything stops.
            driver.send(.stop)
            for await _ in io.finished { break }
            group.cancelAll()
        }
        await io.endAll()
    }

    /// Reconnect, suspend and resume, decided by the machine in its turn.
    private func commandDispatcher(driver: MachineDriver<ConnectionManagerMachine, ContinuousClock>) -> CommandDispatcher {
        var dispatcher = CommandDispatcher(bus: bus, logger: logger)
        let logger = self.logger
        dispatcher.on(ConnectionCommand.self) { request in
            if let reason = request.reason { logger.notice("asked to \(request.action.rawValue)", metadata: ["connection.reason": "\(reason)"]) }
            return try await driver.perform { context in
                let (accepted, actions) = context.machine.command(request.action, now: context.now)
                await context.carryOut(actions)
                return ConnectionCommand.Reply(accepted: accepted, phase: context.machine.phase)
            }
        }
        return dispatcher
    }
}

extension ConnectionManagerMachine {
    /// The machine for `configuration`, with a new name for this process's connections.
    init(configuration: ConnectionConfiguration, lifecycle: LifecycleSettings) {
        let settings = Settings(
            url: configuration.url, dialect: configuration.dialect, identity: configuration.credential.identity(url: configuration.url),
            instanceID: String(UUID().uuidString.prefix(8).lowercased()),
            scopes: OpenClawProtocol.chatScopes + (configuration.approvals ? [OpenClawProtocol.approvalsScope] : []), heartbeat: configuration.policy.heartbeat,
            upgradeDeadline: configuration.upgradeDeadline,
            failedKnockInterval: configuration.gatewayAddress == nil ? nil : configuration.failedKnockInterval,
            knocksWhileWaiting: configuration.gatewayAddress != nil)
        self.init(
            settings: settings,
            connection: ConnectionStateMachine(
                policy: configuration.policy, closeDeadline: configuration.closeDeadline, pairingCheckInterval: configuration.pairingCheckInterval),
            frontEnds: FrontEndTracker(idleSuspendAfter: lifecycle.idleSuspendAfter))
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
