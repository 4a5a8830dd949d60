import FoundationEssentials
import OpenClawWire
import TetherSchema

/// The OpenClaw handshake on a freshly upgraded connection, as a value: wait for
/// `connect.challenge`, answer with `connect`, read the answer, each step under its deadline.
/// Detecting the dialect (`required` false), a gateway that sends anything else first, or
/// nothing for ``ConnectionConfiguration/autoDetectWait``, is a seed gateway. Time is passed
/// in; whoever runs it writes what it asks and feeds it the gateway's text messages.
struct OpenClawConnect: Sendable {
    typealias Instant = ContinuousClock.Instant

    enum Result: Sendable, Equatable {
        /// No challenge came and none was required: a seed gateway; its first frame, if it sent one.
        case seed(firstFrame: String?)
        case ready(GatewayInfo, deviceToken: String?)
        case refused(OpenClawHandshake.Outcome)
        /// The connection ended, or the gateway broke the handshake; the close says why.
        case ended
    }

    /// What the handshake asks for after a message or the time.
    enum Step: Sendable, Equatable {
        /// Write this request (`connect`), then go on reading.
        case write(String)
        case done(Result)
    }

    private enum Phase: Sendable {
        case awaitingChallenge
        case awaitingAnswer(challenge: ConnectChallenge, receivedAt: Date)
    }

    private let handshake: OpenClawHandshake
    private let required: Bool
    private let url: String
    private let token: String?
    private let deviceToken: String?
    private let codec = OpenClawCodec()
    private var phase = Phase.awaitingChallenge
    /// When the current step gives up.
    private(set) var deadline: Instant

    /// - Parameters:
    ///   - required: an OpenClaw gateway is expected (else one that sends nothing first is a seed gateway).
    ///   - token: the shared token to send; nil sends `deviceToken` instead.
    init(_ handshake: OpenClawHandshake, required: Bool, url: String, token: String?, deviceToken: String?, now: Instant) {
        self.handshake = handshake
        self.required = required
        self.url = url
        self.token = token
        self.deviceToken = deviceToken
        deadline = now + (required ? ConnectionConfiguration.challengeWait : ConnectionConfiguration.autoDetectWait)
    }

    /// A text message from the gateway, read at `now` (`date` on the wall clock, for the
    /// signature and the clock offset); nil while the handshake goes on.
    mutating func read(_ text: String, now: Instant, date: Date) -> Step? {
        switch phase {
        case .awaitingChallenge:
            guard case .event(name: "connect.challenge", let payload, _)? = try? codec.decode(text),
                let challenge = try? payload?.decode(ConnectChallenge.self)
            else { return required ? nil : .done(.seed(firstFrame: text)) }
            guard let request = try? handshake.connectRequest(challenge: challenge, token: token, deviceToken: deviceToken, now: date) else {
                return .done(.ended)
            }
            phase = .awaitingAnswer(challenge: challenge, receivedAt: date)
            deadline = now + ConnectionConfiguration.handshakeDeadline
            return .write(request)
        case .awaitingAnswer(let challenge, let receivedAt):
            guard let frame = try? codec.decode(text), let outcome = handshake.outcome(of: frame, url: url, challenge: challenge, receivedAt: receivedAt)
            else { return nil }
            if case .ready(let info, let issued) = outcome { return .done(.ready(info, deviceToken: issued)) }
            return .done(.refused(outcome))
        }
    }

    /// The handshake's end when its step's deadline has passed; nil before.
    func timePassed(now: Instant) -> Step? {
        guard now >= deadline else { return nil }
        switch phase {
        case .awaitingChallenge:
            if !required { return .done(.seed(firstFrame: nil)) }
            return .done(
                .refused(
                    .refused(
                        ConnectionProblem(
                            .unreachable,
                            "the gateway at \(url) sent no connect.challenge within \(ConnectionConfiguration.challengeWait): it is not an OpenClaw gateway, or one older than the challenge (2026-01-29)"
                        ))))
        case .awaitingAnswer:
            return .done(
                .refused(
                    .refused(
                        ConnectionProblem(.unreachable, "the gateway at \(url) did not answer connect within \(ConnectionConfiguration.handshakeDeadline)"))))
        }
    }

    /// Runs the handshake on `connection` by itself, for a client without connd's driver (a
    /// second client in tests): the real clock, and a wake-up among the messages at each deadline.
    static func run(
        _ handshake: OpenClawHandshake, on connection: GatewayConnection, messages: inout AsyncStream<GatewayInbound>.Iterator, required: Bool,
        url: String, token: String?, deviceToken: String?
    ) async -> Result {
        var steps = OpenClawConnect(handshake, required: required, url: url, token: token, deviceToken: deviceToken, now: .now)
        connection.wake(after: steps.deadline - .now)
        while true {
            let step: Step?
            switch await messages.next() {
            case nil: return .ended
            case .wake?: step = steps.timePassed(now: .now)
            case .text(let text)?: step = steps.read(text, now: .now, date: Date())
            }
            switch step {
            case .write(let request)?:
                do { try await connection.write(text: request) } catch { return .ended }
                connection.wake(after: steps.deadline - .now)
            case .done(let result)?:
                return result
            case nil:
                continue
            }
        }
    }
}
