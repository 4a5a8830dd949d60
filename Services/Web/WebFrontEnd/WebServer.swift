import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
public import Logging
import NIOCore
import NIOWebSocket
public import ServiceLifecycle
import Synchronization
public import TetherBus
import TetherHTTPServer
import TetherSchema
import TetherService

/// How tether-web listens.
public struct WebConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// The access token pages must present (web.token in the run directory).
    public var token: String
    /// Where the address it listens on is written once it listens (web.url in the run directory).
    public var urlFile: String?

    public init(host: String = "127.0.0.1", port: Int = 8766, token: String, urlFile: String? = nil) {
        self.host = host
        self.port = port
        self.token = token
        self.urlFile = urlFile
    }
}

/// tether-web: one page and a WebSocket that bridges it to the bus, behind ``WebAccess``.
public enum WebServer {
    /// The largest WebSocket frame tether-web reads whole: a message over
    /// ``PageLimits/frameBytes`` and within this is read, then refused (1009). A server that
    /// closes while the page still writes leaves data unread, the close becomes a reset, and
    /// the page would see no 1009, so it would not know its message can never be sent; a page
    /// that keeps to the limits it is told never sends more than `frameBytes`. Twice
    /// `frameBytes` (64 MiB) answers a page that believes in limits up to twice ours, and
    /// bounds what one page can make tether-web hold: one frame at a time, at most this.
    static let frameReadLimit = 2 * PageLimits.standard.frameBytes

    /// The services of tether-web: the web application, and what follows the connection for
    /// a new page's first frame.
    public static func makeServices(configuration: WebConfiguration, bus: any Bus, logger: Logger) throws -> [any Service] {
        let connection = LatestConnection()
        return [
            try makeApplication(configuration: configuration, bus: bus, connection: connection, logger: logger),
            ConnectionFollower(bus: bus, latest: connection),
        ]
    }

