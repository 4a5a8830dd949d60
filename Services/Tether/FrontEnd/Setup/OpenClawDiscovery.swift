public import Foundation

/// Finds the user's OpenClaw gateway the way OpenClaw's own clients do: its configuration
/// file (`$OPENCLAW_CONFIG_PATH`, else `openclaw.json` in `$OPENCLAW_STATE_DIR` or
/// `~/.openclaw`, JSON5) and its environment (`OPENCLAW_GATEWAY_URL`, `OPENCLAW_GATEWAY_PORT`,
/// `OPENCLAW_GATEWAY_TOKEN`). As OpenClaw's terminal UI, it dials the local gateway on the
/// loopback address at `gateway.port` (18789 by default), or `gateway.remote.url` when
/// `gateway.mode` is `remote`, and takes the token from the configuration first
/// (`gateway.auth.token`: a string, `${VAR}`, or an `env` or `file` secret reference), then
/// from `OPENCLAW_GATEWAY_TOKEN`. Decisions only: files are read through the closures given.
public struct OpenClawDiscovery: Sendable {
    /// The gateway found.
    public struct Gateway: Sendable, Equatable {
        /// The WebSocket URL to dial.
        public var url: String
        /// The shared token.
        public var token: String
        /// Where each came from, in words ("gateway.port in ~/.openclaw/openclaw.json").
        public var urlOrigin: String
        public var tokenOrigin: String
        /// What the user should know (a bind that loopback may not reach).
        public var notes: [String]

        public init(url: String, token: String, urlOrigin: String, tokenOrigin: String, notes: [String]) {
            self.url = url
            self.token = token
            self.urlOrigin = urlOrigin
            self.tokenOrigin = tokenOrigin
            self.notes = notes
        }
    }

    /// What the search found.
    public enum Outcome: Sendable, Equatable {
        case found(Gateway)
        /// No configuration file in any of these places, and no gateway named by the environment.
        case notFound(searched: [String])
        /// The configuration is there but cannot be used: why, and how to go on, in words.
        case unusable(String)
    }

    /// OpenClaw's default gateway port.
    public static let defaultPort = 18789

    private let environment: [String: String]
    private let readFile: @Sendable (String) -> String?

    /// - Parameters:
    ///   - environment: the environment OpenClaw's clients would see.
    ///   - readFile: a file's text, nil when there is none.
    public init(environment: [String: String], readFile: @escaping @Sendable (String) -> String?) {
        self.environment = environment
        self.readFile = readFile
    }

    /// The places OpenClaw's configuration may be, in the order its clients look.
    public var candidates: [String] {
        if let explicit = nonEmpty("OPENCLAW_CONFIG_PATH") { return [expandHome(explicit)] }
        var directories: [String] = []
        if let state = nonEmpty("OPENCLAW_STATE_DIR") { directories.append(expandHome(state)) }
        directories += [home + "/.openclaw", home + "/.clawdbot"]
        return directories.flatMap { [$0 + "/openclaw.json", $0 + "/clawdbot.json"] }
    }

    /// Finds the gateway: the first configuration file that exists, read as JSON5.
    public func discover() -> Outcome {
        let found = candidates.lazy.compactMap { path in readFile(path).map { (path, $0) } }.first
        guard let (path, text) = found else {
            if let url = nonEmpty("OPENCLAW_GATEWAY_URL"), let token = nonEmpty("OPENCLAW_GATEWAY_TOKEN") {
                return .found(Gateway(url: url, token: token, urlOrigin: "OPENCLAW_GATEWAY_URL", tokenOrigin: "OPENCLAW_GATEWAY_TOKEN", notes: []))
            }
            return .notFound(searched: candidates)
        }
        let root: [String: Any]
        do {
            guard let object = try JSON5Value.parse(text) as? [String: Any] else {
                return .unusable("\(shortened(path)) does not hold an object of settings: fix it, or pass --url and --token-file")
            }
            root = object
        } catch {
            return .unusable("\(shortened(path)) is not valid JSON5 (\(Self.words(error))): fix it, or pass --url and --token-file")
        }
        return gateway(in: root, path: path)
    }

