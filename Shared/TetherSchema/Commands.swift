public import TetherWire

/// A command a program accepts over its request endpoint, with its request and reply bodies.
///
/// Commands travel request/reply (a DEALER to the owner's ROUTER) so they are not lost:
/// the caller retries with the same request id and the owner handles each id once.
public protocol BusCommand: Sendable {
    associatedtype Request: Codable & Sendable
    associatedtype Reply: Codable & Sendable
    /// The name of the command on the wire.
    static var method: String { get }
    /// The endpoint (a socket name in the run directory) of the program that owns it.
    static var endpoint: String { get }
}

/// Endpoint names in the run directory.
public enum Endpoints {
    /// Publishers connect here (the proxy's XSUB side).
    public static let busIn = "bus.in"
    /// Subscribers connect here (the proxy's XPUB side).
    public static let busOut = "bus.out"
    /// tether-protod's commands.
    public static let protocolHandler = "protod.cmd"
    /// tether-snapd's commands.
    public static let snapshotStore = "snapd.cmd"
    /// tether-connd's commands.
    public static let connectionManager = "connd.cmd"
}

/// Send a chat message. The reply comes once the message is committed to the outbox.
public enum SendMessageCommand: BusCommand {
    public static let method = "send"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        /// Chosen by the front end; sending the same id again never sends the message twice.
        public var id: MessageID
        public var content: String

        public init(id: MessageID, content: String) {
            self.id = id
            self.content = content
        }
    }

    public struct Reply: Codable, Sendable {
        public var id: MessageID
        /// Where the message stands now.
        public var status: DeliveryStatus
        /// False when the id was already in the outbox.
        public var accepted: Bool

        public init(id: MessageID, status: DeliveryStatus, accepted: Bool) {
            self.id = id
            self.status = status
            self.accepted = accepted
        }
    }
}

/// Fetch the latest transcript from the snapshot store.
public enum TranscriptCommand: BusCommand {
    public static let method = "transcript"
    public static let endpoint = Endpoints.snapshotStore

    public struct Request: Codable, Sendable {
        /// The most recent entries to return, oldest first.
        public var limit: Int

        public init(limit: Int = 1000) {
            self.limit = limit
        }
    }

    public struct Reply: Codable, Sendable {
        public var entries: [TranscriptEntry]

        public init(entries: [TranscriptEntry]) {
            self.entries = entries
        }
    }
}

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

        public init(action: Action) {
            self.action = action
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
