import Foundation
import Testing

@testable import FrontEnd

/// `tether setup` finds the gateway where OpenClaw's own clients find it: its configuration
/// file (JSON5) and environment, with the token as a string, a `${VAR}` or a secret reference.
@Suite struct OpenClawDiscoveryTests {
    static func discover(_ files: [String: String], environment: [String: String] = [:]) -> OpenClawDiscovery.Outcome {
        OpenClawDiscovery(environment: ["HOME": "/home/me"].merging(environment) { $1 }) { files[$0] }.discover()
    }

    static let onboarded = """
        // As openclaw onboard writes it, with a comment and trailing commas.
        {
          gateway: {
            mode: "local",
            auth: { mode: "token", token: "abc123", },
            port: 18790,
            bind: "loopback",
          },
        }
        """

    @Test func theOnboardedConfigurationGivesTheLoopbackURLAndTheToken() {
        let outcome = Self.discover(["/home/me/.openclaw/openclaw.json": Self.onboarded])
        #expect(
            outcome
                == .found(
                    .init(
                        url: "ws://127.0.0.1:18790", token: "abc123", urlOrigin: "gateway.port in ~/.openclaw/openclaw.json",
                        tokenOrigin: "gateway.auth.token in ~/.openclaw/openclaw.json", notes: [])))
    }

    @Test func theEnvironmentChoosesTheFileAndThePortAsOpenClawsDoes() {
        let files = ["/etc/oc.json": Self.onboarded, "/srv/state/openclaw.json": #"{"gateway": {"auth": {"token": "s"}}}"#]
        guard
            case .found(let explicit) = Self.discover(files, environment: ["OPENCLAW_CONFIG_PATH": "/etc/oc.json", "OPENCLAW_GATEWAY_PORT": "127.0.0.1:19001"])
        else { Issue.record("not found"); return }
        #expect(explicit.url == "ws://127.0.0.1:19001" && explicit.urlOrigin == "OPENCLAW_GATEWAY_PORT")
        guard case .found(let state) = Self.discover(files, environment: ["OPENCLAW_STATE_DIR": "/srv/state"]) else { Issue.record("not found"); return }
        #expect(state.url == "ws://127.0.0.1:18789" && state.token == "s", "OpenClaw's default port")
        guard case .found(let url) = Self.discover(files, environment: ["OPENCLAW_STATE_DIR": "/srv/state", "OPENCLAW_GATEWAY_URL": "wss://gw.example:443"])
        else { Issue.record("not found"); return }
        #expect(url.url == "wss://gw.example:443")
    }

    @Test func aTokenFromTheEnvironmentOrASecretReference() {
        let home = "/home/me/.openclaw/openclaw.json"
        let byVariable = #"{"env": {"vars": {"GW": "from-env-block"}}, "gateway": {"auth": {"token": "${GW}"}}}"#
        #expect(Self.token(Self.discover([home: byVariable])) == "from-env-block")
        #expect(Self.token(Self.discover([home: byVariable], environment: ["GW": "from-environment"])) == "from-environment")
        let unset = #"{"gateway": {"auth": {"token": "${MISSING}"}}}"#
        #expect(Self.token(Self.discover([home: unset], environment: ["OPENCLAW_GATEWAY_TOKEN": "fallback"])) == "fallback")
        let envReference = #"{"gateway": {"auth": {"token": {"source": "env", "provider": "default", "id": "OC_TOKEN"}}}}"#
        #expect(Self.token(Self.discover([home: envReference], environment: ["OC_TOKEN": "referenced"])) == "referenced")
        let fileReference = """
            {"secrets": {"providers": {"vault": {"source": "file", "path": "~/secrets.json", "mode": "json"}}},
             "gateway": {"auth": {"token": {"source": "file", "provider": "vault", "id": "/gateway/token"}}}}
            """
        #expect(Self.token(Self.discover([home: fileReference, "/home/me/secrets.json": #"{"gateway": {"token": "in-a-file"}}"#])) == "in-a-file")
        let single = """
            {"secrets": {"providers": {"one": {"source": "file", "path": "/run/t", "mode": "singleValue"}}},
             "gateway": {"auth": {"token": {"source": "file", "provider": "one", "id": "value"}}}}
            """
        #expect(Self.token(Self.discover([home: single, "/run/t": "single\n"])) == "single")
    }

    @Test func whatCannotBeUsedIsSaidInWords() {
        let home = "/home/me/.openclaw/openclaw.json"
        let cases: [(String, String)] = [
            (#"{"gateway": {"auth": {"mode": "password", "password": "p"}}}"#, "asks for a password (gateway.auth.mode password)"),
            (#"{"gateway": {"auth": {"password": "p"}}}"#, "asks for a password"),
            (#"{"gateway": {"auth": {"mode": "none"}}}"#, "asks for no credential"),
            (#"{"gateway": {"tls": {"enabled": true}, "auth": {"token": "t"}}}"#, "speaks TLS (gateway.tls.enabled)"),
            (#"{"gateway": {"mode": "remote", "auth": {"token": "t"}}}"#, "gateway.remote.url is not set"),
            (#"{"gateway": {"port": 18789}}"#, "holds no gateway token yet"),
            (#"{"gateway": {"auth": {"token": {"source": "exec", "provider": "p", "id": "x"}}}}"#, "comes from a program"),
            (#"{"gateway": {"auth": {"token": {"source": "file", "provider": "nope", "id": "/x"}}}}"#, "which is not in secrets.providers"),
            ("{ gateway: { port: 1, ", "is not valid JSON5"),
            ("[1, 2]", "does not hold an object of settings"),
        ]
        for (text, words) in cases {
            guard case .unusable(let said) = Self.discover([home: text]) else {
                Issue.record("\(text) was not refused")
                continue
            }
            #expect(said.contains(words), "\(text): \(said)")
            #expect(said.contains("~/.openclaw/openclaw.json") || words.contains("program") || words.contains("providers"), "names the file: \(said)")
        }
    }

    @Test func remoteModeAndBindsAreFollowed() {
        let home = "/home/me/.openclaw/openclaw.json"
        let remote = #"{"gateway": {"mode": "remote", "remote": {"url": "wss://far.example", "token": "r"}, "auth": {"token": "local"}}}"#
        guard case .found(let far) = Self.discover([home: remote]) else { Issue.record("not found"); return }
        #expect(far.url == "wss://far.example" && far.token == "r")
        let custom = #"{"gateway": {"bind": "custom", "customBindHost": "10.1.2.3", "port": 1234, "auth": {"token": "t"}}}"#
        guard case .found(let bound) = Self.discover([home: custom]) else { Issue.record("not found"); return }
        #expect(bound.url == "ws://10.1.2.3:1234")
        let tailnet = #"{"gateway": {"bind": "tailnet", "auth": {"token": "t"}}}"#
        guard case .found(let tail) = Self.discover([home: tailnet]) else { Issue.record("not found"); return }
        #expect(tail.url == "ws://127.0.0.1:18789" && tail.notes.first?.contains("tailnet") == true)
    }

    @Test func nothingFoundNamesThePlacesLookedAt() {
        #expect(
            Self.discover([:])
                == .notFound(searched: [
                    "/home/me/.openclaw/openclaw.json", "/home/me/.openclaw/clawdbot.json", "/home/me/.clawdbot/openclaw.json",
                    "/home/me/.clawdbot/clawdbot.json",
                ]))
        guard case .found(let fromEnvironment) = Self.discover([:], environment: ["OPENCLAW_GATEWAY_URL": "ws://h:1", "OPENCLAW_GATEWAY_TOKEN": "t"])
        else { Issue.record("the environment alone names a gateway"); return }
        #expect(fromEnvironment.url == "ws://h:1")
    }

    static func token(_ outcome: OpenClawDiscovery.Outcome) -> String? {
        if case .found(let gateway) = outcome { return gateway.token }
        Issue.record("\(outcome)")
        return nil
    }
}
