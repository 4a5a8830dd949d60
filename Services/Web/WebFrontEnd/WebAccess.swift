import Foundation

/// Who may use tether-web: decided for every request and every WebSocket upgrade from its
/// Host, Origin, cookie and query, with no I/O. A value, so each rule is tested alone.
///
/// As notebook servers do: a random token in the first URL (`tether web` prints it), traded at
/// once for an HttpOnly, SameSite=Strict cookie and a redirect that takes it out of the
/// address bar; the Host must be one this server listens as (no DNS rebinding); an Origin,
/// when a browser sends one, must be this server's own (no cross-site sending).
public struct WebAccess: Sendable {
    /// The cookie that carries the token after the first URL.
    public static let cookieName = "tether_web"

    /// The access token, from `web.token` in the run directory.
    public let token: String
    /// `host:port` values the server answers to.
    public let hosts: Set<String>

    /// What to do with a request.
    public enum Verdict: Equatable, Sendable {
        /// Serve it.
        case allow
        /// The token came in the URL: set the cookie and redirect to `location`, without it.
        case setCookieAndRedirect(location: String)
        /// Refuse it with an HTTP status and words for the person.
        case refuse(status: Int, words: String)
    }

    /// - Parameter hosts: the `host:port` forms the server is reached by (`127.0.0.1:8766`, `localhost:8766`).
    public init(token: String, hosts: Set<String>) {
        self.token = token
        self.hosts = Set(hosts.map { $0.lowercased() })
    }

    /// The `host:port` forms a server listening on `address` and `port` answers to.
    public static func hosts(listeningOn address: String, port: Int) -> Set<String> {
        switch address {
        case "127.0.0.1", "localhost": ["127.0.0.1:\(port)", "localhost:\(port)"]
        case "::1", "[::1]": ["[::1]:\(port)", "localhost:\(port)"]
        default: [address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"]
        }
    }

    /// Judges a request.
    /// - Parameters:
    ///   - path: the path without the query.
    ///   - queryToken: the `token` query parameter, when there is one.
    ///   - cookieToken: the value of the ``cookieName`` cookie, when there is one.
    ///   - upgrade: whether it asks for the WebSocket.
    public func judge(path: String, queryToken: String?, cookieToken: String?, host: String?, origin: String?, upgrade: Bool) -> Verdict {
        guard let host = host?.lowercased(), hosts.contains(host) else {
            return .refuse(
                status: 421,
                words: "this server answers only as \(hosts.sorted().joined(separator: " or ")), not as \(host ?? "no host"): open the URL tether web prints")
        }
        if let origin {
            guard origin.lowercased() == "http://\(host)" else {
                return .refuse(status: 403, words: "a page from \(origin) may not use Tether: only tether-web's own page may")
            }
        } else if upgrade {
            // A browser always sends Origin on a WebSocket upgrade; its absence is no browser's page.
            return .refuse(status: 403, words: "a WebSocket upgrade without an Origin is refused")
        }
        if let cookieToken, Self.same(cookieToken, token) { return .allow }
        if let queryToken, Self.same(queryToken, token), !upgrade { return .setCookieAndRedirect(location: path) }
        return .refuse(status: 401, words: "no access token: open the URL `tether web` prints (it carries the token, kept in a cookie after)")
    }

    /// The cookie that keeps the token: HttpOnly (no script reads it), SameSite=Strict (no other site sends it).
    public var cookie: String {
        "\(Self.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict"
    }

    /// Compares in time that does not depend on where the strings differ.
    static func same(_ given: String, _ expected: String) -> Bool {
        let given = Array(given.utf8)
        let expected = Array(expected.utf8)
        var difference = UInt8(given.count == expected.count ? 0 : 1)
        for index in 0..<expected.count { difference |= expected[index] ^ (index < given.count ? given[index] : 0) }
        return difference == 0
    }

    /// The Content-Security-Policy of every answer: the page's own scripts, styles and
    /// WebSocket, nothing from elsewhere, never framed.
    public static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}
