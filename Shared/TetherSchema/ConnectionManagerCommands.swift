// The command tether-connd serves (``Endpoints/connectionManager``).

/// Tell connd to change what it is doing with the connection.
public enum ConnectionCommand: BusCommand {
    public static let method = "connection"
    public static let endpoint = Endpoints.connectionManager

    public enum Action: String, Codable, Sendable, CaseIterable {
        /// Try to connect now, whatever the backoff or a failure says.
        case reconnect
        /// Close the connection gracefully and stay closed until resume.
        case suspend
        /// Connect again after a suspend, with the same identity and credential.
        case resume
    }

    public struct Request: Codable, Sendable {
        public var action: Action
        /// Why, in words, for the log (tether-protod asks for a new connection when the
        /// open one failed a probe).
        public var reason: String?

        public init(action: Action, reason: String? = nil) {
            self.action = action
            self.reason = reason
        }
    }

    public struct Reply: Codable, Sendable {
        /// False when the action does not apply now (resume while not suspended, …).
        public var accepted: Bool
        /// The phase after the action.
        public var phase: ConnectionPhase

        public init(accepted: Bool, phase: ConnectionPhase) {
            self.accepted = accepted
            self.phase = phase
        }
    }
}
