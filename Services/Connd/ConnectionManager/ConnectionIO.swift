import FoundationEssentials
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import OpenClawWire
import TetherBus
import TetherSchema
import TetherService

/// Carries out ``ConnectionManagerMachine``'s actions: the attempts' I/O (the credential and
/// the device's keys, the WebSocket and its frames), knocks at the gateway's port, the bus
/// publications, the device token and the logs. What happens comes back to the machine as
/// events through the driver; nothing here decides.
actor ConnectionIO {
    typealias Driver = MachineDriver<ConnectionManagerMachine, ContinuousClock>
    typealias Report = ConnectionManagerMachine.AttemptReport

    private let bus: any Bus
    private let configuration: ConnectionConfiguration
    private let phase: ConnectionPhaseBox
    private let logger: Logger
    private let driver: Driver
    /// Each attempt's I/O, by the id the machine gave it, until the machine ends it.
    private var attempts: [Int: AttemptIO] = [:]
    /// Short I/O (pings, knocks, credential readings) for the service's task group to run.
    let jobs: AsyncStream<@Sendable () async -> Void>
    private let addJob: AsyncStream<@Sendable () async -> Void>.Continuation
    /// Said once the machine has stopped: the connection is closed.
    let finished: AsyncStream<Void>
    private let finish: AsyncStream<Void>.Continuation

    /// One attempt: the task doing its I/O, and once its WebSocket is open, the connection
    /// and what is to be written on it, in order.
    private struct AttemptIO {
        var task: Task<Void, Never>
        var connection: GatewayConnection?
        var outgoing: AsyncStream<Outgoing>.Continuation?
    }

    private enum Outgoing {
        case text(String)
        case close
    }

    init(bus: any Bus, configuration: ConnectionConfiguration, phase: ConnectionPhaseBox, logger: Logger, driver: Driver) {
        self.bus = bus
        self.configuration = configuration
        self.phase = phase
        self.logger = logger
        self.driver = driver
        (jobs, addJob) = AsyncStream.makeStream()
        (finished, finish) = AsyncStream.makeStream()
    }

    /// Carries out one of the machine's actions.
    func carryOut(_ action: ConnectionManagerMachine.Action) {
        switch action {
        case .prepare(let id):
            let (configuration, driver) = (self.configuration, self.driver)
            attempts[id] = AttemptIO(
                task: Task {
                    let report = await Self.prepare(configuration)
                    if !Task.isCancelled { driver.send(.attempt(id, report)) }
                })
        case .openSocket(let id, let token, let authorize):
            attempts[id]?.task = Task { await self.runSocket(id, token: token, authorize: authorize) }
        case .write(let id, let text):
            // Through a writer of its own, which waits while the socket cannot take more: a
            // backlog (an outbox sent again, with images) waits here, not ahead of the pings.
            attempts[id]?.outgoing?.yield(.text(text))
        case .ping(let id):
            // Sent beside the text messages, not queued behind them: a long write does not hold the heartbeat up.
            guard let connection = attempts[id]?.connection else { return }
            let driver = self.driver
            addJob.yield {
                // A ping that cannot be written says nothing of the gateway: the end of the
                // connection will.
                guard let answered = try? await connection.ping() else { return }
                driver.send(.attempt(id, .pinged(previousAnswered: answered)))
            }
        case .readLastHeard(let id):
            if let connection = attempts[id]?.connection { driver.send(.attempt(id, .lastHeard(connection.heardAt))) }
        case .closeGracefully(let id):
            attempts[id]?.outgoing?.yield(.close)
        case .end(let id):
            attempts.removeValue(forKey: id)?.task.cancel()
        case .publishInbound(let epoch, let text):
            do {
                try bus.publish(WireFrame(epoch: epoch, text: text), on: .wireInbound)
            } catch {
                // Too large for the bus, or the bus is gone: said, not silent.
                logger.warning(
                    "dropped a frame from the gateway: it could not go on the bus", metadata: ["wire.bytes": "\(text.utf8.count)", "bus.error": "\(error)"])
            }
        case .publishState(var status, let retryIn):
            status.nextAttemptAt = retryIn.map { Date().addingTimeInterval($0.inSeconds) }
            phase.value = status.phase
            do {
                try bus.retain(status, on: .connectionState)
            } catch {
                logger.warning("cannot publish the connection state", metadata: ["bus.error": "\(error)"])
            }
        case .retainAttached(let attached):
            try? bus.retain(AttachedFrontEnds(frontEnds: attached), on: .frontEndsAttached)
        case .knock(let knock):
            let (driver, address) = (self.driver, configuration.gatewayAddress)
            addJob.yield {
                var answer = GatewayKnock.Answer.silent
                if let address {
                    answer = await GatewayKnock.knock(host: address.host, port: address.port, timeout: TimeAmount(knock.timeout))
                }
                driver.send(.knockAnswered(answer, knock))
            }
        case .checkCredential:
            let (driver, credential) = (self.driver, configuration.credential)
            addJob.yield { driver.send(.credentialChecked(token: try? await credential.read())) }
        case .storeDeviceToken(let token):
            do {
                try configuration.deviceKeys.storeDeviceToken(token, url: configuration.url)
            } catch {
                logger.warning("cannot keep the device token the gateway issued", metadata: ["connection.error": "\(error)"])
            }
        case .forgetDeviceToken:
            configuration.deviceKeys.forgetDeviceToken(url: configuration.url)
        case .log(let level, let message, let metadata):
            logger.log(level: level, "\(message)", metadata: metadata.mapValues { .string($0) })
        case .finished:
            finish.yield()
        }
    }

    /// Ends every attempt's I/O: the service is done.
    func endAll() {
        for attempt in attempts.values { attempt.task.cancel() }
        attempts = [:]
    }

    // MARK: An attempt

    /// Reads what an attempt needs: the token, and for OpenClaw the device key and the
    /// device token the gateway issued.
    private static func prepare(_ configuration: ConnectionConfiguration) async -> Report {
        let token: String
        do {
            token = try await configuration.credential.read()
        } catch {
            return .credentialUnreadable("\(error)")
        }
        var identity: DeviceIdentity?
        if configuration.dialect != .seed {
            do {
                identity = try configuration.deviceKeys.identity()
            } catch {
                return .deviceKeyUnusable("\(error)", token: token)
            }
        }
        return .prepared(token: token, identity: identity, deviceToken: configuration.deviceKeys.deviceToken(url: configuration.url))
    }

    /// Opens the WebSocket and reports each step: upgraded, every text message, the end.
    private func runSocket(_ id: Int, token: String, authorize: Bool) async {
        var headers = HTTPHeaders()
        if authorize { headers.add(name: "Authorization", value: "Bearer \(token)") }
        let (driver, configuration, logger) = (self.driver, self.configuration, self.logger)
        let (outgoing, continuation) = AsyncStream<Outgoing>.makeStream()
        let report: Report
        do {
            // Each text message goes to the machine from the task reading the socket.
            let closeFrame = try await GatewaySocket.connect(
                url: configuration.url, headers: headers, tls: configuration.tlsConfiguration, maximumMessageSize: configuration.maximumFrameSize,
                deadline: configuration.upgradeDeadline, receiveText: { driver.send(.attempt(id, .text($0, date: Date()))) },
                opened: { connection in
                    await self.opened(id, connection: connection, outgoing: continuation)
                    driver.send(.attempt(id, .upgraded))
                }
            ) { connection in
                // Writes until the connection ends.
                await withDiscardingTaskGroup { group in
                    group.addTask { await Self.write(outgoing, on: connection, logger: logger) }
                    for await _ in connection.messages {}
                    group.cancelAll()
                }
            }
            report = .ended(closeFrame)
        } catch let error as GatewaySocketError where error.code == .upgradeRefused {
            // The upgrade was refused: ask the same URL why.
            var status: Int?
            if !Task.isCancelled { status = try? await HTTPStatusProbe.status(url: configuration.url, token: token, tls: configuration.tlsConfiguration) }
            report = .upgradeRefused(httpStatus: status)
        } catch {
            report = .failed(error)
        }
        if !Task.isCancelled { driver.send(.attempt(id, report)) }
    }

    private func opened(_ id: Int, connection: GatewayConnection, outgoing: AsyncStream<Outgoing>.Continuation) {
        attempts[id]?.connection = connection
        attempts[id]?.outgoing = outgoing
    }

    /// Writes what the machine asked, in order, until the connection ends.
    private static func write(_ outgoing: AsyncStream<Outgoing>, on connection: GatewayConnection, logger: Logger) async {
        for await item in outgoing {
            switch item {
            case .text(let text):
                do {
                    try await connection.write(text: text)
                } catch {
                    logger.warning("cannot write a frame", metadata: ["connection.error": "\(error)"])
                }
            case .close:
                try? await connection.close(.normalClosure, reason: "closing")
            }
        }
    }
}
