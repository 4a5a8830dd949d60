import FoundationEssentials
import Logging
import OpenClawWire
import TetherSchema

/// The attempt under way and its connection: each step, its deadline, and what its end means.
extension ConnectionManagerMachine {
    typealias Report = AttemptReport

    /// What the attempt `id` reported. Reports of an attempt given up change nothing; a
    /// connection closing still carries what the gateway sends, until it ends.
    mutating func attemptReported(_ id: Int, _ report: Report, now: Instant) -> [Action] {
        if let closed = closing[id] {
            switch report {
            case .ended, .failed:
                closing[id] = nil
                return [.end(attempt: id)]
            case .text(let text, _):
                return closed.epoch.map { [.publishInbound(epoch: $0, text: text)] } ?? []
            default:
                return []
            }
        }
        guard var attempt = current, attempt.id == id else { return [] }
        switch (attempt.phase, report) {
        case (.preparing, .credentialUnreadable(let words)):
            return attemptEnded(attempt, opened: false, ConnectionProblem(.credentialUnavailable, "the token cannot be read: \(words)"), token: nil, now: now)
        case (.preparing, .deviceKeyUnusable(let words, let token)):
            return attemptEnded(attempt, opened: false, ConnectionProblem(.refused(.gatewayRefused), words), token: token, now: now)
        case (.preparing, .prepared(let token, let identity, let deviceToken)):
            // The shared token was refused and this device holds a token of its own: that one,
            // until the token changes.
            attempt.withDeviceTokenOnly = sharedTokenRefused == token && deviceToken != nil
            if sharedTokenRefused != nil, !attempt.withDeviceTokenOnly { sharedTokenRefused = nil }
            attempt.token = token
            attempt.deviceToken = deviceToken
            if settings.dialect != .seed, let identity {
                attempt.handshake = OpenClawHandshake(
                    identity: identity, signature: signatureVersion, instanceID: settings.instanceID,
                    scopes: scopeUpgradeWaiting == nil ? settings.scopes : OpenClawProtocol.chatScopes)
            }
            attempt.phase = .upgrading(deadline: now + settings.upgradeDeadline)
            current = attempt
            // The seed dialect authenticates on the upgrade; OpenClaw in its connect request.
            return [.openSocket(attempt: id, token: token, authorize: settings.dialect != .openclaw)]
        case (.upgrading, .upgraded):
            guard let handshake = attempt.handshake else { return opened(GatewayInfo(dialect: .seed), firstFrame: nil, now: now) }
            attempt.phase = .handshaking(
                OpenClawConnect(
                    handshake, required: settings.dialect == .openclaw, url: settings.url, token: attempt.withDeviceTokenOnly ? nil : attempt.token,
                    deviceToken: attempt.deviceToken, now: now))
            current = attempt
            return []
        case (.upgrading, .upgradeRefused(let status)):
            return attemptEnded(attempt, opened: false, .upgradeRefused(httpStatus: status, url: settings.url), token: attempt.token, now: now)
        case (.handshaking(var steps), .text(let text, let date)):
            let step = steps.read(text, now: now, date: date)
            attempt.phase = .handshaking(steps)
            current = attempt
            return handshakeStep(step, now: now)
        case (.handshaking, .ended(let closeFrame)):
            return handshakeEnded(refusal: nil, closeFrame: closeFrame, now: now)
        case (.open(let epoch, _), .text(let text, _)):
            if let notice = Self.shutdownNotice(text) {
                attempt.shutdownNotice = notice
                current = attempt
            }
            return [.publishInbound(epoch: epoch, text: text)]
        case (.open(let epoch, var monitor), .pinged(let answered)):
            let checked = monitor.pinged(previousAnswered: answered)
            attempt.phase = .open(epoch: epoch, monitor)
            current = attempt
            return linkActions(checked, now: now)
        case (.open(let epoch, var monitor), .lastHeard(let heard)):
            let checked = monitor.lastHeard(at: heard, now: now)
            attempt.phase = .open(epoch: epoch, monitor)
            current = attempt
            return linkActions(checked, now: now)
        case (.open, .ended(let closeFrame)):
            let problem: ConnectionProblem =
                if let notice = attempt.shutdownNotice {
                    .restarting(reason: notice.reason, expected: notice.restartExpected)
                } else if closeFrame?.isServiceRestart == true {
                    .restarting(reason: closeFrame?.reason, expected: nil)
                } else {
                    .connectionEnded(closeFrame: closeFrame)
                }
            return attemptEnded(attempt, opened: true, problem, token: attempt.token, now: now)
        case (_, .failed(let error)):
            return attemptEnded(attempt, opened: attempt.isOpen, .attemptFailed(error, url: settings.url), token: attempt.token, now: now)
        default:
            return []
        }
    }