    /// The gateway that the settings `root`, read from `path`, describe.
    func gateway(in root: [String: Any], path: String) -> Outcome {
        // The configuration's own `env` block counts as the environment, below the real one.
        var variables = environment
        for block in [root["env"] as? [String: Any], (root["env"] as? [String: Any])?["vars"] as? [String: Any]] {
            for (name, value) in block ?? [:] where variables[name] == nil { if let value = value as? String { variables[name] = value } }
        }
        let gateway = root["gateway"] as? [String: Any] ?? [:]
        let auth = gateway["auth"] as? [String: Any] ?? [:]
        let remote = gateway["remote"] as? [String: Any] ?? [:]
        let place = shortened(path)
        var notes: [String] = []
        if root["$include"] != nil || gateway["$include"] != nil {
            notes.append(
                "\(place) includes other files ($include), which setup does not read: if the gateway's settings are there, pass --url and --token-file")
        }

        // The URL.
        let mode = (gateway["mode"] as? String) ?? "local"
        let url: String
        let urlOrigin: String
        if let explicit = variables["OPENCLAW_GATEWAY_URL"].flatMap({ $0.isEmpty ? nil : $0 }) {
            (url, urlOrigin) = (explicit, "OPENCLAW_GATEWAY_URL")
        } else if mode == "remote" {
            guard let remoteURL = Self.substitute(remote["url"] as? String, variables), !remoteURL.isEmpty else {
                return .unusable("gateway.mode is remote in \(place) but gateway.remote.url is not set: set it, or pass --url")
            }
            (url, urlOrigin) = (remoteURL, "gateway.remote.url in \(place)")
        } else {
            if (gateway["tls"] as? [String: Any])?["enabled"] as? Bool == true {
                return .unusable(
                    "the gateway in \(place) speaks TLS (gateway.tls.enabled) with its own certificate, which Tether cannot check yet: "
                        + "pass --url wss://HOST:PORT with a certificate your system trusts")
            }
            let port: Int
            let portOrigin: String
            if let fromEnvironment = variables["OPENCLAW_GATEWAY_PORT"].flatMap(Self.port) {
                (port, portOrigin) = (fromEnvironment, "OPENCLAW_GATEWAY_PORT")
            } else if let configured = (gateway["port"] as? Int) ?? (gateway["port"] as? String).flatMap(Self.port) {
                (port, portOrigin) = (configured, "gateway.port in \(place)")
            } else {
                (port, portOrigin) = (Self.defaultPort, "OpenClaw's default port")
            }
            var host = "127.0.0.1"
            switch gateway["bind"] as? String {
            case "custom":
                if let custom = gateway["customBindHost"] as? String, !custom.isEmpty, custom != "0.0.0.0" { host = custom }
            case "tailnet":
                notes.append("the gateway listens on its tailnet address (gateway.bind tailnet), and may not answer on 127.0.0.1: if it does not, pass --url")
            default: break
            }
            (url, urlOrigin) = ("ws://\(host):\(port)", portOrigin)
        }

        // The token.
        let authMode = (auth["mode"] as? String) ?? (auth["password"] != nil && auth["token"] == nil ? "password" : "token")
        switch authMode {
        case "token": break
        case "password":
            return .unusable(
                "the gateway in \(place) asks for a password (gateway.auth.mode password); Tether signs in with a token: set gateway.auth.mode to token")
        case "none":
            return .unusable("the gateway in \(place) asks for no credential (gateway.auth.mode none); Tether needs a token: set gateway.auth.mode to token")
        default:
            return .unusable("the gateway in \(place) uses gateway.auth.mode \(authMode), which Tether cannot sign in with: it needs token")
        }
        let sources: [(Any?, String)] =
            mode == "remote"
            ? [(remote["token"], "gateway.remote.token in \(place)"), (variables["OPENCLAW_GATEWAY_TOKEN"], "OPENCLAW_GATEWAY_TOKEN")]
            : [(auth["token"], "gateway.auth.token in \(place)"), (variables["OPENCLAW_GATEWAY_TOKEN"], "OPENCLAW_GATEWAY_TOKEN")]
        for (source, origin) in sources {
            switch secret(source, settings: root, variables: variables, origin: origin) {
            case .value(let token):
                return .found(Gateway(url: url, token: token, urlOrigin: urlOrigin, tokenOrigin: origin, notes: notes))
            case .unusable(let words):
                return .unusable(words)
            case .absent:
                continue
            }
        }
        return .unusable(
            "\(place) holds no gateway token yet (gateway.auth.token), nor does OPENCLAW_GATEWAY_TOKEN: the gateway writes one at its first start, "
                + "so start it once and run tether setup again, or pass --token-file")
    }

    private enum Secret {
        case value(String)
        case absent
        case unusable(String)
    }

