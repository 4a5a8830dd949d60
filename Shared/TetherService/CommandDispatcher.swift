public import TetherBus
public import TetherSchema
public import Logging
import Foundation

/// An error a command handler returns to its caller, in words.
public struct CommandError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) {
        self.description = description
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
                request = try BusSchema.makeDecoder().decode(Command.Request.self, from: body)
            } catch {
                throw CommandError("request is not a valid '\(Command.method)': \(error)")
            }
            return try BusSchema.makeEncoder().encode(try await handler(request))
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
                try? bus.reply(to: command, error: "unknown command '\(command.method)'")
                continue
            }
            do {
                let reply = try await handler(command.body)
                recentReplies[command.requestID] = reply
                try bus.reply(to: command, encodedBody: reply)
            } catch {
                logger.warning("command failed", metadata: ["command.method": "\(command.method)", "command.error": "\(error)"])
                try? bus.reply(to: command, error: "\(error)")
            }
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
