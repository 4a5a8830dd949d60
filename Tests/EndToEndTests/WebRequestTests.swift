import Foundation
import Testing
import TetherTesting

/// Requests no browser sends, to the real tether-web: a request target in absolute form and
/// two Host headers are refused with 400 before the access check, on a page request and on
/// the WebSocket's upgrade, while the same requests in their ordinary form are served.
@Suite struct WebRequestTests {
    @Test func aRequestThatNamesAnotherHostIsRefusedHoweverItIsWritten() async throws {
        let port = try freePort()
        let set = try await ComposedSet(file: "web.yaml", environment: ["TETHER_WEB_PORT": "\(port)"])
        defer { set.stop() }
        let web = try set.tether(["web"])
        #expect(web.status == 0, "\(web.standardError)")
        let url = web.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let token = try #require(url.components(separatedBy: "token=").last)
        let host = "127.0.0.1:\(port)"
        let page = try pagePath(port: port, host: host, token: token)
        let cookie = "Cookie: tether_web=\(token)\r\n"
        let upgrade =
            "Origin: http://\(host)\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

        // The ordinary forms are served: the page, and the WebSocket.
        let served = try rawRequest(port: port, "GET \(page)/ HTTP/1.1\r\nHost: \(host)\r\n\(cookie)Connection: close\r\n\r\n")
        #expect(served.hasPrefix("HTTP/1.1 200"), "\(served.prefix(200))")
        let socket = try rawRequest(port: port, "GET \(page)/ws HTTP/1.1\r\nHost: \(host)\r\n\(cookie)\(upgrade)\r\n")
        #expect(socket.hasPrefix("HTTP/1.1 101"), "\(socket.prefix(200))")

        let refused = [
            "GET http://evil.example\(page)/ HTTP/1.1\r\nHost: \(host)\r\n\(cookie)Connection: close\r\n\r\n",
            "GET \(page)/ HTTP/1.1\r\nHost: \(host)\r\nHost: evil.example\r\n\(cookie)Connection: close\r\n\r\n",
            "GET http://evil.example\(page)/ws HTTP/1.1\r\nHost: \(host)\r\n\(cookie)\(upgrade)\r\n",
            "GET \(page)/ws HTTP/1.1\r\nHost: \(host)\r\nHost: evil.example\r\n\(cookie)\(upgrade)\r\n",
            // Another Host alone was refused before (421), on the upgrade too.
            "GET \(page)/ws HTTP/1.1\r\nHost: evil.example\r\n\(cookie)\(upgrade)\r\n",
        ]
        for request in refused {
            let answer = try rawRequest(port: port, request)
            #expect(answer.hasPrefix("HTTP/1.1 4"), "served: \(request.prefix(60))…\n\(answer.prefix(200))")
            #expect(!answer.contains("<html") && !answer.hasPrefix("HTTP/1.1 101"))
        }
        let words = try rawRequest(port: port, refused[0])
        #expect(words.contains("HTTP/1.1 400") && words.contains("not a proxy"), "\(words)")
    }

    /// Where tether-web serves its page: the redirect that trades the URL's token for the cookie.
    private func pagePath(port: Int, host: String, token: String) throws -> String {
        let answer = try rawRequest(port: port, "GET /?token=\(token) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
        let location = answer.split(separator: "\r\n").first { $0.lowercased().hasPrefix("location:") }
        let path = try #require(location?.dropFirst("location:".count).trimmingCharacters(in: .whitespaces), "\(answer.prefix(300))")
        #expect(path.hasPrefix("/s/") && path.hasSuffix("/"), "\(path)")
        return String(path.dropLast())
    }
}
