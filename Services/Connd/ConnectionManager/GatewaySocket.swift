import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization

/// Why a WebSocket to the gateway could not be opened or ended badly.
struct GatewaySocketError: Error, CustomStringConvertible, Equatable {
    enum Code: Equatable {
        /// The URL is not a ws:// or wss:// URL with a host.
        case invalidURL
        /// The gateway answered the upgrade request without switching protocols.
        case upgradeRefused
        /// A message from the gateway was larger than the largest accepted.
        case messageTooLarge(limit: Int)
        /// A text message from the gateway was not UTF-8.
        case invalidText
    }

    let code: Code

    var description: String {
        switch code {
        case .invalidURL: "not a ws:// or wss:// URL with a host"
        case .upgradeRefused: "the gateway refused the WebSocket upgrade"
        case .messageTooLarge(let limit): "a message from the gateway was over \(limit) bytes"
        case .invalidText: "a text message from the gateway was not UTF-8"
        }
    }
}

/// A close frame: the code and the reason given.
struct GatewayCloseFrame: Sendable, Equatable {
    var code: WebSocketErrorCode
    var reason: String?

    /// 1012 "service restart": the gateway is restarting.
    var isServiceRestart: Bool { code == WebSocketErrorCode(codeNumber: 1012) }
}

/// A WebSocket client connection to the gateway, on SwiftNIO.
///
/// Written for connd rather than taken from a WebSocket library because connd must own
/// the socket's whole life: the socket is closed when the task is cancelled during the
/// upgrade (connd gives an upgrade up at its deadline) or the gateway refuses the upgrade (a
/// refused upgrade must not leave a socket in CLOSE-WAIT), and pings and pongs are connd's,
/// for the heartbeat.
enum GatewaySocket {
    /// Connects (the TCP connect given up after `deadline`), upgrades to a WebSocket and runs
    /// `session` with the open connection; returns the gateway's close frame, or nil when the
    /// connection ended without one (it dropped, or the session aborted it). Cancelling the
    /// task closes the socket, during the upgrade as after it.
    ///
    /// With `receiveText`, each text message goes to it from the task reading the socket, in
    /// order, and not to the connection's `messages`: one hand-off fewer for every frame of a
    /// streamed reply. `opened` runs before the first message is read, so that what it says
    /// of the open connection comes before them.
    static func connect(
        url: String, headers: HTTPHeaders, tls: TLSConfiguration?, maximumMessageSize: Int, deadline: Duration,
        receiveText: (@Sendable (String) -> Void)? = nil, opened: @Sendable (GatewayConnection) async -> Void = { _ in },
        session: @Sendable (GatewayConnection) async throws -> Void
    ) async throws -> GatewayCloseFrame? {
        guard let components = URLComponents(string: url), let host = components.host, let scheme = components.scheme,
            scheme == "ws" || scheme == "wss"
        else { throw GatewaySocketError(code: .invalidURL) }
        let secure = scheme == "wss"
        let port = components.port ?? (secure ? 443 : 80)
        let path = (components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath) + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
        let sslContext = try tls.map { try NIOSSLContext(configuration: $0) }
        var requestHeaders = headers
        requestHeaders.replaceOrAdd(name: "Host", value: components.port.map { "\(host):\($0)" } ?? host)
        let requestHead = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: requestHeaders)

