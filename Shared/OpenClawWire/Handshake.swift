public import FoundationEssentials
import TetherWire

/// The `connect.challenge` event's payload: the nonce to sign, and the gateway's clock.
public struct ConnectChallenge: Sendable, Hashable, Codable {
    public var nonce: String
    /// The gateway's time in milliseconds since 1970.
    public var ts: Int?

    public init(nonce: String, ts: Int?) {
        self.nonce = nonce
        self.ts = ts
    }
}

/// The params of the `connect` request, the first frame a client sends.
public struct ConnectParams: Sendable, Hashable, Codable {
    public struct Client: Sendable, Hashable, Codable {
        public var id: String
        public var displayName: String?
        public var version: String
        public var platform: String
        public var deviceFamily: String?
        public var mode: String
        public var instanceId: String?

        public init(
            id: String, displayName: String? = nil, version: String, platform: String, deviceFamily: String? = nil, mode: String,
            instanceId: String? = nil
        ) {
            self.id = id
            self.displayName = displayName
            self.version = version
            self.platform = platform
            self.deviceFamily = deviceFamily
            self.mode = mode
            self.instanceId = instanceId
        }
    }

    public struct Auth: Sendable, Hashable, Codable {
        public var token: String?
        public var deviceToken: String?

        public init(token: String? = nil, deviceToken: String? = nil) {
            self.token = token
            self.deviceToken = deviceToken
        }
    }

    public struct Device: Sendable, Hashable, Codable {
        /// SHA-256 of the raw public key, lowercase hex.
        public var id: String
        /// The raw 32-byte Ed25519 public key, base64url.
        public var publicKey: String
        /// The Ed25519 signature of the signed string, base64url.
        public var signature: String
        /// When it was signed, milliseconds since 1970.
        public var signedAt: Int
        /// The challenge's nonce.
        public var nonce: String?

        public init(id: String, publicKey: String, signature: String, signedAt: Int, nonce: String?) {
            self.id = id
            self.publicKey = publicKey
            self.signature = signature
            self.signedAt = signedAt
            self.nonce = nonce
        }
    }

    public var minProtocol: Int
    public var maxProtocol: Int
    public var client: Client
    public var role: String
    public var scopes: [String]
    public var caps: [String]
    public var auth: Auth?
    public var device: Device?
    public var locale: String?
    public var userAgent: String?

    public init(
        minProtocol: Int, maxProtocol: Int, client: Client, role: String, scopes: [String], caps: [String] = [], auth: Auth?, device: Device?,
        locale: String? = nil, userAgent: String? = nil
    ) {
        self.minProtocol = minProtocol
        self.maxProtocol = maxProtocol
        self.client = client
        self.role = role
        self.scopes = scopes
        self.caps = caps
        self.auth = auth
        self.device = device
        self.locale = locale
        self.userAgent = userAgent
    }
}

/// The payload of a successful `connect` response, as far as a chat client reads it.
public struct HelloOk: Sendable, Hashable, Codable {
    public struct Server: Sendable, Hashable, Codable {
        public var version: String?
        public var connId: String?

        public init(version: String?, connId: String?) {
            self.version = version
            self.connId = connId
        }
    }

    public struct Features: Sendable, Hashable, Codable {
        public var methods: [String]?
        public var events: [String]?

        public init(methods: [String]?, events: [String]?) {
            self.methods = methods
            self.events = events
        }
    }

    public struct SessionDefaults: Sendable, Hashable, Codable {
        public var defaultAgentId: String?
        public var mainKey: String?
        public var mainSessionKey: String?
        public var scope: String?

        public init(defaultAgentId: String?, mainKey: String?, mainSessionKey: String?, scope: String?) {
            self.defaultAgentId = defaultAgentId
            self.mainKey = mainKey
            self.mainSessionKey = mainSessionKey
            self.scope = scope
        }
    }

    public struct Snapshot: Sendable, Hashable, Codable {
        public var uptimeMs: Int?
        public var sessionDefaults: SessionDefaults?

        public init(uptimeMs: Int?, sessionDefaults: SessionDefaults?) {
            self.uptimeMs = uptimeMs
            self.sessionDefaults = sessionDefaults
        }
    }

    public struct Auth: Sendable, Hashable, Codable {
        public var deviceToken: String?
        public var role: String?
        public var scopes: [String]?
        public var issuedAtMs: Int?

        public init(deviceToken: String?, role: String?, scopes: [String]?, issuedAtMs: Int?) {
            self.deviceToken = deviceToken
            self.role = role
            self.scopes = scopes
            self.issuedAtMs = issuedAtMs
        }
    }

    public struct Policy: Sendable, Hashable, Codable {
        public var maxPayload: Int?
        public var maxBufferedBytes: Int?
        public var tickIntervalMs: Int?

