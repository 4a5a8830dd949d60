import Foundation
import Logging
import NIOWebSocket
import OpenClawWire
import TetherService

/// How the OpenClaw dialect of the development gateway behaves.
public struct OpenClawGatewaySettings: Sendable {
    /// The real gateway's frame limit (`policy.maxPayload`, 25 MiB), the default here.
    public static let openClawMaximumPayload = 26_214_400

    /// The release it behaves as (docs/GATEWAY.md).
    public var release: OpenClawRelease
    /// The protocol versions it speaks: the release's by default; 3...3 is a gateway before
    /// 2026.5.12, 4...4 one from it on (which refuses protocol-3 clients).
    public var protocols: ClosedRange<Int>
    /// How often it sends `tick` (`policy.tickIntervalMs`).
    public var tickInterval: Duration
    /// Where it keeps session transcripts and paired devices across restarts; nil: in memory.
    public var stateDirectory: String?
    /// How long a finished run's idempotency key is remembered (the gateway's is 5 minutes).
    public var dedupeWindow: Duration
    /// The largest frame it reads (`policy.maxPayload`).
    public var maximumPayload: Int
    /// How long after a session's run ends the first message queued behind it runs (about a second).
    public var followUpDelay: Duration
    /// How many messages a busy session holds (20); beyond it the oldest are dropped.
    public var queueCap: Int
    /// The pause between the model's failed attempts, with the `modelFailure` fault (about 5 s).
    public var modelRetryDelay: Duration
    /// How long an exec approval waits for a decision (the real gateway's agent asks for 30 minutes).
    public var approvalTimeout: Duration
    /// The verbose level of every session (`agents.defaults.verboseDefault`): `off`, `on` or
    /// `full`; a tool's result is sent live only when it is `full`.
    public var verboseDefault: String

    public init(
        release: OpenClawRelease = .release2026_4, protocols: ClosedRange<Int>? = nil, tickInterval: Duration = .seconds(30), stateDirectory: String? = nil,
        dedupeWindow: Duration = .seconds(300),
        maximumPayload: Int = openClawMaximumPayload, followUpDelay: Duration = .seconds(1), queueCap: Int = 20, modelRetryDelay: Duration = .seconds(5),
        approvalTimeout: Duration = .seconds(1800), verboseDefault: String = "off"
    ) {
        self.approvalTimeout = approvalTimeout
        self.verboseDefault = verboseDefault
        self.followUpDelay = followUpDelay
        self.queueCap = max(1, queueCap)
        self.modelRetryDelay = modelRetryDelay
        self.release = release
        self.protocols = protocols ?? release.protocols
        self.tickInterval = tickInterval
        self.stateDirectory = stateDirectory
        self.dedupeWindow = dedupeWindow
        self.maximumPayload = maximumPayload
    }
}

