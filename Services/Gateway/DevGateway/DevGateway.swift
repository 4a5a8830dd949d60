import Foundation
import HTTPTypes
public import Hummingbird
import HummingbirdWebSocket
public import Logging
import NIOCore
import Synchronization
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

    public init(
        host: String = "127.0.0.1", port: Int = 8765, token: String, recordPath: String? = nil, portFile: String? = nil,
        botName: String = "Opta", chunkDelay: Duration = .milliseconds(20)
    ) {
        self.host = host
        self.port = port
        self.token = token
        self.recordPath = recordPath
        self.portFile = portFile
        self.botName = botName
        self.chunkDelay = chunkDelay
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
        let connections = Atomic<Int>(0)
        let token = configuration.token

        let router = Router()
        router.get("/health") { _, _ in "ok\n" }
        router.get("/record") { request, _ -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            let body = try JSONEncoder.gateway.encode(await record.all())
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
        // An upgrade the WebSocket router refused lands here: say why.
        router.get(RouterPath(webSocketPath)) { request, _ -> Response in
            guard Self.isAuthorized(request.headers, token: token) else { return Self.unauthorized() }
            return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "WebSocket upgrade required\n")))
        }

        let webSocketRouter = Router(context: BasicWebSocketRequestContext.self)
        webSocketRouter.ws(RouterPath(webSocketPath)) { request, _ in
            Self.isAuthorized(request.headers, token: token) ? .upgrade([:]) : .dontUpgrade
        } onUpgrade: { inbound, outbound, context in
            let connection = connections.wrappingAdd(1, ordering: .relaxed).newValue
            var session = GatewaySession(connection: connection, bot: bot, record: record, outbound: outbound, logger: context.logger)
            context.logger.info("client connected", metadata: ["gateway.connection": "\(connection)"])
            for try await message in inbound.messages(maxSize: 1 << 20) {
                guard case .text(let text) = message else {
                    context.logger.warning("ignored a binary frame", metadata: ["gateway.connection": "\(connection)"])
                    continue
                }
                try await session.handle(text)
            }
            context.logger.info("client disconnected", metadata: ["gateway.connection": "\(connection)"])
        }

        let portFile = configuration.portFile
        return Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: webSocketRouter, configuration: .init(ws: .init(maxFrameSize: 1 << 20))),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "tether-gateway"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                logger.info("gateway listening", metadata: ["gateway.url": "ws://\(configuration.host):\(port)\(webSocketPath)"])
                if let portFile {
                    try? "\(port)\n".write(toFile: portFile, atomically: true, encoding: .utf8)
                }
            },
            logger: logger
        )
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
