import Foundation
import Logging
import NIOWebSocket
import OpenClawWire
import TetherService

/// How the OpenClaw dialect of the development gateway behaves.
public struct OpenClawGatewaySettings: Sendable {
    /// The protocol versions it speaks: 3...4 by default; 3...3 is a gateway before 2026.5.12,
    /// 4...4 one from it on (which refuses protocol-3 clients).
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

    public init(
        protocols: ClosedRange<Int> = 3...4, tickInterval: Duration = .seconds(30), stateDirectory: String? = nil, dedupeWindow: Duration = .seconds(300),
        maximumPayload: Int = 1 << 20, followUpDelay: Duration = .seconds(1), queueCap: Int = 20, modelRetryDelay: Duration = .seconds(5)
    ) {
        self.followUpDelay = followUpDelay
        self.queueCap = max(1, queueCap)
        self.modelRetryDelay = modelRetryDelay
        self.protocols = protocols
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
    private let settings: OpenClawGatewaySettings
    /// The shared token (`gateway.auth.token`); ``rotateToken(_:)`` replaces it.
    private var token: String
    private let bot: DemoBot
    private let record: GatewayRecord
    private let faults: FaultSwitch
    private let logger: Logger
    private let codec = OpenClawCodec()
    private let startedAt = Date()

    private var links: [Int: OpenClawClientConnection] = [:]
    /// The device the last admission paired, if it paired one.
    private var newlyPaired: String?
    /// A protocol-3-only gateway numbers every broadcast once, for all connections.
    private var globalSequence = 0
    private var transcripts: [String: [ChatTranscriptMessage]] = [:]
    private var sessionIDs: [String: String] = [:]
    private var devices: PairedDevices
    private var pairingRequests: [String: PairedDevices.Device] = [:]
    /// Finished runs by idempotency key, with when they finished: what a repeat is answered.
    private var finishedRuns: [String: (result: ChatSendResult, ok: Bool, at: Date)] = [:]
    private var activeRuns: [String: Run] = [:]
    /// Messages sent while their session was busy, by canonical session key, oldest first: run
    /// one at a time as follow-up turns once the session's run ends. In memory only.
    private var queues: [String: [Queued]] = [:]
    /// Messages a full queue dropped, by session: named in one summary turn after the rest ran.
    private var overflow: [String: [Queued]] = [:]

    struct Run {
        var sessionKey: String
        var aborted = false
        /// The reply as far as it streamed: what an abort keeps.
        var text = ""
        /// The id of the run's user entry in the transcript.
        var userEntryID: String?
        /// The run's user entry, in a session with no reply yet: written only with the first one.
        var unwrittenUserEntry: ChatTranscriptMessage?
    }

    struct Queued {
        var text: String
        var at: Date
        var senderLabel: String?
    }

    /// A session's user entry left without a reply by a restart in the middle of its run: the
    /// next message's entry is written merged with it, as the gateway does.
    private var orphans: [String: (text: String, at: Date)] = [:]

    init(settings: OpenClawGatewaySettings, token: String, bot: DemoBot, record: GatewayRecord, faults: FaultSwitch, logger: Logger) throws {
        self.settings = settings
        self.token = token
        self.bot = bot
        self.record = record
        self.faults = faults
        self.logger = logger
        self.devices = try PairedDevices(directory: settings.stateDirectory)
        if let directory = settings.stateDirectory { transcripts = Self.loadTranscripts(directory) }
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
            link.connected(protocolVersion: hello.protocol, scopes: scopes, deviceID: deviceID, senderLabel: label)
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
                pairingRequests[requestID] = PairedDevices.Device(id: device.id, publicKey: device.publicKey, token: "")
                logger.notice("pairing required", metadata: ["gateway.device": "\(device.id)", "gateway.request": "\(requestID)"])
                return .refuse(
                    GatewayErrorShape(code: "NOT_PAIRED", message: "pairing required", details: .object(["requestId": .string(requestID)])), .policyViolation)
            }
            issued = devices.pair(id: device.id, publicKey: device.publicKey)
            newlyPaired = device.id
        }
        let version = min(connect.maxProtocol, settings.protocols.upperBound)
        let hello = HelloOk(
            protocol: version, server: HelloOk.Server(version: "tether-gateway-dev", connId: UUID().uuidString.lowercased()),
            features: HelloOk.Features(
                methods: Self.methods, events: ["connect.challenge", "chat", "agent", "tick", "health", "presence", "shutdown", "device.pair.resolved"]),
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
    static let methods = ["health", "chat.send", "chat.history", "chat.abort", "sessions.list"]

    /// Approves a pending pairing request; the device's id, or nil when there is no such request.
    func approve(requestID: String) async -> String? {
        guard let request = pairingRequests.removeValue(forKey: requestID) else { return nil }
        _ = devices.pair(id: request.id, publicKey: request.publicKey)
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

    // MARK: Requests

    private func request(id: String, method: String, params: JSONValue?, on link: OpenClawClientConnection) async {
        let answer: (ok: Bool, payload: JSONValue?, error: GatewayErrorShape?)
        switch method {
        case "chat.send":
            let sent = await send(params, on: link)
            answer = sent.answer
            if let queued = sent.queued {
                // A busy session's message: `started`, then at once a `final` with no message.
                try? await link.write(codec.encode(.response(id: id, ok: answer.ok, payload: answer.payload, error: answer.error)))
                await broadcast(droppable: false) { _ in
                    ("chat", try? JSONValue(encoding: ChatEventPayload(runId: queued.runID, sessionKey: queued.sessionKey, seq: 1, state: .final)))
                }
                return
            }
            let delay = faults.current.acknowledgementDelayMilliseconds
            if delay > 0 {
                // The run has started; only its answer is late.
                let text = codec.encode(.response(id: id, ok: answer.ok, payload: answer.payload, error: answer.error))
                Task {
                    try? await Task.sleep(for: .milliseconds(delay))
                    try? await link.write(text)
                }
                return
            }
        case "chat.history":
            guard link.allows("operator.read") else { return await reply(id, Self.missingScope("operator.read"), on: link) }
            guard let params = try? params?.decode(ChatHistoryParams.self) else {
                return await reply(id, Self.invalid("invalid chat.history params"), on: link)
            }
            let limit = min(max(params.limit ?? 200, 1), 1000)
            let key = Self.canonical(params.sessionKey)
            let messages = (transcripts[key] ?? []).suffix(limit).map(Self.shortenedForHistory)
            // The key as the client sent it; an unknown session has no id.
            let result = ChatHistoryResult(sessionKey: params.sessionKey, sessionId: transcripts[key] == nil ? nil : sessionID(key), messages: messages)
            answer = (true, try? JSONValue(encoding: result), nil)
        case "chat.abort":
            guard link.allows("operator.write") else { return await reply(id, Self.missingScope("operator.write"), on: link) }
            guard let params = try? params?.decode(ChatAbortParams.self) else { return await reply(id, Self.invalid("invalid chat.abort params"), on: link) }
            if let runID = params.runId, let run = activeRuns[runID], run.sessionKey != Self.canonical(params.sessionKey) {
                return await reply(id, Self.invalid("runId does not match sessionKey"), on: link)
            }
            let aborted = await abort(sessionKey: Self.canonical(params.sessionKey), echoing: params.sessionKey, runID: params.runId, reason: "rpc")
            answer = (true, .object(["ok": .bool(true), "aborted": .bool(!aborted.isEmpty), "runIds": .array(aborted.map(JSONValue.string))]), nil)
        case "sessions.list":
            guard link.allows("operator.read") else { return await reply(id, Self.missingScope("operator.read"), on: link) }
            let sessions = Set(transcripts.keys).union([Self.mainSessionKey]).sorted().map { key in
                SessionsListResult.Session(key: key, displayName: nil, updatedAt: transcripts[key]?.last?.timestamp)
            }
            answer = (true, try? JSONValue(encoding: SessionsListResult(sessions: sessions)), nil)
        case "health":
            answer = (true, .object(["ok": .bool(true), "ts": .number(Double(OpenClawProtocol.milliseconds(Date())))]), nil)
        case "connect":
            answer = (false, nil, Self.invalid("connect is only valid as the first request"))
        default:
            answer = (false, nil, Self.invalid("unknown method: \(method)"))
        }
        try? await link.write(codec.encode(.response(id: id, ok: answer.ok, payload: answer.payload, error: answer.error)))
    }

    private func reply(_ id: String, _ error: GatewayErrorShape, on link: OpenClawClientConnection) async {
        try? await link.write(codec.encode(.response(id: id, ok: false, payload: nil, error: error)))
    }

    /// `chat.send`: a new key starts a run, or, while the session is busy, waits in its queue;
    /// a key whose run is under way is `in_flight`; a finished one within the window gets its
    /// cached answer; after the window or a restart, a repeat is a new message.
    private func send(
        _ params: JSONValue?, on link: OpenClawClientConnection
    ) async -> (
        answer: (Bool, JSONValue?, GatewayErrorShape?), queued: (runID: String, sessionKey: String)?
    ) {
        guard link.allows("operator.write") else { return ((false, nil, Self.missingScope("operator.write")), nil) }
        guard let send = try? params?.decode(ChatSendParams.self), !send.sessionKey.isEmpty, !send.idempotencyKey.isEmpty else {
            return ((false, nil, Self.invalid("invalid chat.send params: must have required properties sessionKey, message, idempotencyKey")), nil)
        }
        let key = send.idempotencyKey
        if activeRuns[key] != nil { return ((true, try? JSONValue(encoding: ChatSendResult(runId: key, status: "in_flight")), nil), nil) }
        if let finished = finishedRuns[key], Date().timeIntervalSince(finished.at) < settings.dedupeWindow.inSeconds {
            return (
                (
                    finished.ok, try? JSONValue(encoding: finished.result),
                    finished.ok ? nil : GatewayErrorShape(code: "UNAVAILABLE", message: finished.result.summary ?? "run failed")
                ), nil
            )
        }
        let text = send.message.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return ((false, nil, Self.invalid("message or attachment required")), nil) }
        let session = Self.canonical(send.sessionKey)
        if text == "/stop" {
            let aborted = await abort(sessionKey: session, echoing: send.sessionKey, runID: nil, reason: "stop")
            return ((true, .object(["ok": .bool(true), "aborted": .bool(!aborted.isEmpty), "runIds": .array(aborted.map(JSONValue.string))]), nil), nil)
        }
        _ = await record.add(id: key, content: send.message, connection: link.connection, keepingRepeats: true)
        let started = (true, try? JSONValue(encoding: ChatSendResult(runId: key, status: "started")), GatewayErrorShape?.none)
        if isBusy(session) {
            enqueue(Queued(text: send.message, at: Date(), senderLabel: link.senderLabel), in: session)
            finishedRuns[key] = (ChatSendResult(runId: key, status: "ok"), true, Date())
            return (started, (key, session))
        }
        start(key, message: send.message, sessionKey: session, senderLabel: link.senderLabel)
        return (started, nil)
    }

    /// A session is busy while a run of it goes on, or messages wait to follow it.
    private func isBusy(_ session: String) -> Bool {
        hasActiveRun(session) || hasWaiting(session)
    }

    private func hasActiveRun(_ session: String) -> Bool {
        activeRuns.values.contains { $0.sessionKey == session }
    }

    /// Messages wait in the session's queue, or a summary of what its cap dropped is owed.
    private func hasWaiting(_ session: String) -> Bool {
        queues[session]?.isEmpty == false || overflow[session]?.isEmpty == false
    }

    /// Queues a message behind the session's run; past the cap the oldest is dropped.
    private func enqueue(_ message: Queued, in session: String) {
        var queue = queues[session] ?? []
        queue.append(message)
        if queue.count > settings.queueCap {
            let dropped = queue.prefix(queue.count - settings.queueCap)
            overflow[session, default: []].append(contentsOf: dropped)
            queue.removeFirst(dropped.count)
            logger.notice("queue overflow", metadata: ["gateway.session": "\(session)", "gateway.dropped": "\(overflow[session]?.count ?? 0)"])
        }
        queues[session] = queue
    }

    /// Starts a run: its user entry joins the transcript as its turn starts (merged with the
    /// session's orphan after a restart in the middle of a run).
    private func start(_ runID: String, message: String, sessionKey: String, senderLabel: String?) {
        var entry = message
        if let orphan = orphans.removeValue(forKey: sessionKey) {
            entry = Self.orphanRewrite(orphan: orphan.text, at: orphan.at, message: message, now: Date())
        }
        let user = ChatTranscriptMessage(role: "user", text: entry, timestamp: OpenClawProtocol.milliseconds(Date()), senderLabel: senderLabel)
        // As the gateway: a brand-new session's first user entry appears only with its reply.
        if transcripts[sessionKey]?.contains(where: { $0.role == "assistant" }) == true {
            activeRuns[runID] = Run(sessionKey: sessionKey, userEntryID: append(user, to: sessionKey))
        } else {
            activeRuns[runID] = Run(sessionKey: sessionKey, unwrittenUserEntry: user)
        }
        Task {
            await self.run(runID, message: message, sessionKey: sessionKey)
            await self.runEnded(in: sessionKey)
        }
    }

    /// After a session's run ends, what waited behind it runs, one message a turn under a run
    /// id of the gateway's own; then, if the queue overflowed, one turn that summarises what it dropped.
    private func runEnded(in session: String) async {
        guard hasWaiting(session) else { return }
        try? await Task.sleep(for: settings.followUpDelay)
        guard !hasActiveRun(session) else { return }
        let turn: Queued
        if var queue = queues[session], !queue.isEmpty {
            turn = queue.removeFirst()
            queues[session] = queue.isEmpty ? nil : queue
        } else if let dropped = overflow.removeValue(forKey: session) {
            turn = Queued(text: Self.overflowSummary(dropped), at: Date(), senderLabel: dropped.last?.senderLabel)
        } else {
            return
        }
        start(UUID().uuidString.lowercased(), message: turn.text, sessionKey: session, senderLabel: turn.senderLabel)
    }

    /// How the gateway's time stamps read: `Thu 2026-11-26 08:14 UTC`.
    static func stamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: date)
    }

    /// The user entry written in place of a message that follows a run a restart cut off.
    static func orphanRewrite(orphan: String, at orphanedAt: Date, message: String, now: Date) -> String {
        "\(OpenClawProtocol.restartRewriteHeader)\n\n[\(stamp(orphanedAt))] \(orphan)\n\n\n[\(stamp(now))] \(message)"
    }

    /// The user entry of the turn after an overflowing queue ran: the gateway's own words.
    static func overflowSummary(_ dropped: [Queued]) -> String {
        let lines = dropped.map { "- [\(stamp($0.at))] \($0.text)" }.joined(separator: "\n")
        return "[Queued messages while agent was busy]\n\n[Queue overflow] Dropped \(dropped.count) messages due to cap.\nSummary:\n\(lines)"
    }

    /// Streams the bot's reply as `chat` deltas beside `agent` events, then the final (unless
    /// aborted meanwhile); with the `modelFailure` fault, the model fails every attempt and no
    /// `chat` event is sent at all.
    private func run(_ runID: String, message: String, sessionKey: String) async {
        await agentEvent(runID, sessionKey: sessionKey, stream: "lifecycle", data: ["phase": .string("start")])
        let current = faults.current
        if current.modelFailure || Double.random(in: 0..<1) < current.modelFailureFraction { return await failModel(runID, sessionKey: sessionKey) }
        let reply = bot.reply(to: message)
        var text = ""
        var runSequence = 0
        for piece in bot.chunks(of: reply) {
            try? await Task.sleep(for: bot.chunkDelay)
            guard activeRuns[runID]?.aborted == false else { return }
            text += piece
            runSequence += 1
            activeRuns[runID]?.text = text
            let cumulative = text
            await agentEvent(runID, sessionKey: sessionKey, stream: "assistant", data: ["text": .string(cumulative), "delta": .string(piece)])
            await broadcast(droppable: true) { version in
                let payload = ChatEventPayload(
                    runId: runID, sessionKey: sessionKey, seq: runSequence, state: .delta,
                    message: ChatTranscriptMessage(role: "assistant", text: cumulative, timestamp: OpenClawProtocol.milliseconds(Date())),
                    deltaText: version >= 4 ? piece : nil, replace: nil)
                return ("chat", try? JSONValue(encoding: payload))
            }
        }
        guard activeRuns[runID]?.aborted == false else { return }
        let final = ChatTranscriptMessage(role: "assistant", text: reply, timestamp: OpenClawProtocol.milliseconds(Date()), stopReason: "stop")
        var stored = final
        stored.model = Self.model
        writeUserEntry(of: runID)
        append(stored, to: sessionKey)
        activeRuns[runID] = nil
        finishedRuns[runID] = (ChatSendResult(runId: runID, status: "ok"), true, Date())
        expireFinishedRuns()
        await agentEvent(runID, sessionKey: sessionKey, stream: "lifecycle", data: ["phase": .string("end")])
        await broadcast(droppable: false) { _ in
            ("chat", try? JSONValue(encoding: ChatEventPayload(runId: runID, sessionKey: sessionKey, seq: runSequence + 1, state: .final, message: final)))
        }
    }

    /// The model fails four times, a lifecycle error each (and an empty assistant entry with
    /// the error in the transcript), `modelRetryDelay` apart; then the gateway goes quiet and
    /// the run is over: no `chat` event says so.
    private func failModel(_ runID: String, sessionKey: String) async {
        let error = "500 Internal Server Error: the model is unavailable (fault injection)"
        for attempt in 1...4 {
            if attempt > 1 { try? await Task.sleep(for: settings.modelRetryDelay) }
            guard activeRuns[runID]?.aborted == false else { return }
            writeUserEntry(of: runID)
            append(
                ChatTranscriptMessage(
                    role: "assistant", text: "", timestamp: OpenClawProtocol.milliseconds(Date()), stopReason: "error", errorMessage: error, model: Self.model),
                to: sessionKey)
            await agentEvent(
                runID, sessionKey: sessionKey, stream: "lifecycle",
                data: ["phase": .string("error"), "error": .string(error), "livenessState": .string("blocked")])
        }
        activeRuns[runID] = nil
        finishedRuns[runID] = (ChatSendResult(runId: runID, status: "ok"), true, Date())
        logger.notice("the model failed (fault injection)", metadata: ["gateway.run": "\(runID)"])
    }

    private func agentEvent(_ runID: String, sessionKey: String, stream: String, data: [String: JSONValue]) async {
        let ts = Double(OpenClawProtocol.milliseconds(Date()))
        await broadcast(droppable: false) { _ in
            (
                "agent",
                .object([
                    "runId": .string(runID), "stream": .string(stream), "ts": .number(ts), "data": .object(data), "sessionKey": .string(sessionKey),
                ])
            )
        }
    }

    /// Aborts a run, or every run of the session; the aborted run ids. The `aborted` event
    /// echoes the session key as the client sent it.
    private func abort(sessionKey: String, echoing requested: String, runID: String?, reason: String) async -> [String] {
        let chosen = activeRuns.filter { $0.value.sessionKey == sessionKey && (runID == nil || $0.key == runID) }.map(\.key).sorted()
        for id in chosen {
            if activeRuns[id]?.text.isEmpty == false { writeUserEntry(of: id) }
            if let run = activeRuns[id], !run.text.isEmpty {
                // As the gateway: its own entry with the text so far, listed before the run's user
                // entry, then the model's partial entry.
                let now = OpenClawProtocol.milliseconds(Date())
                insert(
                    ChatTranscriptMessage(
                        role: "assistant", text: run.text, timestamp: now, stopReason: "stop", model: ChatTranscriptMessage.gatewayInjected, abortedRunID: id),
                    before: run.userEntryID, in: sessionKey)
                append(ChatTranscriptMessage(role: "assistant", text: run.text, timestamp: now, stopReason: "aborted", model: Self.model), to: sessionKey)
            }
            activeRuns[id] = nil
            finishedRuns[id] = (ChatSendResult(runId: id, status: "ok"), true, Date())
            await broadcast(droppable: false) { _ in
                ("chat", try? JSONValue(encoding: ChatEventPayload(runId: id, sessionKey: requested, seq: nil, state: .aborted, stopReason: reason)))
            }
        }
        return chosen
    }

    /// Sends the tick every connection relies on for liveness.
    func tick() async {
        guard !faults.current.stopTicking else { return }
        let now = OpenClawProtocol.milliseconds(Date())
        await broadcast(droppable: false) { _ in ("tick", .object(["ts": .number(Double(now))])) }
    }

    /// Sends an event to the connected clients `audience` admits (every one by default). The
    /// gateway's counter counts every event: a protocol-3 client sees its number, and a gap
    /// for each event it was not sent; a protocol-4 client has a counter of its own. A
    /// droppable event is left out for a connection the `dropDeltaFraction` fault picks.
    private func broadcast(droppable: Bool, to audience: (OpenClawClientConnection) -> Bool = { _ in true }, _ event: (Int) -> (String, JSONValue?)) async {
        let current = faults.current
        let skip = current.skipSequence
        if skip {
            var cleared = current
            cleared.skipSequence = false
            faults.set(cleared)
        }
        globalSequence += skip ? 2 : 1
        for link in links.values.sorted(by: { $0.connection < $1.connection }) {
            guard let version = link.protocolVersion, audience(link) else { continue }
            let sequence = version < 4 ? globalSequence : link.nextSequence(skip: skip)
            if droppable, current.dropDeltaFraction > 0, Double.random(in: 0..<1) < current.dropDeltaFraction { continue }
            let (name, payload) = event(version)
            do {
                try await link.write(codec.encode(.event(name: name, payload: payload, seq: sequence)))
            } catch {
                links[link.connection] = nil
            }
        }
    }

    // MARK: Transcripts

    private func sessionID(_ key: String) -> String {
        if let id = sessionIDs[key] { return id }
        let id = UUID().uuidString.lowercased()
        sessionIDs[key] = id
        return id
    }

    /// Writes a run's user entry held back in a session with no reply yet: its first reply is
    /// about to be written.
    private func writeUserEntry(of runID: String) {
        guard let run = activeRuns[runID], let entry = run.unwrittenUserEntry else { return }
        activeRuns[runID]?.userEntryID = append(entry, to: run.sessionKey)
        activeRuns[runID]?.unwrittenUserEntry = nil
    }

    /// Adds an entry at the end of a session's transcript, with an id and place of its own
    /// (`__openclaw`, as history shows them); returns its id.
    @discardableResult
    private func append(_ message: ChatTranscriptMessage, to sessionKey: String) -> String {
        var message = message
        let id = Self.newEntryID()
        message.entryID = id
        message.entrySequence = (transcripts[sessionKey]?.count ?? 0) + 1
        transcripts[sessionKey, default: []].append(message)
        guard let directory = settings.stateDirectory, var line = try? JSONEncoder().encode(message) else { return id }
        line.append(0x0A)
        let path = Self.transcriptPath(directory, sessionKey)
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(line)
            try? handle.close()
        }
        return id
    }

    /// Adds an entry before another (at the end when there is no such entry) and writes the
    /// session's transcript anew.
    private func insert(_ message: ChatTranscriptMessage, before entryID: String?, in sessionKey: String) {
        var entries = transcripts[sessionKey] ?? []
        guard let position = entries.firstIndex(where: { $0.entryID == entryID }) else {
            append(message, to: sessionKey)
            return
        }
        var message = message
        message.entryID = Self.newEntryID()
        entries.insert(message, at: position)
        for index in entries.indices { entries[index].entrySequence = index + 1 }
        transcripts[sessionKey] = entries
        guard let directory = settings.stateDirectory else { return }
        let lines = entries.compactMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) + "\n" }.joined()
        _ = FileManager.default.createFile(atPath: Self.transcriptPath(directory, sessionKey), contents: Data(lines.utf8))
    }

    /// The most characters of an entry's text `chat.history` returns, as the gateway's default.
    static let historyTextLimit = 8000

    /// An entry as `chat.history` returns it: a longer text cut at ``historyTextLimit`` and
    /// marked, as the gateway does.
    static func shortenedForHistory(_ message: ChatTranscriptMessage) -> ChatTranscriptMessage {
        let text = message.text
        guard text.count > historyTextLimit else { return message }
        var shortened = message
        shortened.content = .array([.object(["type": .string("text"), "text": .string(String(text.prefix(historyTextLimit)) + "\n...(truncated)...")])])
        return shortened
    }

    /// A transcript entry's id, eight hex digits as the gateway's.
    private static func newEntryID() -> String { String(UUID().uuidString.lowercased().filter(\.isHexDigit).prefix(8)) }

    private static func transcriptPath(_ directory: String, _ sessionKey: String) -> String {
        let safe = Base64URL.encode(Data(sessionKey.utf8))
        return directory + "/session-\(safe).jsonl"
    }

    private static func loadTranscripts(_ directory: String) -> [String: [ChatTranscriptMessage]] {
        var transcripts: [String: [ChatTranscriptMessage]] = [:]
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for file in files where file.hasPrefix("session-") && file.hasSuffix(".jsonl") {
            let encoded = String(file.dropFirst("session-".count).dropLast(".jsonl".count))
            guard let keyData = Base64URL.decode(encoded), let key = String(data: keyData, encoding: .utf8),
                let text = try? String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            else { continue }
            transcripts[canonical(key), default: []] += text.split(separator: "\n").compactMap {
                try? JSONDecoder().decode(ChatTranscriptMessage.self, from: Data($0.utf8))
            }
        }
        return transcripts
    }

    private func expireFinishedRuns() {
        let cutoff = Date().addingTimeInterval(-settings.dedupeWindow.inSeconds)
        finishedRuns = finishedRuns.filter { $0.value.at > cutoff }
        if finishedRuns.count > 1000 {
            for key in finishedRuns.sorted(by: { $0.value.at < $1.value.at }).prefix(finishedRuns.count - 1000).map(\.key) { finishedRuns[key] = nil }
        }
    }

    // MARK: Helpers

    /// A session key in the form events carry it (`side` is `agent:main:side`).
    static func canonical(_ key: String) -> String { OpenClawProtocol.canonicalSessionKey(key, mainSessionKey: mainSessionKey) }

    static func invalid(_ message: String) -> GatewayErrorShape { GatewayErrorShape(code: "INVALID_REQUEST", message: message) }

    static func missingScope(_ scope: String) -> GatewayErrorShape { invalid("missing scope: \(scope)") }
}

/// The devices the gateway paired, with the device token it issued each, kept in
/// `devices.json` of the state directory.
struct PairedDevices: Sendable {
    struct Device: Codable, Sendable {
        var id: String
        var publicKey: String
        var token: String
    }

    private var devices: [String: Device] = [:]
    private let path: String?

    init(directory: String?) throws {
        path = directory.map { $0 + "/devices.json" }
        if let directory {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        if let path, let data = FileManager.default.contents(atPath: path) {
            devices = (try? JSONDecoder().decode([String: Device].self, from: data)) ?? [:]
        }
    }

    var ids: [String] { devices.keys.sorted() }

    func device(_ id: String) -> Device? { devices[id] }

    /// Pairs a device and issues its token (the one issued before, if it was paired already).
    mutating func pair(id: String, publicKey: String) -> Device {
        if let known = devices[id] { return known }
        let device = Device(id: id, publicKey: publicKey, token: UUID().uuidString.lowercased() + UUID().uuidString.lowercased())
        devices[id] = device
        if let path, let data = try? JSONEncoder().encode(devices) {
            _ = FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
        }
        return device
    }
}
