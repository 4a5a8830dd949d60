import ConnectionManager
import Foundation
import OpenClawWire
import Testing
import TetherSchema

/// connd's side of the OpenClaw handshake, and what each refusal does to the connection.
@Suite struct OpenClawHandshakeTests {
    let identity = DeviceIdentity()
    var handshake: OpenClawHandshake { OpenClawHandshake(identity: identity, instanceID: "test") }
    let challenge = ConnectChallenge(nonce: "nonce-1", ts: 1_769_650_000_500)

    @Test func theConnectRequestIsAnOperatorCLIClientSigningTheNonce() throws {
        let now = Date(timeIntervalSince1970: 1_769_650_000)
        let text = try handshake.connectRequest(challenge: challenge, token: "shared", deviceToken: "stored", now: now)
        guard case .request(OpenClawHandshake.requestID, "connect", let params?) = try OpenClawCodec().decode(text) else {
            Issue.record("not a connect request")
            return
        }
        let connect = try params.decode(ConnectParams.self)
        #expect(connect.minProtocol == 3 && connect.maxProtocol == 4)
        #expect(connect.client.id == "cli" && connect.client.mode == "cli" && connect.role == "operator")
        #expect(connect.scopes == ["operator.read", "operator.write"])
        #expect(connect.caps == ["tool-events"], "Tether asks for the tool calls of the runs it starts")
        #expect(connect.auth == ConnectParams.Auth(token: "shared"), "the shared token goes alone when there is one")
        let device = try #require(connect.device)
        #expect(device.id == identity.deviceID && device.nonce == "nonce-1" && device.signedAt == 1_769_650_000_000)
        let signed = DeviceSignedPayload(
            version: .v3, deviceID: device.id, clientID: "cli", clientMode: "cli", role: "operator", scopes: connect.scopes, signedAtMs: device.signedAt,
            token: "shared", nonce: "nonce-1", platform: "linux", deviceFamily: "desktop")
        #expect(DeviceIdentity.verify(signature: device.signature, of: signed.text, publicKey: device.publicKey))
        // No shared token: the device token authenticates and is what is signed.
        let deviceOnly = try handshake.connectRequest(challenge: challenge, token: nil, deviceToken: "stored", now: now)
        #expect(deviceOnly.contains(#""deviceToken":"stored""#) && !deviceOnly.contains(#""token":"#))
    }

    @Test func helloOkBecomesWhatTheGatewaySaidOfItselfAndItsDeviceTokenIsKeptApart() throws {
        let hello = HelloOk(
            protocol: 4, server: .init(version: "2026.5.12", connId: "c-1"), features: nil,
            snapshot: .init(uptimeMs: 5000, sessionDefaults: .init(defaultAgentId: "main", mainKey: "main", mainSessionKey: "agent:main:main", scope: nil)),
            auth: .init(deviceToken: "secret-device-token", role: "operator", scopes: ["operator.read", "operator.write"], issuedAtMs: 0),
            policy: .init(maxPayload: 26_214_400, maxBufferedBytes: nil, tickIntervalMs: 15000))
        let frame = OpenClawFrame.response(id: OpenClawHandshake.requestID, ok: true, payload: try JSONValue(encoding: hello), error: nil)
        let outcome = handshake.outcome(of: frame, url: "ws://g", challenge: challenge, receivedAt: Date(timeIntervalSince1970: 1_769_650_000))
        guard case .ready(let info, let token)? = outcome else {
            Issue.record("not ready: \(String(describing: outcome))")
            return
        }
        #expect(token == "secret-device-token")
        #expect(info.protocolVersion == 4 && info.tickIntervalMilliseconds == 15000 && info.maximumPayload == 26_214_400)
        #expect(info.mainSessionKey == "agent:main:main" && info.clockOffsetMilliseconds == 500 && info.deviceID == identity.deviceID)
        #expect(!String(decoding: try JSONEncoder().encode(info), as: UTF8.self).contains("secret-device-token"))
        // Let in without the scopes to send: refused in words rather than failing every send.
        var scopeless = hello
        scopeless.auth?.scopes = []
        let refused = handshake.outcome(
            of: .response(id: OpenClawHandshake.requestID, ok: true, payload: try JSONValue(encoding: scopeless), error: nil), url: "ws://g",
            challenge: challenge, receivedAt: Date())
        guard case .refused(let problem)? = refused else {
            Issue.record("\(String(describing: refused))")
            return
        }
        #expect(problem.kind == .refused(.scopeMissing) && problem.detail.contains("operator.write"))
    }

