import Foundation
import Testing
import TetherSchema
import TetherWire
import WebFrontEnd

/// Who may use tether-web, rule by rule, and the page's first frame.
@Suite struct WebAccessTests {
    let access = WebAccess(token: "s3cret", hosts: WebAccess.hosts(listeningOn: "127.0.0.1", port: 8766))

    @Test func theCookieLetsInAndTheURLTokenIsTradedForIt() {
        #expect(access.judge(path: "/", queryToken: nil, cookieToken: "s3cret", host: "127.0.0.1:8766", origin: nil, upgrade: false) == .allow)
        #expect(access.judge(path: "/", queryToken: nil, cookieToken: "s3cret", host: "localhost:8766", origin: nil, upgrade: false) == .allow)
        #expect(
            access.judge(path: "/", queryToken: "s3cret", cookieToken: nil, host: "127.0.0.1:8766", origin: nil, upgrade: false)
                == .setCookieAndRedirect(location: "/"))
        #expect(access.cookie == "tether_web=s3cret; Path=/; HttpOnly; SameSite=Strict")
    }

    @Test func withoutTheTokenNothingIsServed() {
        for (query, cookie) in [(nil, nil), ("wrong", nil), (nil, "s3cre"), (nil, "s3cret!"), ("", "")] as [(String?, String?)] {
            guard
                case .refuse(401, let words) = access.judge(
                    path: "/", queryToken: query, cookieToken: cookie, host: "127.0.0.1:8766", origin: nil, upgrade: false)
            else {
                Issue.record("let in with query \(query ?? "none") and cookie \(cookie ?? "none")")
                continue
            }
            #expect(words.contains("tether web"))
        }
        // The URL token does not open the WebSocket: the page has the cookie by then.
        #expect(
            access.judge(path: "/ws", queryToken: "s3cret", cookieToken: nil, host: "127.0.0.1:8766", origin: "http://127.0.0.1:8766", upgrade: true) != .allow)
    }

    @Test func anotherHostIsRefusedEvenWithTheToken() {
        for host in ["evil.example:8766", "127.0.0.1:9999", "10.0.0.5:8766", nil] as [String?] {
            guard case .refuse(421, _) = access.judge(path: "/", queryToken: nil, cookieToken: "s3cret", host: host, origin: nil, upgrade: false) else {
                Issue.record("served as \(host ?? "no host")")
                continue
            }
        }
    }

    @Test func anotherOriginIsRefusedAndAnUpgradeNeedsOne() {
        let foreign = access.judge(path: "/ws", queryToken: nil, cookieToken: "s3cret", host: "127.0.0.1:8766", origin: "http://evil.example", upgrade: true)
        guard case .refuse(403, let words) = foreign else {
            Issue.record("a cross-site page got in: \(foreign)")
            return
        }
        #expect(words.contains("http://evil.example"))
        #expect(
            access.judge(path: "/ws", queryToken: nil, cookieToken: "s3cret", host: "127.0.0.1:8766", origin: "http://localhost:8766", upgrade: true) != .allow)
        #expect(access.judge(path: "/ws", queryToken: nil, cookieToken: "s3cret", host: "127.0.0.1:8766", origin: nil, upgrade: true) != .allow)
        #expect(
            access.judge(path: "/ws", queryToken: nil, cookieToken: "s3cret", host: "127.0.0.1:8766", origin: "http://127.0.0.1:8766", upgrade: true) == .allow)
    }

    @Test func thePolicyAllowsOnlyThePagesOwnFiles() {
        let policy = WebAccess.contentSecurityPolicy
        #expect(policy.hasPrefix("default-src 'none'"))
        for directive in ["script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] { #expect(policy.contains(directive)) }
        #expect(!policy.contains("unsafe"))
    }

    @Test func theFirstFrameIsInTheHTMLAndCannotBreakOutOfIt() {
        let hostile = "</script><script>alert(1)</script> & \"quoted\""
        let frame = PageRenderer.FirstFrame(
            entries: [TranscriptEntry(id: MessageID("m1"), sender: .user, content: hostile, timestamp: Date(), status: .delivered, revision: 3)],
            revision: 3, draft: "half <typed>")
        let page = PageRenderer().page(frame)
        #expect(
            page.contains(
                "<span class=\"who\">You:</span> <span class=\"text\">&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot;</span>"))
        #expect(page.contains("✓✓ delivered"))
        #expect(page.contains(">half &lt;typed&gt;</textarea>"))
        #expect(page.components(separatedBy: "</script>").count == 3, "only the page's own two script elements close")
        #expect(page.contains("role=\"status\" aria-live=\"polite\""))
        #expect(!page.contains("s3cret"))
    }
}
