import Foundation
import NIOWebSocket
import OpenClawWire
import Testing
import TetherSchema

@testable import ConnectionManager

/// An OpenClaw gateway through connd's machine: the handshake and its deadlines, detecting
/// the dialect, the ticks as heartbeat, and what each refusal changes for the next attempt.
@Suite struct OpenClawConnectionTests {
    static let identity = DeviceIdentity()
    static let codec = OpenClawCodec()

    static var challenge: String {
        codec.encode(.event(name: "connect.challenge", payload: try? JSONValue(encoding: ConnectChallenge(nonce: "n-1", ts: nil)), seq: nil))
    }

    static func hello(tickMilliseconds: Int = 1000, deviceToken: String? = nil) -> String {
        let hello = HelloOk(
            protocol: 3, server: .init(version: "2026.5.12", connId: "c-1"), features: nil, snapshot: nil,
            auth: .init(deviceToken: deviceToken, role: "operator", scopes: ["operator.read", "operator.write"], issuedAtMs: 0),
            policy: .init(maxPayload: nil, maxBufferedBytes: nil, tickIntervalMs: tickMilliseconds))
        return codec.encode(.response(id: OpenClawHandshake.requestID, ok: true, payload: try? JSONValue(encoding: hello), error: nil))
    }

    static func refusal(_ message: String, details: JSONValue? = nil) -> String {
        codec.encode(
            .response(
                id: OpenClawHandshake.requestID, ok: false, payload: nil, error: GatewayErrorShape(code: "INVALID_REQUEST", message: message, details: details))
        )
    }

