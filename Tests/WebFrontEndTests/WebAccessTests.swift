import Foundation
import Testing
import TetherSchema
import TetherWire
import WebFrontEnd

/// Who may use tether-web, rule by rule, and the page's first frame.
@Suite struct WebAccessTests {
    let access = WebAccess(token: "s3cret", hosts: WebAccess.hosts(listeningOn: "127.0.0.1", port: 8766))

    var page: String { access.pagePath + "/" }

    func judge(
        _ path: String, query: String? = nil, cookies: [String] = [], pageKey: String? = nil, host: String? = "127.0.0.1:8766", origin: String? = nil,
        site: String? = nil, mode: String? = nil, upgrade: Bool = false
    ) -> WebAccess.Verdict {
        access.judge(
            WebAccess.Request(
                path: path, queryToken: query, cookieTokens: cookies, pageKey: pageKey, host: host, origin: origin, fetchSite: site, fetchMode: mode,
                upgrade: upgrade))
    }

    @Test func theCookieLetsInAndTheURLTokenIsTradedForIt() {
        #expect(judge(page, cookies: ["s3cret"]) == .allow)
        #expect(judge(page, cookies: ["s3cret"], host: "localhost:8766") == .allow)
        #expect(judge(access.pagePath + "/app.js", cookies: ["s3cret"], site: "same-origin", mode: "no-cors") == .allow)
        #expect(judge("/", query: "s3cret", site: "none", mode: "navigate") == .setCookieAndRedirect(location: page))
        #expect(
            access.cookies == [
                "tether_web=s3cret; Path=\(access.pagePath); HttpOnly; SameSite=Strict", "tether_web=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict",
            ])
    }

    @Test func thePagePathComesFromTheTokenAndTellsNothingOfIt() {
        #expect(access.pagePath.hasPrefix("/s/"))
        #expect(access.pagePath.count == 3 + 22)
        #expect(!access.pagePath.contains("s3cret"))
        #expect(WebAccess.pagePath(for: "s3cret") == access.pagePath, "the same for every start of tether-web with the token")
        #expect(WebAccess.pagePath(for: "s3cres") != access.pagePath)
        #expect(access.pagePath.allSatisfy { $0.isLetter || $0.isNumber || "/-_".contains($0) }, "safe in a URL and a cookie's Path")
    }

    @Test func withoutTheTokenNothingIsServed() {
        for (query, cookies) in [(nil, []), ("wrong", []), (nil, ["s3cre"]), (nil, ["s3cret!"]), ("", [""])] as [(String?, [String])] {
            for path in ["/", access.pagePath + "/access", access.pagePath + "/ws"] {
                guard case .refuse(401, let words) = judge(path, query: query, cookies: cookies) else {
                    Issue.record("\(path) let in with query \(query ?? "none") and cookies \(cookies)")
                    continue
                }
                #expect(words.contains("tether web"))
            }
        }
        // The URL token does not open the WebSocket: the page has the cookie by then.
        #expect(judge(access.pagePath + "/ws", query: "s3cret", origin: "http://127.0.0.1:8766", upgrade: true) != .allow)
    }

    @Test func nothingIsServedOutsideThePagesPath() {
        for path in ["/ws", "/app.js", "/s/", "/s/other/", access.pagePath + "x/", "/favicon.ico"] {
            guard case .refuse(404, _) = judge(path, cookies: ["s3cret"]) else {
                Issue.record("\(path) was served")
                continue
            }
        }
    }

    @Test func aCookieSetByAnotherPortOfTheHostDoesNotLockThePageOut() {
        // Cookies are kept by host, not port: another server of 127.0.0.1 can set one of the same name.
        #expect(judge(page, cookies: ["forged", "s3cret"]) == .allow)
        #expect(judge(page, cookies: ["s3cret", "forged"]) == .allow)
        #expect(judge(page, cookies: ["forged"]) != .allow)
        #expect(WebAccess.tokens(inCookieHeaders: ["tether_web=forged; other=1; tether_web=s3cret", "tether_web = x"]) == ["forged", "s3cret", "x"])
        #expect(WebAccess.tokens(inCookieHeaders: ["tether_webx=1; xtether_web=2; tether_web"]) == [])
    }

    @Test func thePagesKeyGetsTheCookieBackAndNothingElse() {
        #expect(access.pageKey.count == 43)
        #expect(access.pageKey != WebAccess(token: "s3cres", hosts: access.hosts).pageKey)
        #expect(!access.pageKey.contains("s3cret"))
        let key = access.pagePath + "/key"
        #expect(judge(key, pageKey: access.pageKey, origin: "http://127.0.0.1:8766", site: "same-origin", mode: "cors") == .setCookie)
        // Only there, only with the page's own Origin, never as the cookie.
        #expect(judge(key, pageKey: "wrong", origin: "http://127.0.0.1:8766") != .setCookie)
        #expect(judge(key, pageKey: access.pageKey) != .setCookie)
        #expect(judge(key, pageKey: access.pageKey, origin: "http://127.0.0.1:9000") != .setCookie)
        #expect(judge(access.pagePath + "/ws", pageKey: access.pageKey, origin: "http://127.0.0.1:8766", upgrade: true) != .allow)
        #expect(judge(page, cookies: [access.pageKey]) != .allow)
        // The page asked for without the cookie answers the page that looks for the key; its script is served to anyone.
        guard case .recover(let words) = judge(page) else {
            Issue.record("the page without its cookie: \(judge(page))")
            return
        }
        #expect(words.contains("tether web"))
        for file in ["recover.js", "app.js", "markdown.js", "app.css", "icon.svg"] { #expect(judge(access.pagePath + "/" + file) == .allow) }
        #expect(judge(access.pagePath + "/access") != .allow)
        #expect(judge("/app.js") != .allow, "not outside the page's path")
        let recovery = PageRenderer(pagePath: "/s/abc", pageKey: "k3y").recoveryPage(words: "<open> the URL")
        #expect(recovery.contains("src=\"/s/abc/recover.js\"") && recovery.contains("&lt;open&gt; the URL") && !recovery.contains("k3y"))
    }

    @Test func aRequestAnotherPortOfTheHostMakesIsRefused() {
        // Another port of 127.0.0.1 is the same site: SameSite=Strict would send the cookie.
        for site in ["same-site", "cross-site"] {
            guard case .refuse(403, let words) = judge(access.pagePath + "/access", cookies: ["s3cret"], site: site, mode: "cors") else {
                Issue.record("a \(site) fetch was let in")
                continue
            }
            #expect(words.contains("another"))
        }
        // Opening the page from a link elsewhere is a navigation: it shows the page, which no other page can read.
        #expect(judge(page, cookies: ["s3cret"], site: "cross-site", mode: "navigate") == .allow)
    }

    @Test func anotherHostIsRefusedEvenWithTheToken() {
        for host in ["evil.example:8766", "127.0.0.1:9999", "10.0.0.5:8766", nil] as [String?] {
            guard case .refuse(421, _) = judge(page, cookies: ["s3cret"], host: host) else {
                Issue.record("served as \(host ?? "no host")")
                continue
            }
        }
    }

    @Test func anotherOriginIsRefusedAndAnUpgradeNeedsOne() {
        let socket = access.pagePath + "/ws"
        let foreign = judge(socket, cookies: ["s3cret"], origin: "http://evil.example", upgrade: true)
        guard case .refuse(403, let words) = foreign else {
            Issue.record("a cross-site page got in: \(foreign)")
            return
        }
        #expect(words.contains("http://evil.example"))
        #expect(judge(socket, cookies: ["s3cret"], origin: "http://localhost:8766", upgrade: true) != .allow)
        #expect(judge(socket, cookies: ["s3cret"], origin: "http://127.0.0.1:9000", upgrade: true) != .allow)
        #expect(judge(socket, cookies: ["s3cret"], upgrade: true) != .allow)
        #expect(judge(socket, cookies: ["s3cret"], origin: "http://127.0.0.1:8766", site: "same-origin", mode: "websocket", upgrade: true) == .allow)
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
        let page = PageRenderer(pagePath: "/s/abc", pageKey: "k3y").page(frame)
        #expect(
            page.contains(
                "<span class=\"who\">You:</span> <span class=\"text\">&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot;</span>"))
        #expect(page.contains("✓✓ delivered"))
        #expect(page.contains(">half &lt;typed&gt;</textarea>"))
        #expect(page.components(separatedBy: "</script>").count == 4, "only the page's own three script elements close")
        #expect(page.contains("role=\"status\" aria-live=\"polite\""))
        #expect(!page.contains("s3cret"))
        #expect(page.contains("<script src=\"/s/abc/app.js\">"), "the page's files are asked for under its path")
        #expect(page.contains("<script src=\"/s/abc/markdown.js\">"))
    }
}
