import Crypto
import Foundation

/// Who may use tether-web: decided for every request and every WebSocket upgrade from its
/// Host, Origin, fetch metadata, cookies and query, with no I/O. A value, so each rule is
/// tested alone.
///
/// A random token in the first URL (`tether web` prints it) is traded at once for an
/// HttpOnly, SameSite=Strict cookie and a redirect that takes it out of the address bar. A
/// browser keeps cookies apart by host, not by port, so the cookie is scoped to the page's
/// own path, ``pagePath``, which is derived from the token: another program listening on
/// another port of the host is never sent the cookie (it would have to be asked for that
/// path, which it cannot know), and a cookie of the same name that such a program sets for
/// the host is one more value beside the page's, not a replacement (every value is tried).
/// Cookies of other ports can still push the key out of the browser's cookie jar (a browser
/// keeps about 150 cookies for a host): the page keeps a second key, ``pageKey``, in its own
/// origin's storage, which no other port can reach, and trades it for the cookie again
/// (`POST key` with the ``pageKeyHeader``), so no other program can lock it out.
/// The Host must be one this server listens as (no DNS rebinding); an Origin, when a browser
/// sends one, must be this server's own, and a request another site or another port of the
/// host made (`Sec-Fetch-Site`) is refused unless it is a navigation (docs/WEB.md).
public struct WebAccess: Sendable {
    /// The cookie that carries the token after the first URL.
    public static let cookieName = "tether_web"

    /// The access token, from `web.token` in the run directory.
    public let token: String
    /// `host:port` values the server answers to.
    public let hosts: Set<String>
    /// Where the page and everything it uses are served: `/s/` and a name derived from the
    /// token, without a trailing slash. Not a secret on its own (it is in the address bar);
    /// what matters is that no other server of the host can guess it.
    public let pagePath: String
    /// What the page keeps in its origin's storage to get the cookie back: an HMAC of the token.
    public let pageKey: String

    /// The files under the page's path served without the cookie: code and style, no secret.
    public static let publicFiles = ["app.js", "markdown.js", "app.css", "icon.svg", "recover.js"]

    /// The header a page sends its ``pageKey`` in, to `key` under the page's path.
    public static let pageKeyHeader = "X-Tether-Page-Key"

    /// What a request shows of itself, as the browser sent it.
    public struct Request: Sendable {
        /// The path without the query.
        public var path: String
        /// The `token` query parameter, when there is one.
        public var queryToken: String?
        /// Every value of a ``WebAccess/cookieName`` cookie the request carries.
        public var cookieTokens: [String]
        /// The ``WebAccess/pageKeyHeader``, when there is one.
        public var pageKey: String?
        public var host: String?
        public var origin: String?
        /// `Sec-Fetch-Site`: `same-origin`, `same-site`, `cross-site` or `none` (typed or opened by the person).
        public var fetchSite: String?
        /// `Sec-Fetch-Mode`: `navigate` for a page opened in a window.
        public var fetchMode: String?
        /// Whether it asks for the WebSocket.
        public var upgrade: Bool

        public init(
            path: String, queryToken: String? = nil, cookieTokens: [String] = [], pageKey: String? = nil, host: String?, origin: String? = nil,
            fetchSite: String? = nil, fetchMode: String? = nil, upgrade: Bool = false
        ) {
            self.path = path
            self.queryToken = queryToken
            self.cookieTokens = cookieTokens
            self.pageKey = pageKey
            self.host = host
            self.origin = origin
            self.fetchSite = fetchSite
            self.fetchMode = fetchMode
            self.upgrade = upgrade
        }
    }

    /// What to do with a request.
    public enum Verdict: Equatable, Sendable {
        /// Serve it.
        case allow
        /// The token came in the URL: set the cookie and redirect to `location`, without it.
        case setCookieAndRedirect(location: String)
        /// The page's key came: set the cookie again (204).
        case setCookie
        /// The page was asked for without the cookie: answer the page that looks for the key
        /// in the browser's storage, and shows `words` when there is none.
        case recover(words: String)
        /// Refuse it with an HTTP status and words for the person.
        case refuse(status: Int, words: String)
    }