        public init(maxPayload: Int?, maxBufferedBytes: Int?, tickIntervalMs: Int?) {
            self.maxPayload = maxPayload
            self.maxBufferedBytes = maxBufferedBytes
            self.tickIntervalMs = tickIntervalMs
        }
    }

    public var type: String?
    public var `protocol`: Int
    public var server: Server?
    public var features: Features?
    public var snapshot: Snapshot?
    public var auth: Auth?
    public var policy: Policy?

    public init(
        protocol: Int, server: Server?, features: Features?, snapshot: Snapshot?, auth: Auth?, policy: Policy?
    ) {
        self.type = "hello-ok"
        self.protocol = `protocol`
        self.server = server
        self.features = features
        self.snapshot = snapshot
        self.auth = auth
        self.policy = policy
    }
}

/// The protocol facts a chat client builds on.
public enum OpenClawProtocol {
    /// A time as the protocol writes it: whole milliseconds since 1970.
    public static func milliseconds(_ date: Date) -> Int {
        Int((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// The protocol versions Tether offers: 3 and 4; the gateway's `hello-ok` says which it uses.
    public static let minimumVersion = 3
    public static let maximumVersion = 4
    /// The scopes a chat client needs: history, health and sessions (read), sending and aborting (write).
    public static let chatScopes = ["operator.read", "operator.write"]
    /// The capability a client names in `connect` to be sent the `agent` events of stream
    /// `tool` (a run's tool calls) for the runs it starts (`GATEWAY_CLIENT_CAPS.TOOL_EVENTS`).
    public static let toolEventsCapability = "tool-events"
    /// Who Tether is: a native command-line operator client (no browser origin check applies).
    public static let clientID = "cli"
    public static let clientMode = "cli"
    /// The name Tether gives itself (`client.displayName`), which the gateway shows other clients.
    public static let displayName = "Tether"

    /// The label a gateway gives the messages a client sends (`senderLabel` in `chat.history`):
    /// its display name, with its client id in brackets when they differ.
    public static func senderLabel(displayName: String?, clientID: String) -> String {
        guard let displayName, !displayName.isEmpty, displayName != clientID else { return clientID }
        return "\(displayName) (\(clientID))"
    }

    /// The first line of the user entry a gateway writes in place of the next message after it
    /// restarted in the middle of a run: the orphaned message and the new one, merged.
    public static let restartRewriteHeader = "[Queued user message that arrived while the previous turn was still active]"

    /// What a user entry in history says: for the gateway's rewrite after a restart, the parts
    /// it merged (the orphaned messages, then the new one), each without its time stamp;
    /// otherwise the text itself.
    public static func rewriteParts(of text: String) -> [String] {
        guard text.hasPrefix(restartRewriteHeader + "\n\n") else { return [text] }
        let body = text.dropFirst(restartRewriteHeader.count + 2)
        return body.components(separatedBy: "\n\n\n").map { part in
            // Each part starts with its time in brackets: `[Thu 2026-11-26 08:14 UTC] text`.
            guard part.hasPrefix("["), let close = part.firstRange(of: "] ") else { return part }
            return String(part[close.upperBound...])
        }
    }

    /// The label of the messages Tether sends: `Tether (cli)`.
    public static var ownSenderLabel: String { senderLabel(displayName: displayName, clientID: clientID) }
    public static let role = "operator"
    public static let platform = "linux"
    public static let deviceFamily = "desktop"
    /// The tick interval when `hello-ok` names none.
    public static let defaultTickIntervalMs = 30_000
    /// The session alias the official clients rewrite to `sessionDefaults.mainSessionKey`.
    public static let mainSessionAlias = "main"

    /// The session key to send, in the gateway's canonical form, as its events name the session:
    /// nothing, the `main` alias or the main key is the main session key; `global` and keys
    /// that name their agent (`agent:…`) stand as they are; any other key is a session of the
    /// default agent (`side` is `agent:main:side`). The agent and main key are read from
    /// `mainSessionKey` (`agent:<agentId>:<mainKey>`, from `hello-ok`'s session defaults).
    /// Keys are compared without case, as the gateway stores them in lower case.
    public static func canonicalSessionKey(_ requested: String?, mainSessionKey: String?) -> String {
        let main = mainSessionKey ?? "agent:main:main"
        // The usual case, asked for each message waiting at each turn of protod's machine: none asked.
        guard let asked = requested, !asked.isEmpty else { return main }
        let requested = asked.trimmingWhitespace().lowercased()
        let parts = main.split(separator: ":", maxSplits: 2).map(String.init)
        let (agentID, mainKey) = parts.count == 3 && parts[0] == "agent" ? (parts[1], parts[2]) : ("main", mainSessionAlias)
        if requested.isEmpty || requested == mainSessionAlias || requested == mainKey.lowercased() { return main }
        if requested == "global" || requested.hasPrefix("agent:") { return requested }
        return "agent:\(agentID.lowercased()):\(requested)"
    }
}
