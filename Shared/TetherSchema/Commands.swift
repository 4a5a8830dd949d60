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

/// The body of an `error` reply to a command: a code for programs and words for people.
public struct CommandErrorReply: Codable, Hashable, Sendable, Error {
    public enum Code: String, Codable, Sendable, CaseIterable {
        /// Not a command: the wrong number of frames, a request id or method that is not
        /// UTF-8, or a body that is not the method's request.
        case malformed
        /// The body is over the bus's 1 MiB.
        case tooLarge
        /// The owner has no such method.
        case unknownMethod
        /// A field outside its bounds (an `attempts` below 1, a `limit` outside 1–1000…).
        case outOfBounds
        /// The owner understood and said no (the outbox full, an empty message…): nothing was done.
        case refused
        /// The owner could not carry it out (its database, a gateway that did not answer).
        case failed
        /// The disk holding the owner's files is full: nothing was done; the message says
        /// which file system and what to do.
        case diskFull
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// A request with bounds on its fields, checked by the owner before it is handled.
public protocol BoundedRequest {
    /// Why a field is out of its bounds, in words; nil when all are within them.
    var outOfBounds: String? { get }
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
