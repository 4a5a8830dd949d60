public import TetherSchema

/// An error from the bus client.
public struct BusError: Error, CustomStringConvertible, Sendable, Equatable {
    private enum Code: Sendable, Equatable {
        case closed
        case cancelled
        case alreadyRunning(name: String, holder: String?)
        case endpointTooLong(path: String)
        case unsafeRunDirectory(path: String, reason: String)
        case system(call: String, errno: Int32, message: String)
        case tooLarge(size: Int, limit: Int)
        case timedOut(endpoint: String, attempts: Int)
        case busUnavailable(path: String)
        case remote(endpoint: String, error: CommandErrorReply)
        case malformedReply(endpoint: String)
        case malformedMessage(String)
        case encoding(String)
        case invalidKey(String)
        case invalidAddress(String)
        case keyRefused(endpoint: String)
        case handshakeFailed(endpoint: String)
    }

    private let code: Code

    private init(_ code: Code) {
        self.code = code
    }

    /// The client was closed.
    public static var closed: Self { .init(.closed) }
    /// The task waiting for an answer was cancelled.
    public static var cancelled: Self { .init(.cancelled) }
    /// A message from the bus that is not topic, header and body within the limits.
    public static func malformedMessage(_ reason: String) -> Self { .init(.malformedMessage(reason)) }
    /// Another process holds the lock for an endpoint this program must bind.
    public static func alreadyRunning(name: String, holder: String?) -> Self { .init(.alreadyRunning(name: name, holder: holder)) }
    /// An ipc path over the kernel's limit for socket paths.
    public static func endpointTooLong(path: String) -> Self { .init(.endpointTooLong(path: path)) }
    /// The run directory is not private to this user.
    public static func unsafeRunDirectory(path: String, reason: String) -> Self {
        .init(.unsafeRunDirectory(path: path, reason: reason))
    }
    /// A system or libzmq call failed.
    public static func system(call: String, errno: Int32, message: String) -> Self {
        .init(.system(call: call, errno: errno, message: message))
    }
    /// A message body over the bus limit.
    public static func tooLarge(size: Int, limit: Int) -> Self { .init(.tooLarge(size: size, limit: limit)) }
    /// A command got no reply after every attempt.
    public static func timedOut(endpoint: String, attempts: Int) -> Self { .init(.timedOut(endpoint: endpoint, attempts: attempts)) }
    /// A subscription could not be confirmed through the proxy.
    public static func busUnavailable(path: String) -> Self { .init(.busUnavailable(path: path)) }
    /// The command's owner answered with an error.
    public static func remote(endpoint: String, error: CommandErrorReply) -> Self { .init(.remote(endpoint: endpoint, error: error)) }
    /// The command's owner answered with something that is not a reply.
    public static func malformedReply(endpoint: String) -> Self { .init(.malformedReply(endpoint: endpoint)) }
    /// A body could not be encoded or decoded.
    public static func encoding(_ detail: String) -> Self { .init(.encoding(detail)) }
    /// A CURVE key that is not 40 Z85 characters.
    public static func invalidKey(_ detail: String) -> Self { .init(.invalidKey(detail)) }
    /// A remote bus address that is not `tcp://HOST:PORT`.
    public static func invalidAddress(_ address: String) -> Self { .init(.invalidAddress(address)) }
    /// A remote bus refused this program's key: it is not in the bus's allow-list.
    public static func keyRefused(endpoint: String) -> Self { .init(.keyRefused(endpoint: endpoint)) }
    /// The CURVE handshake with a remote bus failed for another reason than the allow-list.
    public static func handshakeFailed(endpoint: String) -> Self { .init(.handshakeFailed(endpoint: endpoint)) }

    /// The owner's refusal in its words, when the error is an `error` reply to a command.
    public var refusal: String? {
        if case .remote(_, let error) = code { return error.message }
        return nil
    }

    /// True for ``timedOut(endpoint:attempts:)``: no attempt was answered, so whether the
    /// owner carried the command out is not known (it may be slow or paused, or not running).
    public var wentUnanswered: Bool {
        if case .timedOut = code { return true }
        return false
    }

    /// True for ``tooLarge(size:limit:)``: over the bus's limit, so nothing was sent.
    public var isTooLarge: Bool {
        if case .tooLarge = code { return true }
        return false
    }

    /// The owner's code, when the error is an `error` reply to a command.
    public var refusalCode: CommandErrorReply.Code? {
        if case .remote(_, let error) = code { return error.code }
        return nil
    }

    /// True when no bus answers in the run directory: the set is not running there.
    public var isBusMissing: Bool {
        if case .busUnavailable = code { return true }
        return false
    }

    /// True when the other side is not there or not allowed: no answer, no bus, a refused key
    /// or a failed handshake.
    public var isUnreachable: Bool {
        switch code {
        case .timedOut, .busUnavailable, .keyRefused, .handshakeFailed: true
        default: false
        }
    }

    public var description: String {
        switch code {
        case .closed:
            "the bus client is closed"
        case .cancelled:
            "the wait for the bus was cancelled"
        case .alreadyRunning(let name, let holder):
            "\(name) is already in use by another process" + (holder.map { " (pid \($0))" } ?? "")
        case .endpointTooLong(let path):
            "socket path '\(path)' is longer than the 107 bytes the kernel allows; use a shorter run directory (TETHER_RUN)"
        case .unsafeRunDirectory(let path, let reason):
            "run directory '\(path)' is not safe to use: \(reason)"
        case .system(let call, let errno, let message):
            "\(call) failed: \(message) (errno \(errno))"
        case .tooLarge(let size, let limit):
            "message body of \(size) bytes is over the bus limit of \(limit) bytes"
        case .timedOut(let endpoint, let attempts):
            "no reply from \(endpoint) after \(attempts) attempt\(attempts == 1 ? "" : "s"); is the program running?"
        case .busUnavailable(let path):
            "the bus at \(path) did not answer; is tether-bus running?"
        case .remote(let endpoint, let error):
            "\(endpoint) refused the command (\(error.code.rawValue)): \(error.message)"
        case .malformedReply(let endpoint):
            "\(endpoint) sent a reply that is not a reply"
        case .malformedMessage(let reason):
            "a malformed bus message: \(reason)"
        case .encoding(let detail), .invalidKey(let detail):
            detail
        case .invalidAddress(let address):
            "'\(address)' is not a bus address; write tcp://HOST:PORT (PORT for bus.in, PORT+1 for bus.out)"
        case .keyRefused(let endpoint):
            "the bus at \(endpoint) refused this program's key: its public key is not in the bus's allow-list (tether-bus --allowed-keys)"
        case .handshakeFailed(let endpoint):
            "the secure handshake with the bus at \(endpoint) failed; is --bus-server-key the bus's public key (tether-bus key FILE prints it)?"
        }
    }
}
