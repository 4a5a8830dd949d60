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

    public init(
        protocols: ClosedRange<Int> = 3...4, tickInterval: Duration = .seconds(30), stateDirectory: String? = nil, dedupeWindow: Duration = .seconds(300),
        maximumPayload: Int = 1 << 20
    ) {
        self.protocols = protocols
        self.tickInterval = tickInterval
        self.stateDirectory = stateDirectory
        self.dedupeWindow = dedupeWindow
        self.maximumPayload = maximumPayload
    }
}

/// The development gateway speaking OpenClaw's protocol (the subset a chat client uses):
/// the challenge and a checked device signature, token auth, pairing with approval, scopes,
/// `chat.send` with an in-memory idempotency cache (lost on restart), `chat` events for
/// protocol 3 (cumulative text) and 4 (`deltaText`), `chat.history`, `chat.abort`,
/// `sessions.list`, `health`, ticks, and event sequence numbers per connection (protocol 4)
/// or one counter for all (a protocol-3-only gateway).
actor OpenClawGateway {
    private let settings: OpenClawGatewaySettings
    private let token: String
    private let bot: DemoBot
    private let record: GatewayRecord
    private let faults: FaultSwitch
    private let logger: Logger
    private let codec = OpenClawCodec()
    private let startedAt = Date()

    private var links: [Int: OpenClawLink] = [:]
    /// A protocol-3-only gateway numbers every broadcast once, for all connections.
    private var globalSequence = 0
    private var transcripts: [String: [ChatTranscriptMessage]] = [:]
    private var sessionIDs: [String: String] = [:]
    private var devices: PairedDevices
    private var pairingRequests: [String: PairedDevices.Device] = [:]
    /// Finished runs by idempotency key, with when they finished: what a repeat is answered.
    private var finishedRuns: [String: (result: ChatSendResult, ok: Bool, at: Date)] = [:]
    private var activeRuns: [String: Run] = [:]
    /// Each session's runs go one at a time.
    private var sessionLanes: [String: Task<Void, Never>] = [:]

    struct Run {
        var sessionKey: String
        var aborted = false
    }

    init(settings: OpenClawGatewaySettings, token: String, bot: DemoBot, record: GatewayRecord, faults: FaultSwitch, logger: Logger) throws {
        self.settings = settings
        self.token = token
        self.bot = bot
        self.record = record
        self.faults = faults
        self.logger = logger
        self.devices = try PairedDevices(directory: settings.stateDirectory)
        if let directory = settings.stateDirectory { transcripts = Self.loadTranscripts(directory) }
    }

    // MARK: Connections

    /// Serves one connection: the challenge, the handshake, then requests until it ends.
    func opened(_ link: OpenClawLink) async {
        let challenge = ConnectChallenge(nonce: link.nonce, ts: Self.milliseconds(Date()))
        try? await link.write(codec.encode(.event(name: "connect.challenge", payload: try? JSONValue(encoding: challenge), seq: nil)))
        // A client that has not connected within 10 s is closed, as the gateway does.
        Task { [weak link] in
            try? await Task.sleep(for: .seconds(10))
            guard let link, !link.isConnected else { return }
            try? await link.close(.normalClosure, reason: "")
        }
    }

    func closed(_ link: OpenClawLink) {
        links[link.connection] = nil
    }

    /// Handles a text frame from a client.
    func handle(_ text: String, from link: OpenClawLink) async {
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

    private func connect(id: String, method: String, params: JSONValue?, on link: OpenClawLink) async {
        switch admission(method: method, params: params, link: link) {
        case .refuse(let error, let code):
            logger.notice("refused a connect", metadata: ["gateway.connection": "\(link.connection)", "gateway.error": "\(error.message)"])
            try? await link.write(codec.encode(.response(id: id, ok: false, payload: nil, error: error)))
            try? await link.close(code, reason: error.message)
        case .accept(let hello, let deviceID, let scopes):
            link.connected(protocolVersion: hello.protocol, scopes: scopes, deviceID: deviceID)
            links[link.connection] = link
            logger.info(
                "client connected",
                metadata: ["gateway.connection": "\(link.connection)", "gateway.protocol": "\(hello.protocol)", "gateway.device": "\(deviceID)"])
            try? await link.write(codec.encode(.response(id: id, ok: true, payload: try? JSONValue(encoding: hello), error: nil)))
        }
    }

    enum Admission {
        case accept(HelloOk, deviceID: String, scopes: [String])
        case refuse(GatewayErrorShape, WebSocketErrorCode)
    }

    /// Checks a `connect` as the gateway does: the first request, valid params, the protocol
    /// range, the client's origin, the token, the device signature over this connection's
    /// nonce, and pairing.
    private func admission(method: String, params: JSONValue?, link: OpenClawLink) -> Admission {
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
        guard abs(Self.milliseconds(Date()) - device.signedAt) <= 10 * 60 * 1000 else {
            return .refuse(Self.invalid("device signature expired"), .policyViolation)
        }
        // Auth: the shared token, or the device token this gateway issued to the device.
        let paired = devices.device(device.id)
        let sharedOK = connect.auth?.token.map { DevGateway.constantTimeEquals(Array($0.utf8), Array(token.utf8)) } ?? false
        if !sharedOK, let offered = connect.auth?.deviceToken {
            guard let paired, DevGateway.constantTimeEquals(Array(offered.utf8), Array(paired.token.utf8)) else {
                return .refuse(Self.invalid("unauthorized: device token mismatch (rotate/reissue device token)"), .policyViolation)
            }
        } else if !sharedOK || faults.current.rejectToken {
            let message =
                connect.auth?.token == nil
                ? "unauthorized: gateway token missing (provide gateway auth token)" : "unauthorized: gateway token mismatch (provide gateway auth token)"
            return .refuse(Self.invalid(message), .policyViolation)
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
        }
        let version = min(connect.maxProtocol, settings.protocols.upperBound)
        let hello = HelloOk(
            protocol: version, server: HelloOk.Server(version: "tether-gateway-dev", connId: UUID().uuidString.lowercased()),
            features: HelloOk.Features(methods: Self.methods, events: ["connect.challenge", "chat", "tick", "health", "presence", "shutdown"]),
            snapshot: HelloOk.Snapshot(
                uptimeMs: Self.milliseconds(Date()) - Self.milliseconds(startedAt),
                sessionDefaults: HelloOk.SessionDefaults(defaultAgentId: "main", mainKey: "main", mainSessionKey: Self.mainSessionKey, scope: "per-sender")),
            auth: HelloOk.Auth(deviceToken: issued?.token, role: connect.role, scopes: connect.scopes, issuedAtMs: Self.milliseconds(Date())),
            policy: HelloOk.Policy(
                maxPayload: settings.maximumPayload, maxBufferedBytes: 16 << 20, tickIntervalMs: Int((settings.tickInterval.inSeconds * 1000).rounded())))
        return .accept(hello, deviceID: device.id, scopes: connect.scopes)
    }

    static let mainSessionKey = "agent:main:main"
    static let methods = ["health", "chat.send", "chat.history", "chat.abort", "sessions.list"]

    /// Approves a pending pairing request; the device's id, or nil when there is no such request.
    func approve(requestID: String) -> String? {
        guard let request = pairingRequests.removeValue(forKey: requestID) else { return nil }
        _ = devices.pair(id: request.id, publicKey: request.publicKey)
        logger.notice("device approved", metadata: ["gateway.device": "\(request.id)", "gateway.request": "\(requestID)"])
        return request.id
    }

    /// The pending pairing requests and the paired devices.
    func deviceList() -> (pending: [String: String], paired: [String]) {
        (pairingRequests.mapValues(\.id), devices.ids)
    }

    /// Forgets every finished run's idempotency key, as a restart does.
    func forgetIdempotencyKeys() {
        finishedRuns.removeAll()
    }

    // MARK: Requests

    private func request(id: String, method: String, params: JSONValue?, on link: OpenClawLink) async {
        let answer: (ok: Bool, payload: JSONValue?, error: GatewayErrorShape?)
        switch method {
        case "chat.send":
            answer = await send(params, on: link)
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
            let messages = Array((transcripts[params.sessionKey] ?? []).suffix(limit))
            let result = ChatHistoryResult(sessionKey: params.sessionKey, sessionId: sessionID(params.sessionKey), messages: messages)
            answer = (true, try? JSONValue(encoding: result), nil)
        case "chat.abort":
            guard link.allows("operator.write") else { return await reply(id, Self.missingScope("operator.write"), on: link) }
            guard let params = try? params?.decode(ChatAbortParams.self) else { return await reply(id, Self.invalid("invalid chat.abort params"), on: link) }
            if let runID = params.runId, let run = activeRuns[runID], run.sessionKey != params.sessionKey {
                return await reply(id, Self.invalid("runId does not match sessionKey"), on: link)
            }
            let aborted = await abort(sessionKey: params.sessionKey, runID: params.runId, reason: "rpc")
            answer = (true, .object(["ok": .bool(true), "aborted": .bool(!aborted.isEmpty), "runIds": .array(aborted.map(JSONValue.string))]), nil)
        case "sessions.list":
            guard link.allows("operator.read") else { return await reply(id, Self.missingScope("operator.read"), on: link) }
            let sessions = Set(transcripts.keys).union([Self.mainSessionKey]).sorted().map { key in
                SessionsListResult.Session(key: key, displayName: nil, updatedAt: transcripts[key]?.last?.timestamp)
            }
            answer = (true, try? JSONValue(encoding: SessionsListResult(sessions: sessions)), nil)
        case "health":
            answer = (true, .object(["ok": .bool(true), "ts": .number(Double(Self.milliseconds(Date())))]), nil)
        case "connect":
            answer = (false, nil, Self.invalid("connect is only valid as the first request"))
        default:
            answer = (false, nil, Self.invalid("unknown method: \(method)"))
        }
        try? await link.write(codec.encode(.response(id: id, ok: answer.ok, payload: answer.payload, error: answer.error)))
    }

    private func reply(_ id: String, _ error: GatewayErrorShape, on link: OpenClawLink) async {
        try? await link.write(codec.encode(.response(id: id, ok: false, payload: nil, error: error)))
    }

    /// `chat.send`: a new key starts a run; a key whose run is under way is `in_flight`; a
    /// finished one within the window gets its cached answer; after the window or a restart,
    /// a repeat starts a second run.
    private func send(_ params: JSONValue?, on link: OpenClawLink) async -> (Bool, JSONValue?, GatewayErrorShape?) {
        guard link.allows("operator.write") else { return (false, nil, Self.missingScope("operator.write")) }
        guard let send = try? params?.decode(ChatSendParams.self), !send.sessionKey.isEmpty, !send.idempotencyKey.isEmpty else {
            return (false, nil, Self.invalid("invalid chat.send params: must have required properties sessionKey, message, idempotencyKey"))
        }
        let key = send.idempotencyKey
        if activeRuns[key] != nil { return (true, try? JSONValue(encoding: ChatSendResult(runId: key, status: "in_flight")), nil) }
        if let finished = finishedRuns[key], Date().timeIntervalSince(finished.at) < settings.dedupeWindow.inSeconds {
            return (
                finished.ok, try? JSONValue(encoding: finished.result),
                finished.ok ? nil : GatewayErrorShape(code: "UNAVAILABLE", message: finished.result.summary ?? "run failed")
            )
        }
        let text = send.message.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return (false, nil, Self.invalid("message or attachment required")) }
        if text == "/stop" {
            let aborted = await abort(sessionKey: send.sessionKey, runID: nil, reason: "stop")
            return (true, .object(["ok": .bool(true), "aborted": .bool(!aborted.isEmpty), "runIds": .array(aborted.map(JSONValue.string))]), nil)
        }
        _ = await record.add(id: key, content: send.message, connection: link.connection, keepingRepeats: true)
        append(ChatTranscriptMessage(role: "user", text: send.message, timestamp: Self.milliseconds(Date())), to: send.sessionKey)
        activeRuns[key] = Run(sessionKey: send.sessionKey)
        let previous = sessionLanes[send.sessionKey]
        sessionLanes[send.sessionKey] = Task {
            await previous?.value
            await self.run(key, message: send.message, sessionKey: send.sessionKey)
        }
        return (true, try? JSONValue(encoding: ChatSendResult(runId: key, status: "started")), nil)
    }

    /// Streams the bot's reply as `chat` deltas, then the final (unless aborted meanwhile).
    private func run(_ runID: String, message: String, sessionKey: String) async {
        let reply = bot.reply(to: message)
        var text = ""
        var runSequence = 0
        for piece in bot.chunks(of: reply) {
            try? await Task.sleep(for: bot.chunkDelay)
            guard activeRuns[runID]?.aborted == false else { return }
            text += piece
            runSequence += 1
            let cumulative = text
            await broadcast(droppable: true) { version in
                let payload = ChatEventPayload(
                    runId: runID, sessionKey: sessionKey, seq: runSequence, state: .delta,
                    message: ChatTranscriptMessage(role: "assistant", text: cumulative, timestamp: Self.milliseconds(Date())),
                    deltaText: version >= 4 ? piece : nil, replace: nil)
                return ("chat", try? JSONValue(encoding: payload))
            }
        }
        guard activeRuns[runID]?.aborted == false else { return }
        let final = ChatTranscriptMessage(role: "assistant", text: reply, timestamp: Self.milliseconds(Date()), stopReason: "stop")
        append(final, to: sessionKey)
        activeRuns[runID] = nil
        finishedRuns[runID] = (ChatSendResult(runId: runID, status: "ok"), true, Date())
        expireFinishedRuns()
        await broadcast(droppable: false) { _ in
            ("chat", try? JSONValue(encoding: ChatEventPayload(runId: runID, sessionKey: sessionKey, seq: runSequence + 1, state: .final, message: final)))
        }
    }

    /// Aborts a run, or every run of the session; the aborted run ids.
    private func abort(sessionKey: String, runID: String?, reason: String) async -> [String] {
        let chosen = activeRuns.filter { $0.value.sessionKey == sessionKey && (runID == nil || $0.key == runID) }.map(\.key).sorted()
        for id in chosen {
            activeRuns[id] = nil
            finishedRuns[id] = (ChatSendResult(runId: id, status: "ok"), true, Date())
            await broadcast(droppable: false) { _ in
                ("chat", try? JSONValue(encoding: ChatEventPayload(runId: id, sessionKey: sessionKey, seq: nil, state: .aborted, stopReason: reason)))
            }
        }
        return chosen
    }

    /// Sends the tick every connection relies on for liveness.
    func tick() async {
        guard !faults.current.stopTicking else { return }
        let now = Self.milliseconds(Date())
        await broadcast(droppable: false) { _ in ("tick", .object(["ts": .number(Double(now))])) }
    }

    /// Sends an event to every connected client, numbered per connection (or once for all on
    /// a protocol-3-only gateway); a droppable one is left out for a connection the
    /// `dropDeltaFraction` fault picks, which then sees a gap.
    private func broadcast(droppable: Bool, _ event: (Int) -> (String, JSONValue?)) async {
        let current = faults.current
        let skip = current.skipSequence
        if skip {
            var cleared = current
            cleared.skipSequence = false
            faults.set(cleared)
        }
        let global = settings.protocols.upperBound < 4
        if global { globalSequence += skip ? 2 : 1 }
        for link in links.values.sorted(by: { $0.connection < $1.connection }) {
            guard let version = link.protocolVersion else { continue }
            let sequence = global ? globalSequence : link.nextSequence(skip: skip)
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

    private func append(_ message: ChatTranscriptMessage, to sessionKey: String) {
        transcripts[sessionKey, default: []].append(message)
        guard let directory = settings.stateDirectory, var line = try? JSONEncoder().encode(message) else { return }
        line.append(0x0A)
        let path = Self.transcriptPath(directory, sessionKey)
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(line)
            try? handle.close()
        }
    }

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
            transcripts[key] = text.split(separator: "\n").compactMap { try? JSONDecoder().decode(ChatTranscriptMessage.self, from: Data($0.utf8)) }
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

    static func milliseconds(_ date: Date) -> Int { Int((date.timeIntervalSince1970 * 1000).rounded()) }

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