/// The development gateway speaking OpenClaw's protocol (the subset a chat client uses), as
/// the real gateway behaves on the wire (see docs/GATEWAY.md for each behaviour and its test):
/// the challenge in the same write as the `101`, a checked device signature, token auth,
/// pairing with approval, scopes, `chat.send` with an in-memory idempotency cache (lost on
/// restart), a busy session's queue in memory (an empty `final` at once, follow-up turns under
/// the gateway's own run ids, a cap of 20 with an overflow summary turn, all lost on restart),
/// `chat` events for protocol 3 (cumulative text) and 4 (`deltaText`) beside `agent` events,
/// canonical session keys in events, `chat.history`, `chat.abort`, `sessions.list`, `health`,
/// ticks, and event sequence numbers: one counter for the whole gateway on protocol 3 (with
/// events other clients see and this one may not), one per connection on protocol 4.
actor OpenClawGateway {
    let settings: OpenClawGatewaySettings
    /// The shared token (`gateway.auth.token`); ``rotateToken(_:)`` replaces it.
    private var token: String
    let bot: DemoBot
    let record: GatewayRecord
    let faults: FaultSwitch
    let logger: Logger
    let codec = OpenClawCodec()
    private let startedAt = Date()

    var links: [Int: OpenClawClientConnection] = [:]
    /// A restart is draining: work is refused `UNAVAILABLE` until the process ends.
    var restarting = false
    /// What became of each session's last message sent while a run was in progress (`sessions.list`).
    var lastBusyOutcomes: [String: BusyMessageOutcome] = [:]
    /// The device the last admission paired, if it paired one.
    private var newlyPaired: String?
    /// A protocol-3-only gateway numbers every broadcast once, for all connections.
    var globalSequence = 0
    var transcripts: [String: [ChatTranscriptMessage]] = [:]
    var sessionIDs: [String: String] = [:]
    /// Each session's settings and usage, by canonical key. In memory only.
    var sessionStates: [String: SessionState] = [:]
    private var devices: PairedDevices
    private var pairingRequests: [String: PairedDevices.Device] = [:]
    /// Finished runs by idempotency key, with when they finished: what a repeat is answered.
    var finishedRuns: [String: (result: ChatSendResult, ok: Bool, at: Date)] = [:]
    var activeRuns: [String: Run] = [:]
    /// Messages sent while their session was busy, by canonical session key, oldest first: run
    /// one at a time as follow-up turns once the session's run ends. In memory only.
    var queues: [String: [Queued]] = [:]
    /// Messages a full queue dropped, by session: named in one summary turn after the rest ran.
    var overflow: [String: [Queued]] = [:]
    /// Exec approvals waiting for a decision, by id. In memory only.
    var pendingApprovals: [String: PendingApproval] = [:]
    /// Today's release: the inputs accepted and not yet placed in a transcript, by idempotency
    /// key, kept in the state directory across restarts.
    var keptInputs: [String: KeptInput] = [:]

    struct Run {
        var sessionKey: String
        var aborted = false
        /// The reply as far as it streamed: what an abort keeps.
        var text = ""
        /// The id of the run's user entry in the transcript.
        var userEntryID: String?
        /// The run's user entry, in a session with no reply yet: written only with the first one.
        var unwrittenUserEntry: ChatTranscriptMessage?
        /// The idempotency key of the input it runs (a follow-up turn's is its message's, not the run's).
        var inputKey: String?
        /// The connections sent its tool events: those with the `tool-events` capability that
        /// sent a `chat.send` while it ran (its own, or another in its session).
        var toolEventRecipients: Set<Int> = []
        /// What its tool call adds to the transcript before its reply: the assistant entry with
        /// the thinking and the `toolCall` block, and the `toolResult` entry.
        var toolEntries: [ChatTranscriptMessage] = []
        /// Messages steered into it (`queueMode: "steer"`): its reply answers them too.
        var steered: [String] = []
    }

    struct Queued {
        /// The idempotency key it was sent with.
        var key: String?
        var text: String
        var at: Date
        var senderLabel: String?
        var images: [ReceivedImage] = []
        /// The gateway's own turns: their run id and their reply.
        var runID: String?
        var answer: String?
    }

    /// A session's user entry left without a reply by a restart in the middle of its run: the
    /// next message's entry is written merged with it, as the gateway does.
    var orphans: [String: (text: String, at: Date)] = [:]

    init(settings: OpenClawGatewaySettings, token: String, bot: DemoBot, record: GatewayRecord, faults: FaultSwitch, logger: Logger) throws {
        self.settings = settings
        self.token = token
        self.bot = bot
        self.record = record
        self.faults = faults
        self.logger = logger
        self.devices = try PairedDevices(directory: settings.stateDirectory)
        if let directory = settings.stateDirectory { transcripts = Self.loadTranscripts(directory) }
        keptInputs = settings.release.keepsInputs ? Self.loadKeptInputs(settings.stateDirectory) : [:]
        for (session, entries) in transcripts {
            guard let last = entries.last, last.role == "user", entries.contains(where: { $0.role == "assistant" }) else { continue }
            orphans[session] = (last.text, Date(timeIntervalSince1970: Double(last.timestamp ?? 0) / 1000))
        }
    }

    // MARK: Connections

    /// Serves one connection: the challenge, the handshake, then requests until it ends.
    func opened(_ link: OpenClawClientConnection) async {
        let challenge = ConnectChallenge(nonce: link.nonce, ts: OpenClawProtocol.milliseconds(Date()))
        try? await link.write(codec.encode(.event(name: "connect.challenge", payload: try? JSONValue(encoding: challenge), seq: nil)))
        // A client that has not connected within 10 s is closed, as the gateway does.
        Task { [weak link] in
            try? await Task.sleep(for: .seconds(10))
            guard let link, !link.isConnected else { return }
            try? await link.close(.normalClosure, reason: "")
        }
    }

    func closed(_ link: OpenClawClientConnection) {
        links[link.connection] = nil
    }

    /// Handles a text frame from a client.
    func handle(_ text: String, from link: OpenClawClientConnection) async {
        guard !faults.current.silent else { return }
        let frame: OpenClawFrame
        do {
            frame = try codec.decode(text)
        } catch {
            if link.isConnected {
                try? await link.write(codec.encode(.response(id: "invalid", ok: false, payload: nil, error: Self.invalid("invalid request frame: \(error)"))))
            } else {
                try? await link.close(.policyViolation, reason: "invalid request frame")
            }
            return
        }
        guard case .request(let id, let method, let params) = frame else {
            if !link.isConnected { try? await link.close(.policyViolation, reason: "invalid request frame") }
            return
        }
        if restarting, !link.isConnected || method == "chat.send" {
            try? await link.write(codec.encode(.response(id: id, ok: false, payload: nil, error: Self.restartRefusal(method))))
            return
        }
        guard link.isConnected else { return await connect(id: id, method: method, params: params, on: link) }
        await request(id: id, method: method, params: params, on: link)
    }

    private func connect(id: String, method: String, params: JSONValue?, on link: OpenClawClientConnection) async {
        switch admission(method: method, params: params, link: link) {
        case .refuse(let error, let code):
            logger.notice("refused a connect", metadata: ["gateway.connection": "\(link.connection)", "gateway.error": "\(error.message)"])
            try? await link.write(codec.encode(.response(id: id, ok: false, payload: nil, error: error)))
            try? await link.close(code, reason: error.message)
        case .accept(let hello, let deviceID, let scopes, let label):
            let caps = (try? params?.decode(ConnectParams.self))?.caps ?? []
            link.connected(protocolVersion: hello.protocol, scopes: scopes, caps: caps, deviceID: deviceID, senderLabel: label)
            links[link.connection] = link
            logger.info(
                "client connected",
                metadata: ["gateway.connection": "\(link.connection)", "gateway.protocol": "\(hello.protocol)", "gateway.device": "\(deviceID)"])
            try? await link.write(codec.encode(.response(id: id, ok: true, payload: try? JSONValue(encoding: hello), error: nil)))
            if let paired = newlyPaired { await pairingResolved(deviceID: paired, requestID: nil) }
        }
    }

    /// Tells the clients allowed to manage pairing that a device was paired: an event that
    /// takes a number of the gateway's counter, which every other protocol-3 client sees as a gap.
    private func pairingResolved(deviceID: String, requestID: String?) async {
        var payload: [String: JSONValue] = [
            "deviceId": .string(deviceID), "decision": .string("approved"), "ts": .number(Double(OpenClawProtocol.milliseconds(Date()))),
        ]
        if let requestID { payload["requestId"] = .string(requestID) }
        await broadcast(droppable: false, to: { $0.allows("operator.pairing") }) { _ in ("device.pair.resolved", .object(payload)) }
    }

    enum Admission {
        case accept(HelloOk, deviceID: String, scopes: [String], senderLabel: String)
        case refuse(GatewayErrorShape, WebSocketErrorCode)
    }

    /// Checks a `connect` as the gateway does: the first request, valid params, the protocol
    /// range, the client's origin, the token, the device signature over this connection's
    /// nonce, and pairing.
    private func admission(method: String, params: JSONValue?, link: OpenClawClientConnection) -> Admission {
        newlyPaired = nil
        guard method == "connect" else { return .refuse(Self.invalid("invalid handshake: first request must be connect"), .policyViolation) }
        guard let params, let connect = try? params.decode(ConnectParams.self) else {
            return .refuse(Self.invalid("invalid connect params: must have required properties"), .policyViolation)
        }
        let known = ["webchat-ui", "webchat", "cli", "gateway-client", "node-host", "test", "fingerprint", "openclaw-control-ui", "openclaw-macos"]
        guard known.contains(connect.client.id) else {
            return .refuse(Self.invalid("invalid connect params: at /client/id: must be equal to one of the allowed values"), .policyViolation)
        }
        guard connect.maxProtocol >= settings.protocols.lowerBound, connect.minProtocol <= settings.protocols.upperBound else {
            return .refuse(
                GatewayErrorShape(
                    code: "INVALID_REQUEST", message: "protocol mismatch",
                    details: .object(["expectedProtocol": .number(Double(settings.protocols.upperBound))])),
                .protocolError)
        }
        guard connect.client.mode != "webchat" else { return .refuse(Self.invalid("origin not allowed"), .policyViolation) }
        guard connect.role == "operator" || connect.role == "node" else { return .refuse(Self.invalid("invalid role"), .policyViolation) }
        guard let device = connect.device else { return .refuse(GatewayErrorShape(code: "NOT_PAIRED", message: "device identity required"), .policyViolation) }
        guard let nonce = device.nonce else { return .refuse(Self.invalid("device nonce required"), .policyViolation) }
        guard nonce == link.nonce else { return .refuse(Self.invalid("device nonce mismatch"), .policyViolation) }
        guard let rawKey = Base64URL.decode(device.publicKey), DeviceIdentity.deviceID(ofPublicKey: rawKey) == device.id else {
            return .refuse(Self.invalid("device identity mismatch"), .policyViolation)
        }
        guard abs(OpenClawProtocol.milliseconds(Date()) - device.signedAt) <= 10 * 60 * 1000 else {
            return .refuse(Self.invalid("device signature expired"), .policyViolation)
        }
        // Auth: the shared token, or the device token this gateway issued to the device.
        let paired = devices.device(device.id)
        let sharedOK = connect.auth?.token.map { DevGateway.constantTimeEquals(Array($0.utf8), Array(token.utf8)) } ?? false
        if !sharedOK, let offered = connect.auth?.deviceToken {
            guard let paired, DevGateway.constantTimeEquals(Array(offered.utf8), Array(paired.token.utf8)), !faults.current.rejectToken else {
                return .refuse(Self.invalid("unauthorized: device token mismatch (rotate/reissue device token)"), .policyViolation)
            }
        } else if !sharedOK || faults.current.rejectToken {
            guard connect.auth?.token != nil else {
                return .refuse(Self.invalid("unauthorized: gateway token missing (provide gateway auth token)"), .policyViolation)
            }
            // As the gateway: a device token it issued would do instead.
            let details: JSONValue = .object([
                "code": .string("AUTH_TOKEN_MISMATCH"), "authReason": .string("token_mismatch"), "canRetryWithDeviceToken": .bool(true),
                "recommendedNextStep": .string("retry_with_device_token"),
            ])
            return .refuse(
                GatewayErrorShape(code: "INVALID_REQUEST", message: "unauthorized: gateway token mismatch (provide gateway auth token)", details: details),
                .policyViolation)
        }
        let signedToken = connect.auth?.token ?? connect.auth?.deviceToken ?? ""
        let signatureOK = DeviceSignedPayload.Version.allCases.contains { version in
            let payload = DeviceSignedPayload(
                version: version, deviceID: device.id, clientID: connect.client.id, clientMode: connect.client.mode, role: connect.role,
                scopes: connect.scopes, signedAtMs: device.signedAt, token: signedToken, nonce: nonce, platform: connect.client.platform,
                deviceFamily: connect.client.deviceFamily ?? "")
            return DeviceIdentity.verify(signature: device.signature, of: payload.text, publicKey: device.publicKey)
        }
        guard signatureOK else { return .refuse(Self.invalid("device signature invalid"), .policyViolation) }
        // Pairing: a device not yet paired waits for a person, when pairing is required.
        var issued = paired
        if issued == nil {
            if faults.current.requirePairing {
                let requestID = pairingRequests.first { $0.value.id == device.id }?.key ?? UUID().uuidString.lowercased().prefix(8).description
                pairingRequests[requestID] = PairedDevices.Device(id: device.id, publicKey: device.publicKey, token: "", scopes: connect.scopes)
                logger.notice("pairing required", metadata: ["gateway.device": "\(device.id)", "gateway.request": "\(requestID)"])
                return .refuse(
                    GatewayErrorShape(code: "NOT_PAIRED", message: "pairing required", details: .object(["requestId": .string(requestID)])), .policyViolation)
            }
            issued = devices.pair(id: device.id, publicKey: device.publicKey, scopes: connect.scopes)
            newlyPaired = device.id
        } else if let known = issued, !devices.missingScopes(of: known, asking: connect.scopes).isEmpty {
            // A scope upgrade is never granted silently: a person approves it; the device keeps its identity.
            let requestID = pairingRequests.first { $0.value.id == device.id }?.key ?? UUID().uuidString.lowercased().prefix(8).description
            pairingRequests[requestID] = PairedDevices.Device(id: device.id, publicKey: device.publicKey, token: "", scopes: connect.scopes)
            logger.notice(
                "scope upgrade requires approval",
                metadata: [
                    "gateway.device": "\(device.id)", "gateway.request": "\(requestID)",
                    "gateway.scopes": "\(devices.missingScopes(of: known, asking: connect.scopes))",
                ])
            return .refuse(
                GatewayErrorShape(
                    code: "NOT_PAIRED", message: "pairing required",
                    details: .object(["code": .string("PAIRING_REQUIRED"), "requestId": .string(requestID), "reason": .string("scope-upgrade")])),
                .policyViolation)
        }
        let version = min(connect.maxProtocol, settings.protocols.upperBound)
        let hello = HelloOk(
            protocol: version, server: HelloOk.Server(version: settings.release.serverVersion, connId: UUID().uuidString.lowercased()),
            features: HelloOk.Features(
                methods: Self.methods + (settings.release.takesQueueModes ? ["chat.steer"] : []),
                events: [
                    "connect.challenge", "chat", "agent", "tick", "health", "presence", "shutdown", "device.pair.resolved", "exec.approval.requested",
                    "exec.approval.resolved",
                ]),
            snapshot: HelloOk.Snapshot(
                uptimeMs: OpenClawProtocol.milliseconds(Date()) - OpenClawProtocol.milliseconds(startedAt),
                sessionDefaults: HelloOk.SessionDefaults(defaultAgentId: "main", mainKey: "main", mainSessionKey: Self.mainSessionKey, scope: "per-sender")),
            auth: HelloOk.Auth(deviceToken: issued?.token, role: connect.role, scopes: connect.scopes, issuedAtMs: OpenClawProtocol.milliseconds(Date())),
            policy: HelloOk.Policy(
                maxPayload: settings.maximumPayload, maxBufferedBytes: 16 << 20, tickIntervalMs: Int((settings.tickInterval.inSeconds * 1000).rounded())))
        let label = OpenClawProtocol.senderLabel(displayName: connect.client.displayName, clientID: connect.client.id)
        return .accept(hello, deviceID: device.id, scopes: connect.scopes, senderLabel: label)
    }

    static let mainSessionKey = "agent:main:main"
    /// The model its assistant entries name.
    static let model = "tether-dev-echo"
    static let methods = [
        "health", "chat.send", "chat.history", "chat.abort", "sessions.list", "models.list", "agents.list", "exec.approval.list", "exec.approval.resolve",
        "plugin.approval.list",
        "plugin.approval.resolve",
    ]

    /// Approves a pending pairing request; the device's id, or nil when there is no such request.
    func approve(requestID: String) async -> String? {
        guard let request = pairingRequests.removeValue(forKey: requestID) else { return nil }
        _ = devices.pair(id: request.id, publicKey: request.publicKey, scopes: request.scopes ?? OpenClawProtocol.chatScopes)
        logger.notice("device approved", metadata: ["gateway.device": "\(request.id)", "gateway.request": "\(requestID)"])
        await pairingResolved(deviceID: request.id, requestID: requestID)
        return request.id
    }

    /// The pending pairing requests and the paired devices.
    func deviceList() -> (pending: [String: String], paired: [String]) {
        (pairingRequests.mapValues(\.id), devices.ids)
    }

    /// Replaces the shared token, as a person rotating `gateway.auth.token` does: open
    /// connections stay, new ones need the new token (or a device token the gateway issued).
    func rotateToken(_ newToken: String) {
        token = newToken
        logger.notice("the shared token was rotated")
    }

    /// Forgets every finished run's idempotency key, as a restart does.
    func forgetIdempotencyKeys() {
        finishedRuns.removeAll()
    }

    // MARK: Helpers

    /// A session key in the form events carry it (`side` is `agent:main:side`).
    static func canonical(_ key: String) -> String { OpenClawProtocol.canonicalSessionKey(key, mainSessionKey: mainSessionKey) }

    static func invalid(_ message: String) -> GatewayErrorShape { GatewayErrorShape(code: "INVALID_REQUEST", message: message) }

    static func missingScope(_ scope: String) -> GatewayErrorShape { invalid("missing scope: \(scope)") }
}