    @Test func everyRefusalHasItsWordsAndItsWayForward() {
        func refusal(_ code: String, _ message: String, details: JSONValue? = nil, retryAfter: Int? = nil) -> OpenClawHandshake.Outcome {
            OpenClawHandshake.refusal(
                GatewayErrorShape(code: code, message: message, details: details, retryAfterMs: retryAfter), url: "ws://g", deviceID: "dev")
        }
        guard case .refused(let pairing) = refusal("NOT_PAIRED", "pairing required", details: .object(["requestId": .string("r-7")])) else {
            Issue.record("pairing")
            return
        }
        #expect(pairing.kind == .pairingRequired && pairing.detail.contains("openclaw devices approve r-7"))
        guard case .refused(let token) = refusal("INVALID_REQUEST", "unauthorized: gateway token mismatch (provide gateway auth token)") else { return }
        #expect(token.kind == .credentialRejected && token.detail.contains("token mismatch"))
        guard case .refused(let mismatch) = refusal("INVALID_REQUEST", "protocol mismatch", details: .object(["expectedProtocol": .number(5)])) else { return }
        #expect(mismatch.kind == .refused(.protocolMismatch) && mismatch.detail.contains("protocol 5") && mismatch.detail.contains("update Tether"))
        guard case .refused(let origin) = refusal("INVALID_REQUEST", "origin not allowed") else { return }
        #expect(origin.kind == .refused(.originRefused))
        guard case .refused(let scope) = refusal("INVALID_REQUEST", "missing scope: operator.write") else { return }
        #expect(scope.kind == .refused(.scopeMissing))
        guard
            case .refused(let starting) = refusal(
                "UNAVAILABLE", "gateway starting", details: .object(["reason": .string("startup-sidecars")]), retryAfter: 1500)
        else { return }
        #expect(starting.kind == .unavailable(retryAfter: .milliseconds(1500)))
        guard case .deviceTokenRefused = refusal("INVALID_REQUEST", "unauthorized: device token mismatch (rotate/reissue device token)") else {
            Issue.record("device token")
            return
        }
        guard case .signatureRefused = refusal("INVALID_REQUEST", "device signature invalid") else {
            Issue.record("signature")
            return
        }
        guard case .refused(let other) = refusal("INVALID_REQUEST", "invalid connect params: at /client/id") else { return }
        #expect(other.kind == .refused(.gatewayRefused) && other.detail.contains("invalid connect params"))
    }

    @Test func pairingIsAskedAgainUntilApprovedThenConnects() {
        var machine = ConnectionStateMachine(policy: .default, pairingCheckInterval: .seconds(5), random: { 0 })
        _ = machine.handle(.start)
        let refused = machine.handle(.connectionFailed(ConnectionProblem(.pairingRequired, "approve it")))
        #expect(machine.state == .failed(.pairingRequired))
        #expect(refused.actions == [.scheduleRetry(after: .seconds(5), attempt: 1)])
        #expect(machine.handle(.retryTimerFired).actions == [.connect(attempt: 1)])
        #expect(machine.state == .failed(.pairingRequired), "still waiting for a person while it asks")
        _ = machine.handle(.connectionFailed(ConnectionProblem(.pairingRequired, "approve it")))
        #expect(machine.handle(.retryTimerFired).actions == [.connect(attempt: 1)])
        _ = machine.handle(.connectionSucceeded)
        #expect(machine.state == .connected && machine.epoch == 1)
        // A refusal only a person can lift stays failed, without retries.
        var other = ConnectionStateMachine(policy: .default, random: { 0 })
        _ = other.handle(.start)
        #expect(other.handle(.connectionFailed(ConnectionProblem(.refused(.protocolMismatch), "speaks 5"))).actions.isEmpty)
        #expect(other.state == .failed(.protocolMismatch))
        // A gateway starting up is tried again after the time it asks for.
        var starting = ConnectionStateMachine(policy: .default, random: { 0 })
        _ = starting.handle(.start)
        #expect(
            starting.handle(.connectionFailed(ConnectionProblem(.unavailable(retryAfter: .milliseconds(1500)), "starting"))).actions == [
                .scheduleRetry(after: .milliseconds(1500), attempt: 2)
            ])
        // A manual reconnect while waiting for approval cancels the check and connects now.
        _ = machine.handle(.connectionLost(ConnectionProblem(.unreachable, "x")))
        var waiting = ConnectionStateMachine(policy: .default, random: { 0 })
        _ = waiting.handle(.start)
        _ = waiting.handle(.connectionFailed(ConnectionProblem(.pairingRequired, "approve it")))
        #expect(waiting.handle(.manualReconnect).actions == [.cancelRetry, .connect(attempt: 1)])
    }
}
