import FoundationEssentials
public import Logging
import Synchronization
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
/// id with the reply it already gave (the caller retried), or with the one its first
/// attempt is still waiting for, and replies with errors in words.
public struct CommandDispatcher: Sendable {
    /// When a command's handler runs, beside the others or in turn.
    public enum Turn: Sendable {
        /// One at a time, in arrival order, with the other commands taken in turn (the default).
        case inTurn
        /// In a task of its own, at once: for a handler that waits on a peer (the gateway's
        /// answer), so that the commands behind it do not wait for that peer too. A send must
        /// not go unanswered behind a session list the gateway is slow to give.
        case alongside
    }

    private struct Handler: Sendable {
        let turn: Turn
        let run: @Sendable (Data) async throws -> Data
    }

    /// Commands answered alongside at most at once; past that, the next is taken in turn.
    static let alongsideLimit = 64

    private let bus: any Bus
    private let logger: Logger
    private var handlers: [String: Handler] = [:]

    public init(bus: any Bus, logger: Logger) {
        self.bus = bus
        self.logger = logger
    }

    /// Adds the handler of a command, run in `turn`.
    public mutating func on<Command: BusCommand>(
        _ command: Command.Type,
        _ turn: Turn = .inTurn,
        _ handler: @escaping @Sendable (Command.Request) async throws -> Command.Reply
    ) {
        handlers[Command.method] = Handler(turn: turn) { body in
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

    /// Handles the commands of `stream` until it ends: those taken in turn one at a time, in
    /// arrival order; those answered alongside each in a task of its own.
    public func run(_ stream: AsyncStream<IncomingCommand>) async {
        let ledger = CommandLedger(capacity: 1024)
        await withDiscardingTaskGroup { group in
            for await command in stream {
                guard let handler = handlers[command.method] else {
                    let known = handlers.keys.sorted().joined(separator: ", ")
                    try? bus.reply(to: command, error: CommandErrorReply(.unknownMethod, "no method '\(command.method)' here; these are: \(known)"))
                    continue
                }
                switch ledger.arrive(command, alongside: handler.turn == .alongside, limit: Self.alongsideLimit) {
                case .answered(let reply):
                    try? bus.reply(to: command, encodedBody: reply)
                case .joined:
                    break
                case .inTurn:
                    await answer(command, with: handler, ledger: ledger)
                case .alongside:
                    group.addTask { await answer(command, with: handler, ledger: ledger) }
                }
            }
        }
    }

    /// Runs the handler and answers the command, and every retry of it that came meanwhile.
    private func answer(_ command: IncomingCommand, with handler: Handler, ledger: CommandLedger) async {
        let outcome: Result<Data, CommandErrorReply>
        do {
            outcome = .success(try await handler.run(command.body))
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
            outcome = .failure(reply)
        }
        for waiting in ledger.finish(command, with: outcome) {
            switch outcome {
            case .success(let reply): try? bus.reply(to: waiting, encodedBody: reply)
            case .failure(let error): try? bus.reply(to: waiting, error: error)
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

/// The commands a dispatcher is answering and the last replies it gave, by request id: a
/// retry of a command answered is given the same reply, and a retry of one still running
/// waits for its answer (the caller's first attempt is gone with the socket it replaced, so
/// the retry's is the answer it reads).
final class CommandLedger: Sendable {
    enum Arrival: Equatable {
        /// Answered already: this is the reply.
        case answered(Data)
        /// Its first attempt still runs: answered with it.
        case joined
        /// To run now, in turn or in a task of its own.
        case inTurn, alongside
    }

    private struct Run {
        let alongside: Bool
        var retries: [IncomingCommand] = []
    }

    private struct State {
        var replies: RecentReplies
        /// Each command that runs, with the retries that wait for it, by request id.
        var running: [String: Run] = [:]
        /// How many of them run alongside.
        var alongside = 0
    }

    private let state: Mutex<State>

    init(capacity: Int) {
        state = Mutex(State(replies: RecentReplies(capacity: capacity)))
    }

    /// What to do with `command`; one to run is counted as running until ``finish(_:with:)``.
    func arrive(_ command: IncomingCommand, alongside: Bool, limit: Int) -> Arrival {
        state.withLock { state in
            if let reply = state.replies[command.requestID] { return .answered(reply) }
            if state.running[command.requestID] != nil {
                state.running[command.requestID]?.retries.append(command)
                return .joined
            }
            let runsAlongside = alongside && state.alongside < limit
            state.running[command.requestID] = Run(alongside: runsAlongside)
            guard runsAlongside else { return .inTurn }
            state.alongside += 1
            return .alongside
        }
    }

    /// Ends `command`'s run: a reply is kept for later retries (an error is not: a retry
    /// tries again); returns the command and every retry of it to answer.
    func finish(_ command: IncomingCommand, with outcome: Result<Data, CommandErrorReply>) -> [IncomingCommand] {
        state.withLock { state in
            if case .success(let reply) = outcome { state.replies[command.requestID] = reply }
            guard let run = state.running.removeValue(forKey: command.requestID) else { return [command] }
            if run.alongside { state.alongside -= 1 }
            return [command] + run.retries
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
