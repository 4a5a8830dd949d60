public import HummingbirdCore
public import Logging
public import NIOCore
import NIOHTTP1

/// What makes a request's head unanswerable before ``WebAccess`` looks at it: hummingbird's
/// request keeps the first `Host` and only the path of the request target, so two `Host`
/// headers, or a target in absolute form (`GET http://other.example/`, whose authority HTTP
/// says overrides `Host`), would reach the access check looking like a request for this server.
public enum RequestTargetCheck {
    /// Why a request head is refused (400), in words; nil when it may go on to ``WebAccess``.
    /// - Parameters:
    ///   - target: the request target as the request line has it.
    ///   - hostHeaders: how many `Host` headers the request carries.
    public static func problem(target: String, hostHeaders: Int) -> String? {
        if !target.hasPrefix("/") {
            return "tether-web answers only a path as the request target (origin form), not \(target.prefix(80)): it is not a proxy"
        }
        if hostHeaders > 1 { return "a request names one Host, not \(hostHeaders)" }
        return nil
    }
}

/// Applies ``RequestTargetCheck`` to every request head, between NIO's HTTP decoder and
/// everything else: a refused request is answered 400 in words and its connection closed.
/// Once a WebSocket upgrade's head has passed, the connection is the upgrade's (or closed, if
/// it fails): what follows is passed on as it comes.
final class RequestTargetGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        case checking
        /// A refused request's body is dropped until the connection is closed.
        case refused
        /// An upgrade's head went on: the rest is no longer HTTP.
        case passing
    }

    private var state = State.checking
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .passing:
            context.fireChannelRead(data)
        case .refused:
            return
        case .checking:
            guard case .head(let head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
            if let problem = RequestTargetCheck.problem(target: head.uri, hostHeaders: head.headers["Host"].count) {
                state = .refused
                logger.warning("refused a request", metadata: ["web.status": "400", "web.reason": "\(problem)"])
                refuse(problem, context: context)
                return
            }
            if Self.isWebSocketUpgrade(head) { state = .passing }
            context.fireChannelRead(data)
        }
    }

    /// The head NIO's WebSocket upgrader acts on: it then upgrades, or fails and closes.
    private static func isWebSocketUpgrade(_ head: HTTPRequestHead) -> Bool {
        head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
            && head.headers["upgrade"].contains { $0.lowercased() == "websocket" }
            && !head.headers["sec-websocket-key"].isEmpty && head.headers["sec-websocket-version"] == ["13"]
    }

    private func refuse(_ words: String, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(words.utf8.count + 1)")
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: words + "\n")))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }
}

/// A server child channel with ``RequestTargetGuard`` right after NIO's HTTP request decoder.
struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    let inner: Inner

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Inner.Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(RequestTargetGuard(logger: logger), position: .after(decoder))
            return value
        }
    }

    func handle(value: Inner.Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}