    /// The application: under the page's path (``WebAccess/pagePath``) the page with its first
    /// frame, `app.js`, `markdown.js`, `app.css`, `icon.svg`, `access` and the WebSocket `ws`; `/` trades the token.
    static func makeApplication(
        configuration: WebConfiguration, bus: any Bus, connection: LatestConnection, logger: Logger
    ) throws -> some ApplicationProtocol {
        let bridge = WebBridge(bus: bus)
        let pages = PagePresence(bus: bus)
        let script = try asset("app.js")
        let markdown = try asset("markdown.js")
        let style = try asset("app.css")
        let icon = try asset("icon.svg")
        let recovery = try asset("recover.js")
        // Made once (its page path and key are hashes of the token), and again when the port
        // bound is learnt (port 0 asks for any): not for every request.
        let current = Mutex(WebAccess(token: configuration.token, hosts: WebAccess.hosts(listeningOn: configuration.host, port: configuration.port)))
        let access: @Sendable () -> WebAccess = { current.withLock { $0 } }
        let pagePath = access().pagePath
        let renderer = PageRenderer(pagePath: pagePath, pageKey: access().pageKey)
        let limits = PageLimits.standard

        let router = Router(context: BasicWebSocketRequestContext.self)
        router.add(middleware: AccessMiddleware(access: access, renderer: renderer, logger: logger))
        // Everything lives under the page's path; "/" only trades the token (AccessMiddleware).
        let page = router.group(RouterPath(pagePath))
        page.get("/") { _, _ -> Response in
            let frame = await bridge.firstFrame(connection: connection.status)
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: renderer.page(frame))))
        }
        page.get("app.js") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/javascript; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: script)))
        }
        page.get("markdown.js") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/javascript; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: markdown)))
        }
        page.get("app.css") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/css; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: style)))
        }
        page.get("icon.svg") { _, _ in
            Response(status: .ok, headers: [.contentType: "image/svg+xml"], body: .init(byteBuffer: ByteBuffer(string: icon)))
        }
        page.get("recover.js") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/javascript; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: recovery)))
        }
        // Whether this browser still has its key: the page asks when its WebSocket cannot
        // open, and shows the refusal's words instead of trying again for ever.
        page.get("access") { _, _ in Response(status: .noContent) }
        page.ws("ws") { inbound, outbound, context in
            let page = pages.opened()
            defer { pages.closed(page) }
            guard let subscription = try? await bus.subscribe(to: PageMessage.topics, confirm: true) else {
                try await outbound.write(.text(PageMessage.answer(["type": "problem", "message": "the bus is not there: is the set running?"])))
                return
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await message in subscription {
                        if let text = PageMessage.bus(message) { try await outbound.write(.text(text)) }
                    }
                }
                // The stream checks a message of several frames against frameBytes, not one of a
                // single frame (read whole up to frameReadLimit): that one is checked here.
                for try await message in inbound.messages(maxSize: limits.frameBytes) {
                    guard case .text(let text) = message else { continue }
                    guard text.utf8.count <= limits.frameBytes else {
                        context.logger.notice("closed: a message from the page over its limit", metadata: ["web.bytes": "\(text.utf8.count)"])
                        try await outbound.close(.messageTooLarge, reason: "message too large")
                        break
                    }
                    guard let request = PageMessage.request(in: text) else {
                        try await outbound.write(.text(PageMessage.unreadable))
                        continue
                    }
                    // Whether the person looks at the page is tether-web's to combine, not the bus's.
                    if request.type == "attention" {
                        pages.attention(of: page, focused: request.focused ?? false)
                        continue
                    }
                    if let answer = await bridge.answer(request) { try await outbound.write(.text(answer)) }
                }
                group.cancelAll()
            }
            context.logger.debug("page left")
        }

        // Before any event loop thread sets up a connection: see ChildChannelWarmUp.
        ChildChannelWarmUp.run(logger: logger) { GuardedChildChannel(inner: $0) }

        let urlFile = configuration.urlFile
        let webSocketResponder = router.buildResponder()
        return Application(
            router: router,
            server: HTTPServerBuilder { responder in
                GuardedChildChannel(
                    inner: HTTP1WebSocketUpgradeChannel(
                        responder: responder, webSocketResponder: webSocketResponder,
                        configuration: .init(maxFrameSize: Self.frameReadLimit)))
            },
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "tether-web"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? configuration.port
                if bound != configuration.port {
                    current.withLock { $0 = WebAccess(token: configuration.token, hosts: WebAccess.hosts(listeningOn: configuration.host, port: bound)) }
                }
                let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
                let url = "http://\(host):\(bound)/"
                logger.notice("tether-web listening: open the URL `tether web` prints", metadata: ["web.url": "\(url)"])
                if let urlFile { try? SecretFile.write(url, to: urlFile) }
            },
            logger: logger)
    }

    /// A file of the page, from the library's resources.
    static func asset(_ name: String) throws -> String {
        guard let url = Bundle.module.url(forResource: name, withExtension: nil) else {
            throw WebError(.missingResource, "\(name) is missing from tether-web's resources")
        }
        return try String(contentsOf: url, encoding: .utf8)
    }
}

/// Judges every request by ``WebAccess`` and sets the headers every answer carries.
struct AccessMiddleware<Context: RequestContext>: RouterMiddleware {
    let access: @Sendable () -> WebAccess
    let renderer: PageRenderer
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let verdict = access().judge(
            WebAccess.Request(
                path: request.uri.path, queryToken: request.uri.queryParameters["token"].map(String.init),
                cookieTokens: WebAccess.tokens(inCookieHeaders: request.headers[values: .cookie]), pageKey: request.headers[.pageKey],
                host: request.head.authority,
                origin: request.headers[.origin], fetchSite: request.headers[.secFetchSite], fetchMode: request.headers[.secFetchMode],
                upgrade: request.headers[.upgrade]?.lowercased() == "websocket"))
        var response: Response
        switch verdict {
        case .allow:
            response = try await next(request, context)
        case .setCookieAndRedirect(let location):
            response = Response(status: .seeOther, headers: [.location: location])
            for cookie in access().cookies { response.headers.append(HTTPField(name: .setCookie, value: cookie)) }
        case .setCookie:
            response = Response(status: .noContent)
            for cookie in access().cookies { response.headers.append(HTTPField(name: .setCookie, value: cookie)) }
        case .recover(let words):
            response = Response(
                status: .unauthorized, headers: [.contentType: "text/html; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: renderer.recoveryPage(words: words))))
        case .refuse(let status, let words):
            logger.warning("refused a request", metadata: ["web.path": "\(request.uri.path)", "web.status": "\(status)", "web.reason": "\(words)"])
            response = Response(
                status: HTTPResponse.Status(code: status), headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: words + "\n")))
        }
        response.headers[.contentSecurityPolicy] = WebAccess.contentSecurityPolicy
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        response.headers[.cacheControl] = "no-store"
        return response
    }
}