    /// An OpenClaw machine with attempt `attempt` upgraded and the challenge answered: the
    /// connect request it wrote.
    @discardableResult
    static func challenged(_ rig: inout MachineRig, attempt: Int = 1, token: String = "shared", deviceToken: String? = nil) -> String? {
        if attempt == 1 { rig.send(.start) }
        #expect(
            rig.send(.attempt(attempt, .prepared(token: token, identity: identity, deviceToken: deviceToken)))
                == [.openSocket(attempt: attempt, token: token, authorize: false)], "OpenClaw authenticates in its connect request")
        #expect(rig.send(.attempt(attempt, .upgraded)) == [])
        let written = rig.send(.attempt(attempt, .text(challenge, date: Date())))
        guard case .write(attempt, let request)? = written.first, written.count == 1 else {
            Issue.record("the challenge was not answered: \(written)")
            return nil
        }
        return request
    }

    @Test func theHandshakeIsAnsweredAndTheGatewaysTicksAreItsHeartbeat() {
        var rig = MachineRig(dialect: .openclaw)
        let request = Self.challenged(&rig)
        #expect(request?.contains(#""method":"connect""#) == true)
        #expect(rig.send(.attempt(1, .text(Self.hello(deviceToken: "issued"), date: Date()))) == [.storeDeviceToken("issued")])
        #expect(rig.state == .connected && rig.published?.gateway?.dialect == .openclaw)
        #expect(rig.wait(.milliseconds(1999)) == [])
        #expect(rig.wait(.milliseconds(1)) == [.readLastHeard(attempt: 1)], "two tick intervals after the connection opened")
        #expect(rig.send(.attempt(1, .lastHeard(rig.now - .milliseconds(500)))) == [])
        #expect(rig.wait(.milliseconds(1499)) == [], "two intervals after the last frame")
        #expect(rig.wait(.milliseconds(1)) == [.readLastHeard(attempt: 1)])
        #expect(rig.send(.attempt(1, .lastHeard(rig.now - .milliseconds(2001)))) == [.end(attempt: 1), .knock(.duringRetryWait)])
        #expect(rig.state == .reconnecting(attempt: 1, inFlight: false))
        #expect(rig.published?.lastError == "the gateway went silent (no frame for 2 s (two tick intervals)): the connection is dead")
    }

    @Test func aGatewayThatSendsNoChallengeOrNoAnswerIsGivenUp() {
        var rig = MachineRig(dialect: .openclaw)
        rig.send(.start)
        rig.send(.attempt(1, .prepared(token: "t", identity: Self.identity, deviceToken: nil)))
        rig.send(.attempt(1, .upgraded))
        #expect(rig.send(.attempt(1, .text(#"{"type":"hello"}"#, date: Date()))) == [], "not a challenge: still waiting for one")
        #expect(rig.wait(.milliseconds(5999)) == [])
        #expect(rig.wait(.milliseconds(1)) == [.end(attempt: 1), .knock(.duringRetryWait)])
        #expect(rig.published?.lastError?.contains("sent no connect.challenge within 6.0 seconds") == true)

        var silent = MachineRig(dialect: .openclaw)
        Self.challenged(&silent)
        #expect(silent.wait(.milliseconds(9999)) == [])
        #expect(silent.wait(.milliseconds(1)) == [.end(attempt: 1), .knock(.duringRetryWait)])
        #expect(silent.published?.lastError == "the gateway at \(MachineRig.url) did not answer connect within 10.0 seconds")
    }

    @Test func detectingTheDialectASeedGatewayIsOneThatSendsNoChallenge() {
        var rig = MachineRig(dialect: nil)
        rig.send(.start)
        #expect(
            rig.send(.attempt(1, .prepared(token: "t", identity: Self.identity, deviceToken: nil))) == [.openSocket(attempt: 1, token: "t", authorize: true)])
        rig.send(.attempt(1, .upgraded))
        let greeting = #"{"type":"gateway.greeting"}"#
        #expect(rig.send(.attempt(1, .text(greeting, date: Date()))) == [.publishInbound(epoch: 1, text: greeting)], "its first frame is kept")
        #expect(rig.state == .connected && rig.published?.gateway?.dialect == .seed)

        var quiet = MachineRig(dialect: nil)
        quiet.send(.start)
        quiet.send(.attempt(1, .prepared(token: "t", identity: Self.identity, deviceToken: nil)))
        quiet.send(.attempt(1, .upgraded))
        #expect(quiet.wait(.milliseconds(999)) == [] && quiet.state == .connecting(attempt: 1, inFlight: true))
        #expect(quiet.wait(.milliseconds(1)) == [] && quiet.state == .connected, "nothing for a second: a seed gateway")
    }

    @Test func aRefusedV3SignatureIsTriedAgainAsV2OnceThenRefused() {
        var rig = MachineRig(dialect: .openclaw)
        Self.challenged(&rig)
        #expect(rig.send(.attempt(1, .text(Self.refusal("device signature invalid"), date: Date()))) == [.end(attempt: 1), .knock(.duringRetryWait)])
        #expect(rig.machine.signatureVersion == .v2)
        #expect(rig.published?.lastError?.hasSuffix(": trying the v2 signature") == true)
        #expect(rig.wait(.milliseconds(100)) == [.prepare(attempt: 2)])
        rig.send(.attempt(2, .prepared(token: "shared", identity: Self.identity, deviceToken: nil)))
        #expect(rig.machine.current?.handshake?.signature == .v2)
        rig.send(.attempt(2, .upgraded))
        rig.send(.attempt(2, .text(Self.challenge, date: Date())))
        #expect(rig.send(.attempt(2, .text(Self.refusal("device signature invalid"), date: Date()))) == [.end(attempt: 2)])
        #expect(rig.state == .failed(.gatewayRefused))
    }

    @Test func aRefusedDeviceTokenIsForgotten() {
        var rig = MachineRig(dialect: .openclaw)
        Self.challenged(&rig, deviceToken: "stale")
        #expect(
            rig.send(.attempt(1, .text(Self.refusal("device token mismatch"), date: Date())))
                == [.forgetDeviceToken, .end(attempt: 1), .knock(.duringRetryWait)])
        #expect(rig.state == .connecting(attempt: 2, inFlight: false))
    }

    @Test func aRefusedSharedTokenIsReplacedByTheDevicesOwnUntilTheTokenChanges() {
        let refusal = Self.refusal("unauthorized: gateway token mismatch", details: .object(["recommendedNextStep": .string("retry_with_device_token")]))
        var rig = MachineRig(dialect: .openclaw)
        Self.challenged(&rig, deviceToken: "device")
        rig.send(.attempt(1, .text(refusal, date: Date())))
        #expect(rig.machine.sharedTokenRefused == "shared")
        #expect(rig.wait(.milliseconds(100)) == [.prepare(attempt: 2)])
        let request = Self.challenged(&rig, attempt: 2, deviceToken: "device")
        #expect(request?.contains(#""deviceToken":"device""#) == true && request?.contains(#""token":"shared""#) == false)
        rig.send(.attempt(2, .text(Self.hello(), date: Date())))
        #expect(rig.state == .connected && rig.published?.gateway?.connectedWithDeviceToken == true)
        // A new token in the file: connd tries it.
        rig.send(.attempt(2, .ended(nil)))
        rig.wait(.seconds(1))
        rig.send(.attempt(3, .prepared(token: "new", identity: Self.identity, deviceToken: "device")))
        #expect(rig.machine.current?.withDeviceTokenOnly == false && rig.machine.sharedTokenRefused == nil)

        var without = MachineRig(dialect: .openclaw)
        Self.challenged(&without)
        #expect(without.send(.attempt(1, .text(refusal, date: Date()))) == [.end(attempt: 1)])
        #expect(without.state == .failed(.credentialRejected))
        #expect(without.published?.lastError?.hasSuffix(": fix the token file, then reconnect") == true)
    }

    @Test func aScopeUpgradeWaitingForApprovalIsAskedAroundUntilAReconnectIsAskedFor() throws {
        let wider = ["operator.read", "operator.write", OpenClawProtocol.approvalsScope]
        let upgrade = Self.codec.encode(
            .response(
                id: OpenClawHandshake.requestID, ok: false, payload: nil,
                error: GatewayErrorShape(
                    code: "NOT_PAIRED", message: "pairing required",
                    details: .object(["code": .string("PAIRING_REQUIRED"), "requestId": .string("req-7"), "reason": .string("scope-upgrade")]))))
        var rig = MachineRig(dialect: .openclaw, scopes: wider)
        let first = try #require(Self.challenged(&rig))
        #expect(first.contains(OpenClawProtocol.approvalsScope))
        rig.send(.attempt(1, .text(upgrade, date: Date())))
        #expect(rig.machine.scopeUpgradeWaiting == "req-7")
        #expect(rig.published?.lastError?.contains("openclaw devices approve req-7") == true, "\(String(describing: rig.published?.lastError))")
        #expect(rig.published?.lastError?.hasSuffix("then `tether reconnect`") == true)
        // At once, with the chat scopes only: chat goes on while the upgrade waits.
        #expect(rig.wait(.milliseconds(100)) == [.prepare(attempt: 2)])
        let second = try #require(Self.challenged(&rig, attempt: 2))
        #expect(!second.contains(OpenClawProtocol.approvalsScope))
        rig.send(.attempt(2, .text(Self.hello(), date: Date())))
        #expect(rig.state == .connected && rig.published?.gateway?.scopeUpgradeRequest == "req-7")
        // Approved on the gateway, then `tether reconnect`: the wider scopes are asked for again.
        #expect(rig.machine.command(.reconnect, now: rig.now).accepted)
        #expect(rig.machine.scopeUpgradeWaiting == nil)

        // Refused again while asking only for the chat scopes: a refusal like any other.
        var narrow = MachineRig(dialect: .openclaw)
        Self.challenged(&narrow)
        narrow.send(.attempt(1, .text(upgrade, date: Date())))
        #expect(narrow.machine.scopeUpgradeWaiting == nil && narrow.state == .failed(.gatewayRefused))
    }

    @Test func aRefusalInTheCloseFramesReasonIsTheAttemptsEnd() {
        var rig = MachineRig(dialect: .openclaw)
        Self.challenged(&rig)
        rig.send(.attempt(1, .ended(GatewayCloseFrame(code: .policyViolation, reason: "pairing required"))))
        #expect(rig.state == .failed(.pairingRequired))

        var other = MachineRig(dialect: .openclaw)
        Self.challenged(&other)
        other.send(.attempt(1, .ended(GatewayCloseFrame(code: .policyViolation, reason: "bye"))))
        #expect(other.state == .connecting(attempt: 2, inFlight: false), "a reason that names no refusal is a closed connection")
        #expect(other.published?.lastError?.hasPrefix("the gateway closed the connection") == true)
    }
}

