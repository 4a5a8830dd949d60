public import FoundationEssentials

/// The kind of network interface a path goes through.
public enum InterfaceKind: String, Codable, Sendable, CaseIterable {
    case wired
    case wifi
    case cellular
    case loopback
    case other
}

/// The network path: whether a usable default route exists, and through what.
public struct NetworkPath: Codable, Hashable, Sendable {
    /// True when a default route leads through an interface that is up.
    public var satisfied: Bool
    /// The interface of the default route, if any.
    public var interface: String?
    /// What kind of interface that is.
    public var kind: InterfaceKind?
    /// Whether traffic over it may cost money (cellular).
    public var expensive: Bool
    /// Why the path is unsatisfied, in words.
    public var reason: String?

    public init(satisfied: Bool, interface: String?, kind: InterfaceKind?, expensive: Bool, reason: String? = nil) {
        self.satisfied = satisfied
        self.interface = interface
        self.kind = kind
        self.expensive = expensive
        self.reason = reason
    }
}

/// The phases of the connection to the gateway.
public enum ConnectionPhase: String, Codable, Sendable, CaseIterable {
    case disconnected
    case connecting
    case connected
    case reconnecting
    /// Closed on purpose until the front end resumes.
    case suspended
    /// No usable network path; waiting for one before trying again.
    case waitingForNetwork
    /// Given up until a manual reconnect, a network change, a resume or a new credential.
    case failed
}

/// Why connd gave up.
public enum ConnectionFailure: String, Codable, Sendable, CaseIterable {
    /// The gateway could not be reached for any of the first attempts.
    case unreachable
    /// The gateway rejected the token (HTTP 401 or 403); no retry until it changes.
    case credentialRejected
    /// The token cannot be read here (a file missing, empty or readable by others, a
    /// variable unset): the gateway was not asked. Connects once it can be read.
    case credentialUnavailable
    /// The TLS handshake failed: the certificate is not trusted or does not match.
    case tls
    /// Every reconnect attempt after a lost connection failed.
    case retriesExhausted
    /// OpenClaw: the gateway does not know this device yet; connd asks again by itself every
    /// few seconds, and connects once a person has approved it (`lastError` names the request).
    case pairingRequired
    /// OpenClaw: the gateway speaks no protocol version Tether offers (3 and 4).
    case protocolMismatch
    /// OpenClaw: the gateway refused this client's origin.
    case originRefused
    /// OpenClaw: the gateway let Tether in without the scopes a chat client needs.
    case scopeMissing
    /// The gateway refused the connection for a reason retrying cannot change (see `lastError`).
    case gatewayRefused
}

/// Who connd connects as: enough to reconnect the same way, never the secret.
public struct ConnectionIdentity: Codable, Hashable, Sendable {
    /// The gateway URL.
    public var url: String
    /// The user, when the URL or configuration names one.
    public var user: String?
    /// How connd authenticates: `bearer-token`.
    public var authMethod: String
    /// Which credential: the token file's path, or the environment variable's name.
    public var keyID: String?

    public init(url: String, user: String? = nil, authMethod: String, keyID: String?) {
        self.url = url
        self.user = user
        self.authMethod = authMethod
        self.keyID = keyID
    }
}

/// The connection to the gateway, as connd publishes it: enough for a front end to draw
/// its banner from this alone.
public struct ConnectionStatus: Codable, Hashable, Sendable {
    public var phase: ConnectionPhase
    /// The gateway URL (never with a secret in it).
    public var url: String
    /// Counts connections made since connd started; frames carry it so that nothing meant
    /// for a dead connection is written to a new one.
    public var epoch: Int
    /// Names the open connection uniquely, across connd restarts too; nil when not connected.
    public var connectionID: String?
    /// The attempt number while connecting or reconnecting, from 1.
    public var attempt: Int
    /// When the next attempt starts, while waiting to reconnect.
    public var nextAttemptAt: Date?
    /// The last error, in words.
    public var lastError: String?
    /// Why connd gave up, when the phase is failed.
    public var failure: ConnectionFailure?
    /// Who connd connects as.
    public var identity: ConnectionIdentity?
    /// What suspended the connection, while the phase is suspended.
    public var suspendReason: SuspendReason?
    /// What the gateway said of itself when the open connection began; nil when not connected.
    public var gateway: GatewayInfo?
    /// What a person should read: the phase's words, with the way forward when failed.
    public var words: String

    public init(
        phase: ConnectionPhase, url: String, epoch: Int, connectionID: String? = nil, attempt: Int = 0, nextAttemptAt: Date? = nil,
        lastError: String? = nil, failure: ConnectionFailure? = nil, identity: ConnectionIdentity? = nil, suspendReason: SuspendReason? = nil,
        gateway: GatewayInfo? = nil
    ) {
        self.suspendReason = suspendReason
        self.gateway = gateway
        self.phase = phase
        self.url = url
        self.epoch = epoch
        self.connectionID = connectionID
        self.attempt = attempt
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.failure = failure
        self.identity = identity
        self.words = Self.words(phase: phase, failure: failure, lastError: lastError)
    }
}

