import NIOCore
import OpenClawWire
import TetherSchema

/// One attempt to connect, and the connection it opens: where it stands and what it carries
/// from step to step. ``ConnectionManagerMachine`` decides its steps.
struct ConnectionAttempt: Sendable {
    typealias Instant = ContinuousClock.Instant

    enum Phase: Sendable {
        /// Reading the credential and the device's keys.
        case preparing
        /// Connecting and upgrading to a WebSocket, which must be done by `deadline`.
        case upgrading(deadline: Instant)
        /// The OpenClaw handshake, or detecting the dialect.
        case handshaking(OpenClawConnect)
        /// Open: frames carry `epoch`.
        case open(epoch: Int, LinkMonitor)
    }

    /// Tells this attempt's reports from those of the attempts before it, which change nothing.
    let id: Int
    var phase = Phase.preparing
    /// The token read for this attempt.
    var token: String?
    /// The device token stored for the gateway, if any.
    var deviceToken: String?
    /// Connecting with the device token alone: the gateway refused the shared one.
    var withDeviceTokenOnly = false
    /// The OpenClaw handshake; nil for a seed gateway.
    var handshake: OpenClawHandshake?
    /// OpenClaw: the gateway said it is going away (a `shutdown` event): why, and how long
    /// it expects its restart to take.
    var shutdownNotice: (reason: String?, restartExpected: Duration?)?

    init(id: Int) {
        self.id = id
    }

    /// When the attempt's phase next needs the time.
    var deadline: Instant? {
        switch phase {
        case .preparing: nil
        case .upgrading(let deadline): deadline
        case .handshaking(let steps): steps.deadline
        case .open(_, let monitor): monitor.nextDeadline
        }
    }

    var isOpen: Bool {
        if case .open = phase { return true }
        return false
    }
}

extension ConnectionProblem {
    /// An attempt that failed before its WebSocket was open, or a connection that failed, in
    /// the machine's terms and in words.
    static func attemptFailed(_ error: any Error, url: String) -> ConnectionProblem {
        if let problem = TLSFailure.problem(error, url: url) { return problem }
        if let error = error as? IOError {
            return ConnectionProblem(.unreachable, "cannot reach the gateway at \(url): \(error.description)")
        }
        return ConnectionProblem(.unreachable, "cannot connect to \(url): \(error)")
    }

    /// A refused upgrade, by what a plain request to the same URL was answered: 401 or 403
    /// is a rejected token.
    static func upgradeRefused(httpStatus: Int?, url: String) -> ConnectionProblem {
        guard let status = httpStatus else { return ConnectionProblem(.unreachable, "the gateway at \(url) refused the WebSocket upgrade") }
        if status == 401 || status == 403 {
            return ConnectionProblem(.credentialRejected, "the gateway at \(url) rejected the token (HTTP \(status))")
        }
        return ConnectionProblem(.unreachable, "the gateway at \(url) refused the connection (HTTP \(status))")
    }

    /// How a connection that was open ended, when no liveness check declared it dead.
    /// The connection ended after the gateway said it restarts (`shutdown`), or with 1012
    /// "service restart": the first try again waits for the time it gave.
    static func restarting(reason: String?, expected: Duration?) -> ConnectionProblem {
        let why = reason.map { "the gateway is restarting (\($0))" } ?? "the gateway is restarting"
        let when = expected.map { ": it expects to be back in \(ConnectionProblem.words($0)), and is tried again then" } ?? ": it is tried again shortly"
        return ConnectionProblem(.restarting(expectedIn: expected), why + when)
    }

    /// A duration as the status line says it: "1.5 s", "2 s".
    static func words(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\((seconds * 10).rounded() / 10) s"
    }

    static func connectionEnded(closeFrame: GatewayCloseFrame?) -> ConnectionProblem {
        // The gateway's own close comes with a close frame. Without one, the gateway went away.
        guard let closeFrame else { return ConnectionProblem(.unreachable, "lost the connection to the gateway: it went away") }
        return ConnectionProblem(.unreachable, "the gateway closed the connection (\(closeFrame.code)\(closeFrame.reason.map { ": \($0)" } ?? ""))")
    }
}
