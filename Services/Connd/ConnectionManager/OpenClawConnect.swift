import FoundationEssentials
import OpenClawWire
import TetherSchema

/// Runs the OpenClaw handshake on a freshly upgraded connection: waits for
/// `connect.challenge`, answers with `connect`, reads the answer.
enum OpenClawConnect {
    enum Result: Sendable {
        /// No challenge came and none was required: a seed gateway; its first frame, if it sent one.
        case seed(firstFrame: String?)
        case ready(GatewayInfo, deviceToken: String?)
        case refused(OpenClawHandshake.Outcome)
        /// The connection ended, or the gateway broke the handshake; the close says why.
        case ended
    }

    /// - Parameter required: an OpenClaw gateway is expected (else one that sends nothing first is a seed gateway).
    static func run(
        _ handshake: OpenClawHandshake, on connection: GatewayConnection, messages: inout AsyncStream<GatewayInbound>.Iterator, required: Bool,
        url: String, token: String?, deviceToken: String?
    ) async -> Result {
        let codec = OpenClawCodec()
        let challengeWait = required ? ConnectionConfiguration.challengeWait : ConnectionConfiguration.autoDetectWait
        let challengeBy = ContinuousClock.now + challengeWait
        connection.wake(after: challengeWait)
        var challenge: ConnectChallenge?
        while challenge == nil {
            switch await messages.next() {
            case nil:
                return .ended
            case .wake?:
                guard ContinuousClock.now >= challengeBy else { continue }
                if !required { return .seed(firstFrame: nil) }
                return .refused(
                    .refused(
                        ConnectionProblem(
                            .unreachable,
                            "the gateway at \(url) sent no connect.challenge within \(challengeWait): it is not an OpenClaw gateway, or one older than the challenge (2026-01-29)"
                        )))
            case .text(let text)?:
                if case .event(name: "connect.challenge", let payload, _)? = try? codec.decode(text),
                    let offered = try? payload?.decode(ConnectChallenge.self)
                {
                    challenge = offered
                } else if !required {
                    return .seed(firstFrame: text)
                }
            }
        }
        guard let challenge else { return .ended }
        let receivedAt = Date()
        let request: String
        do {
            request = try handshake.connectRequest(challenge: challenge, token: token, deviceToken: deviceToken, now: receivedAt)
            try await connection.write(text: request)
        } catch {
            return .ended
        }
        let answerBy = ContinuousClock.now + ConnectionConfiguration.handshakeDeadline
        connection.wake(after: ConnectionConfiguration.handshakeDeadline)
        while true {
            switch await messages.next() {
            case nil:
                return .ended
            case .wake?:
                guard ContinuousClock.now >= answerBy else { continue }
                return .refused(
                    .refused(
                        ConnectionProblem(.unreachable, "the gateway at \(url) did not answer connect within \(ConnectionConfiguration.handshakeDeadline)")))
            case .text(let text)?:
                guard let frame = try? codec.decode(text), let outcome = handshake.outcome(of: frame, url: url, challenge: challenge, receivedAt: receivedAt)
                else { continue }
                if case .ready(let info, let issued) = outcome { return .ready(info, deviceToken: issued) }
                return .refused(outcome)
            }
        }
    }
}