extension HTTPField.Name {
    /// Who made a request: the page itself (`same-origin`), another site or another port of the host, or the person (`none`).
    static var secFetchSite: Self { Self("Sec-Fetch-Site")! }
    /// How: `navigate` for a page opened in a window.
    static var secFetchMode: Self { Self("Sec-Fetch-Mode")! }
    static var pageKey: Self { Self(WebAccess.pageKeyHeader)! }
}

/// tether-web is a front end while at least one page is open: its presence on the bus then,
/// with the person's attention: focused while any page is visible and focused, away once every
/// page said it is not, not known while a page has not said.
final class PagePresence: Sendable {
    private struct Pages {
        /// Each open page's attention; nil until it said.
        var attention: [Int: Bool?] = [:]
        var next = 0
        var announcing: Task<Void, Never>?

        var combined: FrontEndPresence.Attention? {
            if attention.values.contains(true) { return .focused }
            if attention.values.contains(where: { $0 == nil }) { return nil }
            return .away
        }
    }

    private let state = Mutex(Pages())
    private let announcer: PresenceAnnouncer

    init(bus: any Bus) {
        announcer = PresenceAnnouncer(bus: bus, frontEnd: WebBridge.frontEnd)
    }

    /// A page opened its WebSocket; returns its number.
    func opened() -> Int {
        let announcer = self.announcer
        return state.withLock { state in
            state.next += 1
            state.attention[state.next] = .some(nil)
            if state.attention.count == 1 {
                announcer.setAttention(nil)
                state.announcing = Task { await announcer.run() }
            }
            return state.next
        }
    }

    /// Page `page` said whether the person looks at it.
    func attention(of page: Int, focused: Bool) {
        let combined = state.withLock { state -> FrontEndPresence.Attention? in
            if state.attention[page] != nil { state.attention[page] = focused }
            return state.combined
        }
        announcer.setAttention(combined)
    }

    func closed(_ page: Int) {
        let (leaving, combined) = state.withLock { state -> (Bool, FrontEndPresence.Attention?) in
            state.attention[page] = nil
            guard state.attention.isEmpty else { return (false, state.combined) }
            state.announcing?.cancel()
            state.announcing = nil
            return (true, nil)
        }
        if leaving { announcer.leave() } else { announcer.setAttention(combined) }
    }
}

/// Follows `conn.state` for a new page's first frame.
struct ConnectionFollower: Service {
    let bus: any Bus
    let latest: LatestConnection

    func run() async throws {
        let states = try await bus.subscribe(to: [Topic.connectionState.name])
        for await message in states.cancelOnGracefulShutdown() { latest.update(message) }
    }
}

/// The connection as last published, for a new page's first frame.
final class LatestConnection: Sendable {
    private let latest = Mutex<ConnectionStatus?>(nil)

    var status: ConnectionStatus? { latest.withLock { $0 } }

    func update(_ message: BusMessage) {
        if let status = try? message.decode(ConnectionStatus.self) { latest.withLock { $0 = status } }
    }
}

/// A problem tether-web cannot get past.
public typealias WebError = CodedError<WebErrorCode>

/// What tether-web cannot get past.
public enum WebErrorCode: String, ErrorCode {
    /// A file of the page is missing from its resources.
    case missingResource
}