    /// A secret setting: a string (`${VAR}` taken from the environment), or a secret reference
    /// `{source: env|file|exec, provider, id}` as OpenClaw resolves it.
    private func secret(_ setting: Any?, settings: [String: Any], variables: [String: String], origin: String) -> Secret {
        if let text = setting as? String {
            guard let value = Self.substitute(text, variables), !value.isEmpty, !value.contains("${") else { return .absent }
            return .value(value)
        }
        guard let reference = setting as? [String: Any], let source = reference["source"] as? String, let id = reference["id"] as? String else {
            return .absent
        }
        switch source {
        case "env":
            return variables[id].flatMap { $0.isEmpty ? nil : .value($0) } ?? .absent
        case "file":
            let providerName = (reference["provider"] as? String) ?? "default"
            let providers = (settings["secrets"] as? [String: Any])?["providers"] as? [String: Any]
            guard let provider = providers?[providerName] as? [String: Any], let file = provider["path"] as? String else {
                return .unusable("\(origin) names the secrets provider \(providerName), which is not in secrets.providers: fix it, or pass --token-file")
            }
            guard let text = readFile(expandHome(file)) else { return .unusable("\(origin) is kept in \(file), which cannot be read") }
            if (provider["mode"] as? String) == "singleValue" { return .value(text.trimmingCharacters(in: .whitespacesAndNewlines)) }
            guard let object = try? JSON5Value.parse(text),
                let value = Self.pointer(id, in: object) as? String, !value.isEmpty
            else { return .unusable("\(origin) points at \(id) in \(file), which holds no text there") }
            return .value(value)
        case "exec":
            return .unusable("\(origin) comes from a program (a secret of source exec), which tether setup does not run: pass --token-file")
        default:
            return .unusable("\(origin) is a secret of source \(source), which tether setup cannot read: pass --token-file")
        }
    }

    /// `${NAME}` replaced from `variables` (`$${` kept as `${`); unset ones left as they are.
    static func substitute(_ text: String?, _ variables: [String: String]) -> String? {
        guard let text else { return nil }
        var rest = Substring(text)
        var result = ""
        while let start = rest.range(of: "${") {
            if start.lowerBound > rest.startIndex, rest[rest.index(before: start.lowerBound)] == "$" {
                result += rest[..<rest.index(before: start.lowerBound)] + "${"
                rest = rest[start.upperBound...]
                continue
            }
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else { break }
            result += rest[..<start.lowerBound]
            let name = String(rest[start.upperBound..<end])
            result += variables[name] ?? "${\(name)}"
            rest = rest[rest.index(after: end)...]
        }
        return result + rest
    }

    /// A port from `18789`, `127.0.0.1:18789` or `[::1]:18789`.
    static func port(_ text: String) -> Int? {
        let digits = text.split(separator: ":").last.map(String.init) ?? text
        guard let port = Int(digits), (1...65535).contains(port) else { return nil }
        return port
    }

    /// The value a JSON pointer (`/a/b`) names.
    static func pointer(_ pointer: String, in object: Any) -> Any? {
        var current: Any? = object
        for part in pointer.split(separator: "/", omittingEmptySubsequences: true) {
            let key = part.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            if let dictionary = current as? [String: Any] {
                current = dictionary[key]
            } else if let array = current as? [Any], let index = Int(key), array.indices.contains(index) {
                current = array[index]
            } else {
                return nil
            }
        }
        return current
    }

    private var home: String {
        nonEmpty("OPENCLAW_HOME").map(expandHome) ?? nonEmpty("HOME") ?? FileManager.default.homeDirectoryForCurrentUser.path
    }

    private func nonEmpty(_ name: String) -> String? {
        environment[name].flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
    }

    private func expandHome(_ path: String) -> String {
        guard path == "~" || path.hasPrefix("~/") else { return path }
        return (environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path) + path.dropFirst()
    }

    /// `~/.openclaw/openclaw.json` rather than the whole home's path, for the words.
    private func shortened(_ path: String) -> String {
        guard let home = environment["HOME"], !home.isEmpty, path.hasPrefix(home + "/") else { return path }
        return "~" + path.dropFirst(home.count)
    }

    /// A parse error in words: where the decoder stopped, when it says.
    private static func words(_ error: any Error) -> String {
        guard case DecodingError.dataCorrupted(let context) = error else { return "\(error)" }
        let underlying = context.underlyingError.flatMap { ($0 as NSError).userInfo[NSDebugDescriptionErrorKey] as? String }
        return underlying ?? context.debugDescription
    }
}