    /// The attempt's deadline passed: the upgrade or a handshake step given up, or liveness
    /// due on the open connection.
    mutating func attemptTimePassed(now: Instant) -> [Action] {
        guard var attempt = current, let deadline = attempt.deadline, now >= deadline else { return [] }
        switch attempt.phase {
        case .preparing:
            return []
        case .upgrading:
            let problem = ConnectionProblem(
                .unreachable, "the gateway at \(settings.url) did not complete the WebSocket upgrade within \(settings.upgradeDeadline)")
            return attemptEnded(attempt, opened: false, problem, token: attempt.token, now: now)
        case .handshaking(let steps):
            return handshakeStep(steps.timePassed(now: now), now: now)
        case .open(let epoch, var monitor):
            let due = monitor.timePassed(now: now)
            attempt.phase = .open(epoch: epoch, monitor)
            current = attempt
            return linkActions(due, now: now)
        }
    }

    /// A step of the handshake: a request to write, or its end.
    private mutating func handshakeStep(_ step: OpenClawConnect.Step?, now: Instant) -> [Action] {
        guard let attempt = current else { return [] }
        switch step {
        case nil:
            return []
        case .write(let request):
            return [.write(attempt: attempt.id, request)]
        case .done(.seed(let firstFrame)):
            return opened(GatewayInfo(dialect: .seed), firstFrame: firstFrame, now: now)
        case .done(.ready(var info, let issued)):
            if attempt.withDeviceTokenOnly { info.connectedWithDeviceToken = true }
            let store: [Action] = if let issued, issued != attempt.deviceToken { [.storeDeviceToken(issued)] } else { [] }
            return store + opened(info, firstFrame: nil, now: now)
        case .done(.refused(let outcome)):
            return handshakeEnded(refusal: outcome, closeFrame: nil, now: now)
        case .done(.ended):
            return handshakeEnded(refusal: nil, closeFrame: nil, now: now)
        }
    }

    /// What a handshake that ended without a connection means: the refusal in the gateway's
    /// answer, or in its close frame's reason; what changes for the next attempt.
    private mutating func handshakeEnded(refusal: OpenClawHandshake.Outcome?, closeFrame: GatewayCloseFrame?, now: Instant) -> [Action] {
        guard let attempt = current else { return [] }
        var problem = ConnectionProblem.connectionEnded(closeFrame: closeFrame)
        var outcome = refusal
        if outcome == nil, let handshake = attempt.handshake, let reason = closeFrame?.reason, !reason.isEmpty,
            case .refused(let refused) = OpenClawHandshake.refusal(
                GatewayErrorShape(code: "", message: reason), url: settings.url, deviceID: handshake.identity.deviceID),
            refused.kind != .refused(.gatewayRefused)
        {
            outcome = .refused(refused)
        }
        var actions: [Action] = []
        switch outcome {
        case .refused(let refused)?:
            problem = refused
        case .deviceTokenRefused(let words)?:
            actions.append(.forgetDeviceToken)
            problem = ConnectionProblem(.unavailable(retryAfter: .zero), words)
        case .sharedTokenRefused(let words)?:
            if attempt.deviceToken != nil, !attempt.withDeviceTokenOnly {
                sharedTokenRefused = attempt.token
                actions.append(.log(.warning, "the shared token was refused: connecting with this device's token", ["connection.error": words]))
                problem = ConnectionProblem(
                    .unavailable(retryAfter: .zero), words + ": connecting with the token the gateway issued to this device; update the token file")
            } else {
                problem = ConnectionProblem(.credentialRejected, words + ": fix the token file, then reconnect")
            }
        case .scopeUpgradeRequired(let request, let words)?:
            if scopeUpgradeWaiting == nil, attempt.handshake?.scopes != OpenClawProtocol.chatScopes {
                scopeUpgradeWaiting = request ?? ""
                let approve = "openclaw devices approve \(request ?? attempt.handshake?.identity.deviceID ?? "DEVICE")"
                actions.append(.log(.warning, words + ": connecting without approvals until it is approved", ["connection.request": request ?? ""]))
                problem = ConnectionProblem(
                    .unavailable(retryAfter: .zero), words + ": connecting without approvals; approve it with `\(approve)`, then `tether reconnect`")
            } else {
                problem = ConnectionProblem(.refused(.gatewayRefused), words)
            }
        case .signatureRefused(let words)?:
            if signatureVersion == .v3 {
                signatureVersion = .v2
                problem = ConnectionProblem(.unavailable(retryAfter: .zero), words + ": trying the v2 signature")
            } else {
                problem = ConnectionProblem(.refused(.gatewayRefused), words)
            }
        case .ready?, nil:
            break
        }
        return actions + attemptEnded(attempt, opened: false, problem, token: attempt.token, now: now)
    }

