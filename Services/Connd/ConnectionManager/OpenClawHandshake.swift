public import FoundationEssentials
public import OpenClawWire
public import TetherSchema

/// connd's side of the OpenClaw handshake, as values: the `connect` request for a
/// challenge, and what the gateway's answer means for the connection.
public struct OpenClawHandshake: Sendable {
    /// The id of the `connect` request.
    public static let requestID = "tether-connect"

    /// What the gateway's answer to `connect` means.
    public enum Outcome: Sendable, Equatable {
        /// Connected: what the gateway said of itself, and a device token it issued (kept as a secret).
        case ready(GatewayInfo, deviceToken: String?)
        /// Refused: the problem for the state machine.
        case refused(ConnectionProblem)
        /// The stored device token was refused: forget it and try again with the shared token.
        case deviceTokenRefused(String)
        /// The gateway did not take the v3 signature: try again signing v2.
        case signatureRefused(String)
        /// The gateway refused the shared token and says a device token it issued would do
        /// (`retry_with_device_token`): connect with the stored one, if there is one.
        case sharedTokenRefused(String)
        /// The device is paired, but a scope asked for beyond those it was paired with
        /// (`operator.approvals`) waits for a person to approve the upgrade (`requestId`):
        /// connect with the chat scopes meanwhile.
        case scopeUpgradeRequired(requestID: String?, String)
    }

    public let identity: DeviceIdentity
    public let signature: DeviceSignedPayload.Version
    public let client: ConnectParams.Client
    /// The scopes asked for: the chat scopes, and `operator.approvals` when approvals are wanted.
    public let scopes: [String]

    /// - Parameter displayName: the name the gateway labels this client's messages with.
    public init(
        identity: DeviceIdentity, signature: DeviceSignedPayload.Version = .v3, version: String = "0.1.0", instanceID: String,
        displayName: String = OpenClawProtocol.displayName, scopes: [String] = OpenClawProtocol.chatScopes
    ) {
        self.identity = identity
        self.signature = signature
        self.scopes = scopes
        self.client = ConnectParams.Client(
            id: OpenClawProtocol.clientID, displayName: displayName, version: version, platform: OpenClawProtocol.platform,
            deviceFamily: OpenClawProtocol.deviceFamily, mode: OpenClawProtocol.clientMode, instanceId: instanceID)
    }

    /// The `connect` request answering `challenge`: protocols 3 to 4, an operator with
    /// ``scopes``, the shared token (else the device token) and the device block signed over the nonce.
    public func connectRequest(challenge: ConnectChallenge, token: String?, deviceToken: String?, now: Date) throws -> String {
        let signedAt = OpenClawProtocol.milliseconds(now)
        let auth = ConnectParams.Auth(token: token, deviceToken: token == nil ? deviceToken : nil)
        let payload = DeviceSignedPayload(
            version: signature, deviceID: identity.deviceID, clientID: client.id, clientMode: client.mode, role: OpenClawProtocol.role,
            scopes: scopes, signedAtMs: signedAt, token: token ?? deviceToken ?? "", nonce: challenge.nonce, platform: client.platform,
            deviceFamily: client.deviceFamily ?? "")
        let device = ConnectParams.Device(
            id: identity.deviceID, publicKey: identity.publicKeyBase64URL, signature: try identity.sign(payload.text), signedAt: signedAt,
            nonce: challenge.nonce)
        let params = ConnectParams(
            minProtocol: OpenClawProtocol.minimumVersion, maxProtocol: OpenClawProtocol.maximumVersion, client: client, role: OpenClawProtocol.role,
            scopes: scopes, caps: [OpenClawProtocol.toolEventsCapability], auth: (auth.token ?? auth.deviceToken) == nil ? nil : auth, device: device,
            userAgent: "tether/\(client.version)")
        return OpenClawCodec().request(id: Self.requestID, method: "connect", params: params)
    }