/// The dialect a gateway speaks on the wire.
public enum WireDialect: String, Codable, Sendable, CaseIterable {
    /// The seeds' JSON envelope (docs/WIRE.md).
    case seed
    /// OpenClaw's gateway protocol, versions 3 and 4.
    case openclaw
}

/// The open connection's gateway, as its handshake showed it (never a secret).
public struct GatewayInfo: Codable, Hashable, Sendable {
    public var dialect: WireDialect
    /// OpenClaw: the protocol version in use (3 or 4).
    public var protocolVersion: Int?
    /// OpenClaw: the gateway's release.
    public var serverVersion: String?
    /// OpenClaw: which gateway the handshake showed, and what of its chat Tether relies on.
    public var generation: GatewayGeneration?
    /// OpenClaw: the gateway's name for this connection; a restarted gateway has new ones.
    public var serverConnectionID: String?
    /// OpenClaw: how long the gateway had been running when this connection began.
    public var uptimeMilliseconds: Int?
    /// OpenClaw: when the gateway started, by connd's clock (its uptime taken from the time of
    /// the handshake): a program that joins the connection later reads it as it is.
    public var startedAt: Date?
    /// OpenClaw: the gateway's tick interval; no tick for twice this is a dead connection.
    public var tickIntervalMilliseconds: Int?
    /// OpenClaw: the largest frame the gateway reads.
    public var maximumPayload: Int?
    /// OpenClaw: the key the `main` session alias stands for.
    public var mainSessionKey: String?
    /// The gateway's clock minus connd's, in milliseconds, measured at the handshake (0 when unknown).
    public var clockOffsetMilliseconds: Int?
    /// The OpenClaw device id Tether connected as.
    public var deviceID: String?
    /// OpenClaw: connected with the token the gateway issued to this device, because it
    /// refused the shared token (the token file needs the gateway's new token).
    public var connectedWithDeviceToken: Bool?
    /// OpenClaw: the scopes the gateway granted (as asked, when it did not say).
    public var scopes: [String]?
    /// OpenClaw: the gateway waits for a person to approve the wider scopes Tether asked for
    /// (`operator.approvals`): its request id (empty when it named none). Connected with the
    /// chat scopes meanwhile.
    public var scopeUpgradeRequest: String?

    public init(
        dialect: WireDialect, protocolVersion: Int? = nil, serverVersion: String? = nil, serverConnectionID: String? = nil,
        uptimeMilliseconds: Int? = nil, startedAt: Date? = nil, tickIntervalMilliseconds: Int? = nil, maximumPayload: Int? = nil,
        mainSessionKey: String? = nil, clockOffsetMilliseconds: Int? = nil, deviceID: String? = nil, scopes: [String]? = nil
    ) {
        self.scopes = scopes
        self.dialect = dialect
        self.protocolVersion = protocolVersion
        self.serverVersion = serverVersion
        self.serverConnectionID = serverConnectionID
        self.uptimeMilliseconds = uptimeMilliseconds
        self.startedAt = startedAt
        self.tickIntervalMilliseconds = tickIntervalMilliseconds
        self.maximumPayload = maximumPayload
        self.mainSessionKey = mainSessionKey
        self.clockOffsetMilliseconds = clockOffsetMilliseconds
        self.deviceID = deviceID
    }
}

/// Which conversation of the gateway Tether chats in, as protod publishes it (retained).
public struct ConversationSession: Codable, Hashable, Sendable {
    /// The dialect of the connection it was decided on.
    public var dialect: WireDialect
    /// OpenClaw: the session key in use (the `main` alias resolved); nil in the seed dialect,
    /// whose gateway has one conversation per connection's token.
    public var sessionKey: String?
    /// What was asked for (`--session`, `tether session use`), when it differs from the key.
    public var requested: String?
    /// OpenClaw, after a switch: the session that messages sent before it are still in, with
    /// how many of them wait for the gateway or its reply there. Tether chats in one session
    /// at a time: it goes over to `sessionKey` once they are answered; messages sent since
    /// wait in the outbox until then. Nil when nothing is left behind.
    public var finishing: String?
    public var finishingMessages: Int?

    public init(dialect: WireDialect, sessionKey: String?, requested: String? = nil, finishing: String? = nil, finishingMessages: Int? = nil) {
        self.dialect = dialect
        self.sessionKey = sessionKey
        self.requested = requested
        self.finishing = finishing
        self.finishingMessages = finishingMessages
    }
}

/// What suspended the connection; it also says what resumes it by itself.
public enum SuspendReason: String, Codable, Sendable, CaseIterable {
    /// A front end or `tether suspend` asked; only a resume command resumes it.
    case command
    /// The last front end left and none came back within the grace period; a front end arriving resumes it.
    case idle
    /// The machine went to sleep (logind); waking resumes it.
    case sleep
}

/// A text frame of the wire protocol, carried over the bus.
public struct WireFrame: Codable, Hashable, Sendable {
    /// The connection the frame came from or is meant for; `nil` means the current one.
    public var epoch: Int?
    /// The frame, exactly as on the WebSocket.
    public var text: String

    public init(epoch: Int?, text: String) {
        self.epoch = epoch
        self.text = text
    }
}