/// The handshake's steps by themselves, as a client without connd's driver runs them.
@Suite struct OpenClawConnectTests {
    let start = ContinuousClock.now
    let handshake = OpenClawHandshake(identity: DeviceIdentity(), instanceID: "test")

    @Test func detectingAFirstFrameOtherThanTheChallengeIsASeedGateway() {
        var steps = OpenClawConnect(handshake, required: false, url: "ws://g", token: "t", deviceToken: nil, now: start)
        #expect(steps.deadline == start + .seconds(1))
        #expect(steps.read("{}", now: start, date: Date()) == .done(.seed(firstFrame: "{}")))
        #expect(steps.timePassed(now: start + .milliseconds(999)) == nil)
        #expect(steps.timePassed(now: start + .seconds(1)) == .done(.seed(firstFrame: nil)))
    }

    @Test func theChallengeIsAnsweredAndTheAnswerAwaitedForTenSeconds() {
        var steps = OpenClawConnect(handshake, required: true, url: "ws://g", token: "t", deviceToken: nil, now: start)
        #expect(steps.deadline == start + .seconds(6))
        #expect(steps.read("{}", now: start, date: Date()) == nil, "required: anything else is not the challenge")
        guard case .write(let request)? = steps.read(OpenClawConnectionTests.challenge, now: start + .seconds(1), date: Date()) else {
            Issue.record("the challenge was not answered")
            return
        }
        #expect(request.contains(#""token":"t""#))
        #expect(steps.deadline == start + .seconds(11))
        #expect(steps.read(OpenClawConnectionTests.challenge, now: start + .seconds(2), date: Date()) == nil, "not the answer")
        guard case .done(.ready(let info, _))? = steps.read(OpenClawConnectionTests.hello(), now: start + .seconds(2), date: Date()) else {
            Issue.record("not ready")
            return
        }
        #expect(info.tickIntervalMilliseconds == 1000)
    }
}