    /// What an answer to `connect` means; nil when the frame is not that answer.
    /// - Parameters:
    ///   - challengeTime: the gateway's clock in the challenge, and connd's when it came, for the offset.
    public func outcome(of frame: OpenClawFrame, url: String, challenge: ConnectChallenge, receivedAt: Date) -> Outcome? {
        guard case .response(let id, let ok, let payload, let error) = frame, id == Self.requestID else { return nil }
        guard ok else {
            return Self.refusal(error ?? GatewayErrorShape(code: "UNKNOWN", message: "refused without a reason"), url: url, deviceID: identity.deviceID)
        }
        guard let hello = try? payload?.decode(HelloOk.self) else {
            return .refused(ConnectionProblem(.refused(.gatewayRefused), "the gateway at \(url) answered connect with something other than hello-ok"))
        }
        let granted = hello.auth?.scopes
        if let granted, !OpenClawProtocol.chatScopes.allSatisfy({ granted.contains($0) || granted.contains("operator.admin") }) {
            return .refused(
                ConnectionProblem(
                    .refused(.scopeMissing),
                    "the gateway at \(url) let Tether in with scopes [\(granted.joined(separator: ", "))], without operator.read and operator.write: sending would fail; grant them to device \(identity.deviceID), then reconnect"
                ))
        }
        let offset = challenge.ts.map { $0 - OpenClawProtocol.milliseconds(receivedAt) }
        let info = GatewayInfo(
            dialect: .openclaw, protocolVersion: hello.protocol, serverVersion: hello.server?.version, serverConnectionID: hello.server?.connId,
            uptimeMilliseconds: hello.snapshot?.uptimeMs, startedAt: hello.snapshot?.uptimeMs.map { Date().addingTimeInterval(-Double($0) / 1000) },
            tickIntervalMilliseconds: hello.policy?.tickIntervalMs ?? OpenClawProtocol.defaultTickIntervalMs,
            maximumPayload: hello.policy?.maxPayload, mainSessionKey: hello.snapshot?.sessionDefaults?.mainSessionKey, clockOffsetMilliseconds: offset,
            deviceID: identity.deviceID, scopes: granted ?? scopes)
        var described = info
        described.generation = GatewayGeneration(protocol: hello.protocol, release: hello.server?.version, methods: hello.features?.methods)
        return .ready(described, deviceToken: hello.auth?.deviceToken)
    }

    /// A refusal in words with its way forward: from the answer's error, or from the close
    /// frame's reason when the gateway closed without answering.
    public static func refusal(_ error: GatewayErrorShape, url: String, deviceID: String) -> Outcome {
        let message = error.message
        let lowered = message.lowercased()
        if error.code == "NOT_PAIRED" || lowered.contains("pairing required") {
            if error.details?["reason"]?.stringValue == "scope-upgrade" {
                let request = error.details?["requestId"]?.stringValue
                return .scopeUpgradeRequired(
                    requestID: request,
                    "the gateway at \(url) asks a person to approve this device's wider scopes (operator.approvals)\(request.map { ", request \($0)" } ?? "")")
            }
            guard lowered.contains("pairing") else {
                return .refused(ConnectionProblem(.refused(.gatewayRefused), "the gateway at \(url) refused the device: \(message)"))
            }
            let request = error.details?["requestId"]?.stringValue
            let approve = "openclaw devices approve \(request ?? deviceID)"
            return .refused(
                ConnectionProblem(
                    .pairingRequired,
                    "the gateway at \(url) does not know this device yet (device \(deviceID)\(request.map { ", request \($0)" } ?? "")): approve it on the gateway with `\(approve)`; Tether asks again every few seconds and connects once it is approved"
                ))
        }
        if error.code == "UNAVAILABLE" {
            let wait = max(100, error.retryAfterMs ?? 1000)
            return .refused(
                ConnectionProblem(.unavailable(retryAfter: .milliseconds(wait)), "the gateway at \(url) is not ready (\(message)): trying again in \(wait) ms"))
        }
        if lowered.contains("device token") {
            return .deviceTokenRefused("the gateway at \(url) refused the stored device token (\(message)): trying the shared token")
        }
        if lowered.contains("signature") {
            return .signatureRefused("the gateway at \(url) refused the device signature (\(message))")
        }
        let nextStep = error.details?["recommendedNextStep"]?.stringValue
        if nextStep == "retry_with_device_token" || error.details?["canRetryWithDeviceToken"] == .bool(true) {
            return .sharedTokenRefused("the gateway at \(url) rejected the token (\(message))")
        }
        if lowered.hasPrefix("unauthorized") {
            return .refused(ConnectionProblem(.credentialRejected, "the gateway at \(url) rejected the token (\(message)): fix the token file, then reconnect"))
        }
        if lowered.contains("protocol mismatch") {
            let expected = error.details?["expectedProtocol"]?.intValue ?? error.details?["minProtocol"]?.intValue
            return .refused(
                ConnectionProblem(
                    .refused(.protocolMismatch),
                    "the gateway at \(url) speaks protocol \(expected.map(String.init) ?? "other than 3 or 4"), and Tether speaks 3 and 4: update \(expected.map { $0 > 4 } == true ? "Tether" : "the gateway")"
                ))
        }
        if lowered.contains("origin not allowed") {
            return .refused(
                ConnectionProblem(
                    .refused(.originRefused), "the gateway at \(url) refused this client's origin (\(message)): check the gateway's allowed origins"))
        }
        if lowered.contains("missing scope") {
            return .refused(
                ConnectionProblem(.refused(.scopeMissing), "the gateway at \(url) refused for want of a scope (\(message)): grant it to device \(deviceID)"))
        }
        return .refused(ConnectionProblem(.refused(.gatewayRefused), "the gateway at \(url) refused the connection: \(error.code) \(message)"))
    }
}
