import FoundationEssentials
public import Logging
public import TetherBus
public import TetherSchema

/// An error a command handler returns to its caller, in words.
public struct CommandError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// The code the `error` reply carries: the owner refused (the default), or could not do it.
    public let code: CommandErrorReply.Code

    public init(_ description: String, code: CommandErrorReply.Code = .refused) {
        self.description = description
        self.code = code
    }
}

/// Serves the commands of one endpoint: decodes each request, answers a repeated request
/// id with the reply it already gave (the caller retried), and replies with errors in words.
public struct CommandDispatcher: Sendable {
    private let bus: any Bus
    private let logger: Logger
    private var handlers: [String: @Sendable (Data) async throws -> Data] = [:]

    public init(bus: any Bus, logger: Logger) {
        self.bus = bus
        self.logger = logger
    }

    /// Adds the handler of a command.
    public mutating func on<Command: BusCommand>(
        _ command: Command.Type,
        _ handler: @escaping @Sendable (Command.Request) async throws -> Command.Reply
    ) {
        handlers[Command.method] = { body in
            let request: Command.Request
            do {
                request = try BusSchema.decoder.decode(Command.Request.self, from: body)
            } catch {
                throw CommandErrorReply(.malformed, "the body is not a '\(Command.method)' request: \(Self.words(error))")
            }
            if let bounded = request as? any BoundedRequest, let words = bounded.outOfBounds {
                throw CommandErrorReply(.outOfBounds, words)
            }
            return try BusSchema.encoder.encode(try await handler(request))
        }
    }

    /// Handles the commands of `stream` one at a time, in arrival order, until it ends.
    public func run(_ stream: AsyncStream<IncomingCommand>) async {
        var recentReplies = RecentReplies(capacity: 1024)
        for await command in stream {
            if let cached = recentReplies[command.requestID] {
                try? bus.reply(to: command, encodedBody: cached)
                continue
            }
            guard let handler = handlers[command.method] else {
                let known = handlers.keys.sorted().joined(separator: ", ")
                try? bus.reply(to: command, error: CommandErrorReply(.unknownMethod, "no method '\(command.method)' here; these are: \(known)"))
                continue
            }
            do {
                let reply = try await handler(command.body)
                recentReplies[command.requestID] = reply
                try bus.reply(to: command, encodedBody: reply)
            } catch {
                let reply: CommandErrorReply =
                    switch error {
                    case let reply as CommandErrorReply: reply
                    case let refusal as CommandError: CommandErrorReply(refusal.code, refusal.description)
                    default: CommandErrorReply(.failed, "\(error)")
                    }
                logger.warning(
                    "command refused",
                    metadata: ["command.method": "\(command.method)", "command.code": "\(reply.code.rawValue)", "command.error": "\(reply.message)"])
                try? bus.reply(to: command, error: reply)
            }
        }
    }
}

extension CommandDispatcher {
    /// What is wrong with a body, in words rather than the decoder's.
    static func words(_ error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map(\.stringValue).filter { !$0.isEmpty }
            return keys.isEmpty ? "the body" : "'\(keys.joined(separator: "."))'"
        }
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            let within = context.codingPath.isEmpty ? "" : " in \(path(context))"
            return "the field '\(key.stringValue)' is missing\(within)"
        case DecodingError.typeMismatch(let type, let context): return "\(path(context)) should be \(Self.name(of: type))"
        case DecodingError.valueNotFound(let type, let context): return "\(path(context)) is null where \(Self.name(of: type)) is needed"
        case DecodingError.dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "\(path(context)) has a value that is not allowed"
        default: return "\(error)"
        }
    }

    private static func name(of type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type, is UInt64.Type: "a whole number"
        case is Double.Type: "a number"
        case is Bool.Type: "true or false"
        default: "\(type)".contains("Array") ? "an array" : "an object"
        }
    }
}

/// The last replies sent, by request id; the oldest is forgotten first.
struct RecentReplies {
    private var order: [String] = []
    private var replies: [String: Data] = [:]
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    subscript(requestID: String) -> Data? {
        get { replies[requestID] }
        set {
            guard let newValue else { return }
            if replies.updateValue(newValue, forKey: requestID) == nil { order.append(requestID) }
            if order.count > capacity { replies[order.removeFirst()] = nil }
        }
    }
}