        // The channel, once there is one, so that cancelling the task can close it.
        let openChannel = Mutex<(any Channel)?>(nil)
        let timeout = TimeAmount.nanoseconds(Int64(deadline.components.seconds) * 1_000_000_000 + deadline.components.attoseconds / 1_000_000_000)
        let upgrade: EventLoopFuture<UpgradeResult> = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .connect(host: host, port: port) { channel in
                openChannel.withLock { $0 = channel }
                return channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: host))
                    }
                    let upgrader = NIOTypedWebSocketClientUpgrader<UpgradeResult>(maxFrameSize: maximumMessageSize) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            .webSocket(try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(wrappingChannelSynchronously: channel))
                        }
                    }
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration(upgradeRequestHead: requestHead, upgraders: [upgrader]) { channel in
                        channel.eventLoop.makeSucceededFuture(.notUpgraded)
                    }
                    var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                    // What the gateway writes right after the 101 can arrive in the same read as the
                    // response (a gateway's first frame usually does): it is the WebSocket's first
                    // bytes, handed on to the frame decoder, never dropped with the HTTP decoder.
                    pipeline.leftOverBytesStrategy = .forwardBytes
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
                }
            }
        let channel = openChannel.withLock { $0 }
        // Whatever happens from here, the socket is closed before this returns or throws.
        let result: UpgradeResult
        do {
            result = try await withTaskCancellationHandler {
                try await upgrade.get()
            } onCancel: {
                channel?.close(promise: nil)
            }
        } catch {
            channel?.close(promise: nil)
            throw error
        }
        switch result {
        case .notUpgraded:
            channel?.close(promise: nil)
            throw GatewaySocketError(code: .upgradeRefused)
        case .webSocket(let webSocket):
            return try await withTaskCancellationHandler {
                try await webSocket.executeThenClose { inbound, outbound in
                    let connection = GatewayConnection(
                        channel: webSocket.channel, outbound: outbound, maximumMessageSize: maximumMessageSize, receiveText: receiveText)
                    await opened(connection)
                    return try await connection.run(inbound: inbound, session: session)
                }
            } onCancel: {
                channel?.close(promise: nil)
            }
        }
    }

    enum UpgradeResult: Sendable {
        case webSocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case notUpgraded
    }
}

/// What the session reads from an open connection.
enum GatewayInbound: Sendable, Equatable {
    /// A text message from the gateway.
    case text(String)
    /// A wake-up the session asked for with ``GatewayConnection/wake(after:)``.
    case wake
}

/// An open WebSocket to the gateway: text messages out, pings, the close; read by
/// ``GatewaySocket``, which hands each text message to its receiver when it was given one,
/// else to the session's `messages`.
final class GatewayConnection: Sendable {
    private let channel: any Channel
    private let outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>
    private let maximumMessageSize: Int
    /// Where text messages go instead of `messages`, when given.
    private let receiveText: (@Sendable (String) -> Void)?
    private let state = Mutex(State())
    private let (incoming, incomingContinuation) = AsyncStream<GatewayInbound>.makeStream()

    private struct State {
        /// The data of the ping sent last, until its pong comes.
        var pingAwaitingPong: ByteBuffer?
        /// When that ping was sent, or last found answered by other frames.
        var pingSentAt = ContinuousClock.now
        /// This side sent a close frame.
        var closing = false
        /// When the gateway was last heard from: any frame, a pong included.
        var heardAt = ContinuousClock.now
    }

    init(
        channel: any Channel, outbound: NIOAsyncChannelOutboundWriter<WebSocketFrame>, maximumMessageSize: Int,
        receiveText: (@Sendable (String) -> Void)? = nil
    ) {
        self.channel = channel
        self.outbound = outbound
        self.maximumMessageSize = maximumMessageSize
        self.receiveText = receiveText
    }

    /// The text messages from the gateway (unless they go to a receiver of their own), and
    /// the wake-ups asked for, until the connection ends.
    var messages: AsyncStream<GatewayInbound> { incoming }

    /// When the gateway was last heard from (any frame).
    var heardAt: ContinuousClock.Instant { state.withLock { $0.heardAt } }

    /// Puts a ``GatewayInbound/wake`` among the messages after `delay`, so that a session
    /// reading them can give up waiting.
    func wake(after delay: Duration) {
        let continuation = incomingContinuation
        Task {
            try? await Task.sleep(for: delay)
            continuation.yield(.wake)
        }
    }

