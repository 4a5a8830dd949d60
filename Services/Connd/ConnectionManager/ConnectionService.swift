import Foundation
import HTTPTypes
public import Logging
import NIOCore
import Synchronization
public import ServiceLifecycle
public import TetherBus
public import TetherSchema
import TetherService
import WSClient

/// How connd reaches the gateway.
public struct ConnectionConfiguration: Sendable {
    /// `ws://` or `wss://` URL of the gateway's WebSocket endpoint.
    public var url: String
    /// The bearer token. Never published, logged or written.
    public var token: String
    public var backoff: Backoff
    /// The largest frame accepted from the gateway.
    public var maximumFrameSize: Int

    public init(url: String, token: String, backoff: Backoff = Backoff(), maximumFrameSize: Int = 1 << 20) {
        self.url = url
        self.token = token
        self.backoff = backoff
        self.maximumFrameSize = maximumFrameSize
    }
}

/// Keeps a WebSocket to the gateway open and carries frames between it and the bus:
/// inbound frames to `wire.in`, `wire.out` frames to the gateway; publishes the connection
/// state (retained) on `conn.state`; reconnects with backoff when the connection drops.
public struct ConnectionService: Service {
    private let bus: BusClient
    private let configuration: ConnectionConfiguration
    private let logger: Logger
    private let link = ConnectionLink()
    private let phase: ConnectionPhaseBox

    /// - Parameter phase: where the current phase is kept for the heartbeat to read.
    public init(bus: BusClient, configuration: ConnectionConfiguration, phase: ConnectionPhaseBox = ConnectionPhaseBox(), logger: Logger) {
        self.bus = bus
        self.configuration = configuration
        self.phase = phase
        self.logger = logger
    }

    public func run() async throws {
        let outbound = try await bus.subscribe(to: [Topic.wireOutbound.name])
        await withDiscardingTaskGroup { group in
            group.addTask { await forwardOutbound(outbound) }
            // Shutdown cancels the open connection, which closes it.
            await cancelWhenGracefulShutdown { await maintainConnection() }
            group.cancelAll()
        }
        publish(ConnectionStatus(phase: .disconnected, url: configuration.url, epoch: link.epoch))
    }

    /// Connects, and reconnects after each drop, until shutdown.
    private func maintainConnection() async {
        var attempt = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            attempt += 1
            publish(ConnectionStatus(phase: link.epoch == 0 ? .connecting : .reconnecting, url: configuration.url, epoch: link.epoch, attempt: attempt, lastError: link.lastError))
            let connected = await connectOnce()
            if connected { attempt = 0 }
            guard !Task.isCancelled && !Task.isShuttingDownGracefully else { return }
            let delay = configuration.backoff.delay(forAttempt: max(attempt, 1))
            publish(ConnectionStatus(
                phase: .reconnecting, url: configuration.url, epoch: link.epoch, attempt: attempt + 1,
                nextAttemptAt: Date().addingTimeInterval(delay.inSeconds), lastError: link.lastError))
            logger.info("reconnecting", metadata: ["connection.delay": "\(delay)", "connection.error": "\(link.lastError ?? "")"])
            do {
                try await Task.sleep(for: delay)
            } catch {
                return
            }
        }
    }

    /// One connection, from the attempt to its end; true when it was established.
    private func connectOnce() async -> Bool {
        var headers = HTTPFields()
        headers[.authorization] = "Bearer \(configuration.token)"
        let clientConfiguration = WebSocketClientConfiguration(maxFrameSize: configuration.maximumFrameSize, additionalHeaders: headers)
        let link = self.link
        let url = configuration.url
        let logger = self.logger
        do {
            let closeFrame = try await WebSocketClient.connect(url: url, configuration: clientConfiguration, logger: logger) {
                inbound, outbound, _ in
                let epoch = link.open(outbound)
                defer { link.close(epoch: epoch) }
                logger.info("connected", metadata: ["connection.epoch": "\(epoch)", "connection.url": "\(url)"])
                publish(ConnectionStatus(phase: .connected, url: url, epoch: epoch))
                for try await message in inbound.messages(maxSize: configuration.maximumFrameSize) {
                    guard case .text(let text) = message else {
                        logger.warning("ignored a binary frame from the gateway")
                        continue
                    }
                    do {
                        try bus.publish(WireFrame(epoch: epoch, text: text), on: .wireInbound)
                    } catch {
                        logger.warning("cannot publish an inbound frame", metadata: ["connection.error": "\(error)"])
                    }
                }
            }
            let wasOpen = link.wasOpened
            link.lastError = closeFrame.map { "the gateway closed the connection (\($0.closeCode))" } ?? "the connection closed"
            return wasOpen
        } catch {
            let wasOpen = link.wasOpened
            if Task.isCancelled {
                logger.info("connection closed for shutdown")
                return wasOpen
            }
            link.lastError = Self.describe(error, url: url)
            logger.warning("connection failed", metadata: ["connection.error": "\(link.lastError ?? "")"])
            return wasOpen
        }
    }

    /// Writes `wire.out` frames to the open connection; frames for an older connection are dropped.
    private func forwardOutbound(_ subscription: BusSubscription) async {
        for await message in subscription {
            guard let frame = try? message.decode(WireFrame.self) else {
                logger.warning("dropped an unreadable wire.out message", metadata: ["bus.source": "\(message.header.source)"])
                continue
            }
            guard let (epoch, writer) = link.current else {
                logger.debug("not connected: dropped an outbound frame")
                continue
            }
            if let wanted = frame.epoch, wanted != epoch {
                logger.debug("dropped a frame meant for connection \(wanted)", metadata: ["connection.epoch": "\(epoch)"])
                continue
            }
            do {
                try await writer.write(.text(frame.text))
            } catch {
                logger.warning("cannot write a frame", metadata: ["connection.error": "\(error)"])
            }
        }
    }

    private func publish(_ status: ConnectionStatus) {
        phase.value = status.phase
        try? bus.retain(status, on: .connectionState)
    }

    static func describe(_ error: any Error, url: String) -> String {
        if let error = error as? WebSocketClientError, error == .webSocketUpgradeFailed {
            return "the gateway at \(url) refused the WebSocket upgrade (check the token)"
        }
        if let error = error as? IOError {
            return "cannot reach the gateway at \(url): \(error.description)"
        }
        return "cannot connect to \(url): \(error)"
    }
}

/// The connection phase, readable from any task (the heartbeat reads it).
public final class ConnectionPhaseBox: Sendable {
    private let phase = Mutex(ConnectionPhase.disconnected)

    public init() {}

    public var value: ConnectionPhase {
        get { phase.withLock { $0 } }
        set { phase.withLock { $0 = newValue } }
    }

    /// The phase's name.
    public var read: @Sendable () -> String {
        { self.value.rawValue }
    }
}