    /// The WebSocket is open and, on OpenClaw, the handshake done: connected.
    private mutating func opened(_ info: GatewayInfo, firstFrame: String?, now: Instant) -> [Action] {
        guard var attempt = current else { return [] }
        var info = info
        info.scopeUpgradeRequest = scopeUpgradeWaiting
        gateway = info
        knockUntil = nil
        var actions = decide(.connectionSucceeded, now: now).actions
        rejectedToken = nil
        let rule: LinkMonitor.Rule =
            info.dialect == .openclaw ? .ticks(intervalMilliseconds: info.tickIntervalMilliseconds ?? OpenClawProtocol.defaultTickIntervalMs) : .pongs
        attempt.phase = .open(epoch: connection.epoch, LinkMonitor(heartbeat: settings.heartbeat, rule: rule, openedAt: now))
        current = attempt
        if let firstFrame { actions.append(.publishInbound(epoch: connection.epoch, text: firstFrame)) }
        return actions
    }

    /// What the liveness check found: a ping to send, a reading to make, or a dead connection.
    private mutating func linkActions(_ found: [LinkMonitor.Action], now: Instant) -> [Action] {
        guard let attempt = current else { return [] }
        var actions: [Action] = []
        for action in found {
            switch action {
            case .ping: actions.append(.ping(attempt: attempt.id))
            case .readLastHeard: actions.append(.readLastHeard(attempt: attempt.id))
            case .dead(let words):
                return actions + attemptEnded(attempt, opened: true, ConnectionProblem(.unreachable, words), token: attempt.token, now: now)
            }
        }
        return actions
    }

    /// The attempt, or its connection, ended with `problem`: its I/O is over. `token` is the
    /// one it used, nil when none could be read.
    private mutating func attemptEnded(_ attempt: ConnectionAttempt, opened: Bool, _ problem: ConnectionProblem, token: String?, now: Instant) -> [Action] {
        current = nil
        if problem.kind == .credentialRejected { rejectedToken = token }
        if knockUntil == nil { knockUntil = now + .seconds(60) }
        let words: Action = .log(.warning, opened ? "connection lost" : "connection attempt failed", ["connection.error": problem.detail])
        return [.end(attempt: attempt.id), words] + decide(opened ? .connectionLost(problem) : .connectionFailed(problem), now: now).actions
    }

    /// A `shutdown` event's reason and restart time; nil for any other frame. Looked for
    /// cheaply first: every frame of the connection passes here.
    static func shutdownNotice(_ text: String) -> (reason: String?, restartExpected: Duration?)? {
        guard text.contains("\"shutdown\""), case .event("shutdown", let payload, _)? = try? OpenClawCodec().decode(text) else { return nil }
        return (payload?["reason"]?.stringValue, payload?["restartExpectedMs"]?.intValue.map { .milliseconds($0) })
    }
}