    /// - Parameter hosts: the `host:port` forms the server is reached by (`127.0.0.1:8766`, `localhost:8766`).
    public init(token: String, hosts: Set<String>) {
        self.token = token
        self.hosts = Set(hosts.map { $0.lowercased() })
        self.pagePath = Self.pagePath(for: token)
        let code = HMAC<SHA256>.authenticationCode(for: Data("tether-web page key".utf8), using: SymmetricKey(data: Data(token.utf8)))
        self.pageKey = Self.base64url(Data(code))
    }

    /// The page's path for a token: `/s/` and 22 characters of SHA-256 over the token, in
    /// base64url. One-way, so the path in the address bar tells nothing of the token.
    public static func pagePath(for token: String) -> String {
        let digest = SHA256.hash(data: Data("tether-web page path\n\(token)".utf8))
        return "/s/\(base64url(Data(digest.prefix(16))))"
    }

    private static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
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
    public func judge(_ request: Request) -> Verdict {
        guard let host = request.host?.lowercased(), hosts.contains(host) else {
            return .refuse(
                status: 421,
                words:
                    "this server answers only as \(hosts.sorted().joined(separator: " or ")), not as \(request.host ?? "no host"): open the URL tether web prints"
            )
        }
        if let origin = request.origin {
            guard origin.lowercased() == "http://\(host)" else {
                return .refuse(status: 403, words: "a page from \(origin) may not use Tether: only tether-web's own page may")
            }
        } else if request.upgrade {
            // A browser always sends Origin on a WebSocket upgrade; its absence is no browser's page.
            return .refuse(status: 403, words: "a WebSocket upgrade without an Origin is refused")
        }
        if let site = request.fetchSite, site == "same-site" || site == "cross-site", request.fetchMode != "navigate" {
            // Another port of this host is the same site: SameSite cookies alone would let its pages in.
            return .refuse(status: 403, words: "a request made by another site or another program of this host is refused: only tether-web's own page may")
        }
        if request.path == "/" || request.path.isEmpty {
            if let queryToken = request.queryToken, Self.same(queryToken, token), !request.upgrade {
                return .setCookieAndRedirect(location: pagePath + "/")
            }
            return .refuse(status: 401, words: "no access token: open the URL `tether web` prints (it carries the token, kept in a cookie after)")
        }
        guard request.path == pagePath || request.path.hasPrefix(pagePath + "/") else {
            return .refuse(status: 404, words: "tether-web serves nothing here: open the URL `tether web` prints")
        }
        if request.cookieTokens.contains(where: { Self.same($0, token) }) { return .allow }
        if request.path == pagePath + "/key", let key = request.pageKey, Self.same(key, pageKey), request.origin != nil, !request.upgrade {
            return .setCookie
        }
        // The page's own files carry no secret, and are served without the cookie: the page
        // still starts when other cookies push its cookie out between the page and its files.
        if Self.publicFiles.contains(where: { request.path == pagePath + "/" + $0 }) { return .allow }
        let words = "this browser has no key for tether-web (or no longer has it): open the URL `tether web` prints, which gives it one"
        if request.path == pagePath + "/" || request.path == pagePath, !request.upgrade { return .recover(words: words) }
        return .refuse(status: 401, words: words)
    }

    /// The cookies the token is traded for: the key, scoped to the page's path (HttpOnly: no
    /// script reads it; SameSite=Strict: no other site sends it), and the removal of a key an
    /// earlier tether-web scoped to the whole host.
    public var cookies: [String] {
        ["\(Self.cookieName)=\(token); Path=\(pagePath); HttpOnly; SameSite=Strict", "\(Self.cookieName)=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"]
    }

    /// Every value of the ``cookieName`` cookie in `Cookie` header values (`a=1; b=2`).
    public static func tokens(inCookieHeaders headers: [String]) -> [String] {
        headers.flatMap { $0.split(separator: ";") }.compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == cookieName else { return nil }
            return parts[1].trimmingCharacters(in: .whitespaces)
        }
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
