import Foundation
import HTTPTypes
public import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
public import Logging
import NIOCore
import NIOSSL
import NIOWebSocket
import Synchronization
import TetherHTTPServer
import TetherWire

/// How the development gateway runs.
public struct GatewayConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port; the chosen one is logged and written to `portFile`.
    public var port: Int
    /// The bearer token clients must present.
    public var token: String
    /// Where to append every chat message received, one JSON object a line.
    public var recordPath: String?
    /// Where to write the port once listening.
    public var portFile: String?
    /// The bot's name.
    public var botName: String
    /// The pause between streamed chunks.
    public var chunkDelay: Duration
    /// The faults in force at start.
    public var faults: GatewayFaults
    /// A certificate chain and private key (PEM files) to serve wss:// and https://.
    public var tls: (certificate: String, key: String)?
    /// The OpenClaw dialect's settings; nil speaks the seed dialect.
    public var openClaw: OpenClawGatewaySettings?

    public init(
        host: String = "127.0.0.1", port: Int = 8765, token: String, recordPath: String? = nil, portFile: String? = nil,
        botName: String = "Opta", chunkDelay: Duration = .milliseconds(20), faults: GatewayFaults = GatewayFaults(),
        tls: (certificate: String, key: String)? = nil, openClaw: OpenClawGatewaySettings? = nil
    ) {
        self.openClaw = openClaw
        self.host = host
        self.port = port
        self.token = token
        self.recordPath = recordPath
        self.portFile = portFile
        self.botName = botName
        self.chunkDelay = chunkDelay
        self.faults = faults
        self.tls = tls
    }
}

/// A gateway that speaks the wire protocol: WebSocket at `/ws` with bearer-token auth, a
/// demo bot, and the record of every chat message it received at `GET /record`.
public enum DevGateway {
    /// The path of the WebSocket endpoint.
    public static let webSocketPath = "/ws"