    /// Writes a text message.
    func write(text: String) async throws {
        try await outbound.write(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text)))
    }

    /// Sends a close frame; the connection ends when the gateway answers it (or the socket closes).
    func close(_ code: WebSocketErrorCode = .normalClosure, reason: String? = nil) async throws {
        guard
            state.withLock({ state in
                defer { state.closing = true }
                return !state.closing
            })
        else { return }
        var data = ByteBuffer()
        data.write(webSocketErrorCode: code)
        if let reason { data.writeString(reason) }
        try await outbound.write(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data))
    }

    /// Closes the socket without a close frame (a gateway that does not answer would not read one).
    func abort() {
        channel.close(promise: nil)
    }

    /// Sends a ping; false when the one before it is still without its pong and nothing else
    /// came since it was sent (the gateway is not answering), and then sends nothing. A
    /// gateway streaming faster than this side reads answers behind its own frames: every
    /// frame heard since the ping shows it alive, and the pong is awaited still.
    func ping() async throws -> Bool {
        enum Step { case send, stillAwaited, unanswered }
        var data = ByteBuffer()
        data.writeInteger(UInt64.random(in: .min ... .max))
        let now = ContinuousClock.now
        let step = state.withLock { state -> Step in
            if state.pingAwaitingPong == nil {
                state.pingAwaitingPong = data
                state.pingSentAt = now
                return .send
            }
            guard state.heardAt > state.pingSentAt else { return .unanswered }
            state.pingSentAt = now
            return .stillAwaited
        }
        switch step {
        case .send:
            try await outbound.write(WebSocketFrame(fin: true, opcode: .ping, maskKey: .random(), data: data))
            return true
        case .stillAwaited:
            return true
        case .unanswered:
            return false
        }
    }

    /// Reads frames until the connection ends, while `session` runs; returns the gateway's close frame.
    func run(
        inbound: NIOAsyncChannelInboundStream<WebSocketFrame>, session: @Sendable (GatewayConnection) async throws -> Void
    ) async throws -> GatewayCloseFrame? {
        try await withThrowingTaskGroup(of: GatewayCloseFrame?.self) { group in
            group.addTask {
                defer { self.incomingContinuation.finish() }
                return try await self.read(inbound)
            }
            // The session ends when the messages end, or on its own: then the connection is closed.
            try await session(self)
            if !state.withLock({ $0.closing }) { abort() }
            let close = try await group.next() ?? nil
            group.cancelAll()
            return close
        }
    }

    private func read(_ inbound: NIOAsyncChannelInboundStream<WebSocketFrame>) async throws -> GatewayCloseFrame? {
        var message = ByteBuffer()
        var messageIsText: Bool?
        for try await frame in inbound {
            state.withLock { $0.heardAt = .now }
            switch frame.opcode {
            case .text, .binary, .continuation:
                if frame.opcode != .continuation { messageIsText = frame.opcode == .text }
                var data = frame.unmaskedData
                guard message.readableBytes + data.readableBytes <= maximumMessageSize else {
                    try? await close(.messageTooLarge, reason: "message too large")
                    throw GatewaySocketError(code: .messageTooLarge(limit: maximumMessageSize))
                }
                message.writeBuffer(&data)
                guard frame.fin else { continue }
                defer {
                    message.clear()
                    messageIsText = nil
                }
                // Binary messages are not part of the protocol: ignored.
                guard messageIsText == true else { continue }
                guard let text = String(validating: message.readableBytesView, as: UTF8.self) else {
                    try? await close(.dataInconsistentWithMessage, reason: "text is not UTF-8")
                    throw GatewaySocketError(code: .invalidText)
                }
                if let receiveText { receiveText(text) } else { incomingContinuation.yield(.text(text)) }
            case .ping:
                try await outbound.write(WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData))
            case .pong:
                state.withLock { state in
                    if state.pingAwaitingPong == frame.unmaskedData { state.pingAwaitingPong = nil }
                }
            case .connectionClose:
                var data = frame.unmaskedData
                let code = data.readWebSocketErrorCode() ?? .normalClosure
                let reason = data.readString(length: data.readableBytes).flatMap { $0.isEmpty ? nil : $0 }
                // Answer a close the gateway began (one this side began is answered now), then
                // close the socket: the client closes once the close handshake is done.
                try? await close(code)
                abort()
                return GatewayCloseFrame(code: code, reason: reason)
            default:
                break
            }
        }
        return nil
    }
}
