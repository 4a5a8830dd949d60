import Logging
import TetherSchema

/// What waits for the time: the retry, knocking at the gateway's port, reading the credential
/// again, the front ends' presence, the attempt's deadlines and the connections closing.
extension ConnectionManagerMachine {
    /// The next moment something is due; the driver sends `timePassed` then. Knocks and
    /// credential readings awaited are not due again until they are answered.
    var nextDeadline: Instant? {
        var dues = [frontEnds.nextDeadline, retryDue, current?.deadline] + closing.values.map { Optional($0.deadline) }
        if !knockInFlight { dues += [retryKnocks?.next, nextFailedKnock] }
        if !credentialCheckInFlight { dues.append(nextCredentialCheck) }
        return dues.compactMap(\.self).min()
    }

    mutating func timePassed(now: Instant) -> [Action] {
        var actions = frontEndActions(frontEnds.timePassed(at: now), now: now)
        for (id, closed) in closing where now >= closed.deadline {
            // The gateway did not answer the close in time: the connection is cut.
            closing[id] = nil
            actions.append(.end(attempt: id))
        }
        actions += attemptTimePassed(now: now)
        if let due = retryDue, now >= due {
            retryDue = nil
            retryKnocks = nil
            actions += decide(.retryTimerFired, now: now).actions
        }
        actions += knockIfDue(now: now)
        if !credentialCheckInFlight, let due = nextCredentialCheck, now >= due {
            credentialCheckInFlight = true
            nextCredentialCheck = now + .seconds(1)
            actions.append(.checkCredential)
        }
        return actions
    }

    /// A knock at the gateway's port when one is due and none is awaited: while a retry
    /// waits (every 50 ms while the port refuses), or while failed for want of a gateway.
    mutating func knockIfDue(now: Instant) -> [Action] {
        guard !knockInFlight else { return [] }
        if let due = retryKnocks?.next, now >= due {
            knockInFlight = true
            retryKnocks?.next = nil
            return [.knock(.duringRetryWait)]
        }
        if let due = nextFailedKnock, now >= due, let interval = settings.failedKnockInterval {
            knockInFlight = true
            nextFailedKnock = now + interval
            return [.knock(.whileFailed)]
        }
        return []
    }

    /// The port's answer. While a retry waits: a port that refused and now takes connections
    /// is a gateway back from a restart, tried at once; one that refuses is knocked at again
    /// in 50 ms; one that takes the first knock (a gateway that closed the connection
    /// itself) or a host that does not answer is left to the backoff. While failed: a port
    /// taking connections starts again.
    mutating func knockAnswered(_ answer: GatewayKnock.Answer, _ knock: Knock, now: Instant) -> [Action] {
        knockInFlight = false
        switch knock {
        case .duringRetryWait:
            guard let knocks = retryKnocks, let due = retryDue else { return knockIfDue(now: now) }
            switch answer {
            case .accepted where knocks.refusedSeen:
                retryDue = nil
                retryKnocks = nil
                return decide(.retryTimerFired, now: now).actions
            case .refused:
                retryKnocks = RetryKnocks(refusedSeen: true, next: min(due, now + .milliseconds(50)))
            case .accepted, .silent:
                retryKnocks = nil
            }
        case .whileFailed:
            if answer == .accepted, connection.state.awaitsGateway {
                return [.log(.info, "the gateway's port takes connections again: connecting", [:])] + decide(.gatewayAnswered, now: now).actions
            }
        }
        return knockIfDue(now: now)
    }

    /// The credential, read again while failed for it: a token other than the one rejected,
    /// or one that can be read again, connects.
    mutating func credentialChecked(_ token: String?, now: Instant) -> [Action] {
        credentialCheckInFlight = false
        switch connection.state {
        case .failed(.credentialRejected):
            guard let token, token != rejectedToken else { return [] }
            return [.log(.info, "the credential changed: connecting again", [:])] + decide(.credentialChanged, now: now).actions
        case .failed(.credentialUnavailable):
            guard token != nil else { return [] }
            return [.log(.info, "the credential can be read again: connecting", [:])] + decide(.credentialChanged, now: now).actions
        default:
            return []
        }
    }
}