@Suite struct LinkMonitorTests {
    let start = ContinuousClock.now

    @Test func aSeedGatewayIsPingedEveryHeartbeatAndDeadWhenAPingGoesUnanswered() {
        var monitor = LinkMonitor(heartbeat: .seconds(2), rule: .pongs, openedAt: start)
        #expect(monitor.nextDeadline == start + .seconds(2))
        #expect(monitor.timePassed(now: start + .seconds(1)) == [])
        #expect(monitor.timePassed(now: start + .seconds(2)) == [.ping])
        #expect(monitor.pinged(previousAnswered: true) == [])
        #expect(monitor.nextDeadline == start + .seconds(4))
        #expect(monitor.timePassed(now: start + .seconds(4)) == [.ping])
        #expect(monitor.pinged(previousAnswered: false) == [.dead("the gateway went silent (no pong within 2.0 seconds): the connection is dead")])
        #expect(monitor.nextDeadline == nil && monitor.timePassed(now: start + .seconds(10)) == [], "dead once")
    }

    @Test func anOpenClawGatewayIsDeadAfterTwoTickIntervalsWithoutAFrameAndPingedMeanwhile() {
        var monitor = LinkMonitor(heartbeat: .seconds(3), rule: .ticks(intervalMilliseconds: 2000), openedAt: start)
        #expect(monitor.nextDeadline == start + .seconds(3), "the ping comes first")
        #expect(monitor.timePassed(now: start + .seconds(3)) == [.ping])
        #expect(monitor.pinged(previousAnswered: false) == [], "an unanswered ping is not the rule here")
        #expect(monitor.nextDeadline == start + .seconds(4))
        #expect(monitor.timePassed(now: start + .seconds(4)) == [.readLastHeard])
        #expect(monitor.nextDeadline == start + .seconds(6), "no second reading while one is awaited")
        #expect(monitor.lastHeard(at: start + .seconds(3), now: start + .seconds(4)) == [])
        #expect(monitor.nextDeadline == start + .seconds(6))
        #expect(monitor.timePassed(now: start + .seconds(6)) == [.ping])
        #expect(monitor.nextDeadline == start + .seconds(7))
        #expect(monitor.timePassed(now: start + .seconds(7)) == [.readLastHeard])
        #expect(
            monitor.lastHeard(at: start + .seconds(3), now: start + .milliseconds(7001)) == [
                .dead("the gateway went silent (no frame for 4 s (two tick intervals)): the connection is dead")
            ])
    }
}