    /// Builds the gateway application.
    public static func makeApplication(configuration: GatewayConfiguration, logger: Logger) throws -> some ApplicationProtocol {
        let record = try GatewayRecord(path: configuration.recordPath)
        let bot = DemoBot(name: configuration.botName, chunkDelay: configuration.chunkDelay)
        let faults = FaultSwitch(configuration.faults)
        let conversation = GatewayConversation(bot: bot, record: record, faults: faults, logger: logger)
        let connections = Atomic<Int>(0)
        let token = configuration.token
        let openClaw = try configuration.openClaw.map { settings in
            try OpenClawGateway(settings: settings, token: token, bot: bot, record: record, faults: faults, logger: logger)
        }
        if let openClaw, let interval = configuration.openClaw?.tickInterval {
            Task {
                while (try? await Task.sleep(for: interval)) != nil { await openClaw.tick() }
            }
        }
        let authorized: @Sendable (HTTPFields) -> Bool = { headers in
            !faults.current.rejectToken && Self.isAuthorized(headers, token: token)
        }

        let router = Router()
        router.get("/health") { _, _ in "ok\n" }
        router.get("/record") { request, _ -> Response in
            guard authorized(request.headers) else { return Self.unauthorized() }
            return Self.json(try JSONEncoder.gateway.encode(await record.all()))
        }
        router.post("/admin/restart") { request, _ -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            guard let openClaw else { return Response(status: .notFound) }
            // As `openclaw gateway restart`: answered at once, the restart follows.
            Task { await openClaw.restart() }
            return Response(status: .accepted)
        }
        router.get("/admin/faults") { request, _ -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            return Self.json(try JSONEncoder.gateway.encode(faults.current))
        }
        router.post("/admin/faults") { request, context -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            let body = try await request.body.collect(upTo: 64 * 1024)
            let updated: GatewayFaults
            do {
                updated = try GatewayFaults.decode(Data(body.readableBytesView), over: faults.current)
            } catch {
                return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "not a set of faults: \(error)\n")))
            }
            faults.set(updated)
            context.logger.notice("faults changed", metadata: ["gateway.faults": "\(updated)"])
            return Self.json(try JSONEncoder.gateway.encode(updated))
        }
        router.post("/admin/devices/approve") { request, _ -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            guard let openClaw else {
                return Response(status: .notFound, body: .init(byteBuffer: ByteBuffer(string: "pairing is part of the OpenClaw dialect\n")))
            }
            let body = try await request.body.collect(upTo: 4096)
            guard let requestID = (try? JSONDecoder().decode([String: String].self, from: Data(body.readableBytesView)))?["requestId"] else {
                return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "expected {\"requestId\": \"…\"}\n")))
            }
            guard let device = await openClaw.approve(requestID: requestID) else {
                return Response(status: .notFound, body: .init(byteBuffer: ByteBuffer(string: "no pending pairing request \(requestID)\n")))
            }
            return Self.json(try JSONEncoder.gateway.encode(["deviceId": device]))
        }
        router.get("/admin/devices") { request, _ -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            guard let openClaw else { return Response(status: .notFound) }
            let (pending, paired) = await openClaw.deviceList()
            return Self.json(try JSONEncoder.gateway.encode(DeviceListing(pending: pending, paired: paired)))
        }
        router.post("/admin/token") { request, _ -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            guard let openClaw else { return Response(status: .notFound) }
            let body = try await request.body.collect(upTo: 4096)
            guard let newToken = (try? JSONDecoder().decode([String: String].self, from: Data(body.readableBytesView)))?["token"], !newToken.isEmpty else {
                return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "expected {\"token\": \"…\"}\n")))
            }
            await openClaw.rotateToken(newToken)
            return Response(status: .noContent)
        }
        router.post("/admin/forget-keys") { request, context -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            guard let openClaw else { return Response(status: .notFound) }
            await openClaw.forgetIdempotencyKeys()
            context.logger.notice("idempotency keys forgotten")
            return Response(status: .noContent)
        }
        router.delete("/admin/faults") { request, context -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            faults.set(GatewayFaults())
            context.logger.notice("faults cleared")
            return Self.json(try JSONEncoder.gateway.encode(GatewayFaults()))
        }
        // A plain request to the WebSocket path lands here: say why it is not upgraded.
        router.get(RouterPath(webSocketPath)) { request, _ -> Response in
            guard authorized(request.headers) else { return Self.unauthorized() }
            if faults.current.refuseConnections {
                return Response(status: .serviceUnavailable, body: .init(byteBuffer: ByteBuffer(string: "refusing connections (fault injection)\n")))
            }
            return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "WebSocket upgrade required\n")))
        }

        let onUpgrade: @Sendable (WebSocketInboundStream, WebSocketOutboundWriter, any Channel, Logger) async throws -> Void = {
            inbound, outbound, channel, logger in
            let connection = connections.wrappingAdd(1, ordering: .relaxed).newValue
            let dropFraction = faults.current.dropConnectionFraction
            if dropFraction > 0 && Double.random(in: 0..<1) < dropFraction {
                logger.notice("dropped a new connection (fault injection)", metadata: ["gateway.connection": "\(connection)"])
                return
            }
            faults.register(channel)
            defer { faults.unregister(channel) }
            let link = GatewayLink(connection: connection, outbound: outbound, faults: faults)
            await conversation.attach(link)
            logger.info("client connected", metadata: ["gateway.connection": "\(connection)"])
            if faults.current.greetOnOpen { await conversation.greet() }
            do {
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    guard case .text(let text) = message else {
                        logger.warning("ignored a binary frame", metadata: ["gateway.connection": "\(connection)"])
                        continue
                    }
                    try await conversation.handle(text, from: link)
                }
            } catch {
                logger.info("connection ended", metadata: ["gateway.connection": "\(connection)", "gateway.error": "\(error)"])
            }
            await conversation.detach(link)
            logger.info("client disconnected", metadata: ["gateway.connection": "\(connection)"])
        }
        // The OpenClaw dialect: any path upgrades, and auth is in the handshake.
        let onOpenClawUpgrade: @Sendable (OpenClawGateway, WebSocketInboundStream, WebSocketOutboundWriter, any Channel, Logger) async throws -> Void = {
            gateway, inbound, outbound, channel, logger in
            let connection = connections.wrappingAdd(1, ordering: .relaxed).newValue
            faults.register(channel)
            defer { faults.unregister(channel) }
            let link = OpenClawClientConnection(connection: connection, outbound: outbound, faults: faults)
            await gateway.opened(link)
            var ended: (any Error)?
            let maximumPayload = configuration.openClaw?.maximumPayload ?? 1 << 20
            do {
                // The stream checks a message of several frames against maxPayload, not one of a
                // single frame (read whole up to the frame limit): that one is checked here.
                for try await message in inbound.messages(maxSize: maximumPayload) {
                    let text: String
                    switch message {
                    case .text(let value): text = value
                    case .binary(let buffer): text = String(buffer: buffer)
                    }
                    guard text.utf8.count <= maximumPayload else {
                        logger.info(
                            "closed: a message over maxPayload", metadata: ["gateway.connection": "\(connection)", "gateway.bytes": "\(text.utf8.count)"])
                        try? await outbound.close(.messageTooLarge, reason: nil)
                        break
                    }
                    await gateway.handle(text, from: link)
                }
            } catch {
                logger.info("connection ended", metadata: ["gateway.connection": "\(connection)", "gateway.error": "\(error)"])
                ended = error
            }
            await gateway.closed(link)
            logger.info("client disconnected", metadata: ["gateway.connection": "\(connection)"])
            // Thrown on, the stream's error closes the connection with its code: a message over
            // maxPayload with 1009, as OpenClaw's gateway closes it.
            if let ended { throw ended }
        }
        // OpenClaw's gateway reads and drops the rest of a message over maxPayload, so its client
        // sees the 1009; a frame read whole up to twice maxPayload is refused the same way here
        // (a larger one is cut off as it arrives, and its writer may see a reset instead).
        let maximumFrame = configuration.openClaw.map { 2 * $0.maximumPayload } ?? 1 << 20
        let webSocketConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(ws: .init(maxFrameSize: maximumFrame))
        let plainServer = HTTPServerBuilder.http1WebSocketUpgrade(configuration: webSocketConfiguration) { request, channel, _ in
            if let openClaw {
                guard !faults.current.refuseConnections else { return .dontUpgrade }
                // As the real gateway: the challenge can come in the same read as the 101.
                try channel.pipeline.syncOperations.addHandler(UpgradeCoalescer(frames: 1), position: .first)
                return .upgrade([:]) { inbound, outbound, context in
                    try await onOpenClawUpgrade(openClaw, inbound, outbound, channel, context.logger)
                }
            }
            guard request.path == webSocketPath, authorized(request.headerFields), !faults.current.refuseConnections else {
                return .dontUpgrade
            }
            if faults.current.greetOnOpen {
                try channel.pipeline.syncOperations.addHandler(UpgradeCoalescer(frames: GatewayConversation.greetingFrames), position: .first)
            }
            return .upgrade([:]) { inbound, outbound, context in
                try await onUpgrade(inbound, outbound, channel, context.logger)
            }
        }

        // Before any event loop thread sets up a connection: see ChildChannelWarmUp.
        ChildChannelWarmUp.run(logger: logger) { $0 }

        let portFile = configuration.portFile
        let scheme = configuration.tls == nil ? "ws" : "wss"
        let server: HTTPServerBuilder
        if let tls = configuration.tls {
            let tlsConfiguration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(tls.certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: tls.key, format: .pem)))
            server = try .tls(plainServer, tlsConfiguration: tlsConfiguration)
        } else {
            server = plainServer
        }
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "tether-gateway"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                logger.info("gateway listening", metadata: ["gateway.url": "\(scheme)://\(configuration.host):\(port)\(webSocketPath)"])
                if let portFile {
                    try? "\(port)\n".write(toFile: portFile, atomically: true, encoding: .utf8)
                }
            },
            logger: logger
        )
    }

    struct DeviceListing: Encodable {
        /// Pending pairing requests: request id to device id.
        var pending: [String: String]
        var paired: [String]
    }

    static func json(_ data: Data) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func isAuthorized(_ headers: HTTPFields, token: String) -> Bool {
        guard let value = headers[.authorization], value.hasPrefix("Bearer ") else { return false }
        return constantTimeEquals(Array(value.dropFirst("Bearer ".count).utf8), Array(token.utf8))
    }

    static func unauthorized() -> Response {
        Response(
            status: .unauthorized,
            headers: [.wwwAuthenticate: "Bearer"],
            body: .init(byteBuffer: ByteBuffer(string: "invalid or missing bearer token\n")))
    }

    /// Compares without leaking, through timing, how much of a guess was right.
    static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }
}
