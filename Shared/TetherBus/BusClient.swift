public import FoundationEssentials
public import Logging
import Synchronization
public import TetherSchema

#if canImport(Glibc)
import Glibc
#endif

/// A program's connection to the Tether bus.
///
/// Publishes through the proxy's `bus.in`, subscribes at its `bus.out`, serves and sends
/// commands over request/reply endpoints in the run directory. Every ZeroMQ socket belongs
/// to one thread, the client's own, which runs `zmq_poll`; the methods here hand work to
/// it through a mailbox and bridge what it receives into Swift concurrency.
public final class BusClient: Sendable {
    /// The program name written as the source of every message.
    public let source: String
    /// The run directory holding the endpoints.
    public let runDirectory: RunDirectory

    let mailbox: Mailbox<BusOperation>
    private let counters: BusCounterBox
    private let nextID = Atomic<Int>(1)
    private let locks = Mutex<[LockFile]>([])
    private let logger: Logger
    /// The bus on another host, when this client is on one: commands go through its relay.
    private let remote: RemoteBus?

    /// Connects to the bus in `runDirectory` (creating the directory 0700 if needed), or
    /// to `remote`'s proxy over TCP with CURVE, commands included (through the proxy's relay);
    /// commands this program serves stay in `runDirectory`.
    ///
    /// Connecting never waits for the proxy: ZeroMQ connects when it appears, and again
    /// after it restarts; retained values are published again to every new subscription.
    public init(source: String, runDirectory: RunDirectory, remote: RemoteBus? = nil, logger: Logger) throws(BusError) {
        try runDirectory.prepare()
        let busIn: String
        let busOut: String
        if let remote {
            (busIn, busOut) = (remote.busIn, remote.busOut)
        } else {
            (busIn, busOut) = (try runDirectory.endpoint(Endpoints.busIn), try runDirectory.endpoint(Endpoints.busOut))
        }
        self.source = source
        self.runDirectory = runDirectory
        self.remote = remote
        self.logger = logger
        let mailbox = try Mailbox<BusOperation>()
        let counters = BusCounterBox()
        self.mailbox = mailbox
        self.counters = counters
        let configuration = BusEventLoop.Configuration(
            source: source, busIn: busIn, busOut: busOut, busLocation: remote?.busIn ?? runDirectory.path, remote: remote, logger: logger)
        startDetachedThread(name: "tether-bus-client") {
            BusEventLoop(configuration: configuration, mailbox: mailbox, counters: counters).run()
        }
    }

    /// A snapshot of the traffic counters, with the bodies this process could not decode.
    public var statistics: BusCounters {
        var statistics = counters.snapshot
        for (kind, count) in BusDrop.undecodableBodies.withLock({ $0 }) { statistics.dropped[kind] = count }
        return statistics
    }

    // MARK: Publishing

    /// Publishes an event.
    public func publish(_ payload: some Encodable, on topic: Topic) throws(BusError) {
        try post(.publish(topic: topic.name, body: try encode(payload, for: .topic(topic.name)), retain: false))
    }

    /// Publishes an event whose body writes itself, chosen where the type is known rather
    /// than by a cast at run time (some 600 instructions a message, callgrind).
    public func publish<Payload: DirectJSONBody>(_ payload: Payload, on topic: Topic) throws(BusError) {
        try post(.publish(topic: topic.name, body: try within(payload.jsonBytes(), for: .topic(topic.name)), retain: false))
    }

    /// Publishes a retained value: sent now, and again to every subscription that matches
    /// it later, until the next value replaces it.
    public func retain(_ payload: some Encodable, on topic: Topic) throws(BusError) {
        try post(.publish(topic: topic.name, body: try encode(payload, for: .topic(topic.name)), retain: true))
    }

    /// Publishes raw frames exactly as given. For tools that replay or test the bus.
    public func publishRaw(_ frames: [[UInt8]]) throws(BusError) {
        try post(.publishRaw(frames: frames))
    }

    /// The body of `payload`, within the limit of where it goes (``BusSchema/maximumBodySize(of:)``).
    private func encode(_ payload: some Encodable, for carrier: BusSchema.BodyCarrier) throws(BusError) -> [UInt8] {
        let bytes: [UInt8]
        if let direct = payload as? any DirectJSONBody {
            bytes = direct.jsonBytes()
        } else {
            do {
                bytes = Array(try BusSchema.encoder.encode(payload))
            } catch {
                throw .encoding("cannot encode \(type(of: payload)): \(error)")
            }
        }
        return try within(bytes, for: carrier)
    }

    /// `bytes`, when they are within the limit of where they go (``BusSchema/maximumBodySize(of:)``).
    private func within(_ bytes: [UInt8], for carrier: BusSchema.BodyCarrier) throws(BusError) -> [UInt8] {
        let limit = BusSchema.maximumBodySize(of: carrier)
        guard bytes.count <= limit else { throw .tooLarge(size: bytes.count, limit: limit) }
        return bytes
    }

    // MARK: Subscribing

    /// Subscribes to every topic that starts with one of `prefixes` (`""` for all).
    ///
    /// With `confirm`, returns only once a probe message has made the round trip through
    /// the proxy, so nothing published after this call returns is missed; it throws
    /// ``BusError/busUnavailable(path:)`` when the proxy does not answer within `timeout`,
    /// and ``BusError/cancelled`` when the task is cancelled first.
    /// Without it, returns at once: the subscription starts working whenever the proxy is there.
    public func subscribe(
        to prefixes: [String],
        confirm: Bool = false,
        timeout: Duration = .seconds(5)
    ) async throws(BusError) -> BusSubscription {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let mailbox = self.mailbox
        let buffer = SubscriptionBuffer(limit: 65_536) { mailbox.post(.unsubscribe(id: id)) }
        if confirm {
            let result: Result<Void, BusError> = await withTaskCancellationHandler {
                await withCheckedContinuation { confirmation in
                    guard !Task.isCancelled else { return confirmation.resume(returning: .failure(.cancelled)) }
                    let posted = mailbox.post(.subscribe(id: id, prefixes: prefixes, buffer: buffer, confirmation: confirmation, timeout: timeout))
                    if !posted { confirmation.resume(returning: .failure(.closed)) }
                }
            } onCancel: {
                mailbox.post(.cancelConfirmation(id: id))
            }
            if case .failure = result { buffer.finish() }
            try result.get()
        } else {
            try post(.subscribe(id: id, prefixes: prefixes, buffer: buffer, confirmation: nil, timeout: timeout))
        }
        return BusSubscription(buffer)
    }

    /// Returns once a probe has made the round trip through the proxy, which shows this
    /// client's subscriptions are in place there; throws ``BusError/busUnavailable(path:)``
    /// when it does not come back within `timeout`.
    public func confirmRoundTrip(timeout: Duration = .seconds(5)) async throws(BusError) {
        // A confirmed subscription to nothing, dropped at once: ending its stream unsubscribes it.
        _ = try await subscribe(to: [], confirm: true, timeout: timeout)
    }

    // MARK: Presence

    /// Whether a subscriber at the proxy takes `topic`: the answer now, then each change.
    ///
    /// It turns false when the connection to the proxy drops (a proxy that restarts loses
    /// what it had in flight) or the last subscription covering `topic` goes away, and true
    /// when one arrives. A publisher that must not lose a message holds it while this is
    /// false, and when it turns true sends again what it sent shortly before it turned false.
    public func subscriberPresence(for topic: Topic) throws(BusError) -> AsyncStream<Bool> {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let (stream, continuation) = AsyncStream<Bool>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let mailbox = self.mailbox
        continuation.onTermination = { _ in
            mailbox.post(.unwatchPresence(id: id))
        }
        try post(.watchPresence(id: id, topic: topic.name, continuation: continuation))
        return stream
    }

    // MARK: Commands

    /// Sends a command to its owner and waits for the reply (the Lazy Pirate pattern: one
    /// socket for each owner, kept between requests; on each timeout it is replaced and the
    /// requests waiting on it are sent again with their ids).
    /// A cancelled task stops waiting with ``BusError/cancelled``; what was sent may still
    /// be carried out.
    public func request<Command: BusCommand>(
        _ command: Command.Type,
        _ request: Command.Request,
        requestID: String = UUID().uuidString.lowercased(),
        timeout: Duration = .milliseconds(2500),
        attempts: Int = 3
    ) async throws(BusError) -> Command.Reply {
        let body = try encode(request, for: .command(Command.method))
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let endpoint: String
        var frames = [Array(requestID.utf8), Array(Command.method.utf8), body]
        if let remote {
            // The relay reads which owner the command is for from a first frame of its own.
            endpoint = remote.commands
            frames.insert(Array(Command.endpoint.utf8), at: 0)
        } else {
            endpoint = try runDirectory.endpoint(Command.endpoint)
        }
        let mailbox = self.mailbox
        let result: Result<[[UInt8]], BusError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                guard !Task.isCancelled else { return continuation.resume(returning: .failure(.cancelled)) }
                let posted = mailbox.post(
                    .request(
                        id: id, name: Command.endpoint, endpoint: endpoint, replyKey: Array(requestID.utf8), frames: frames,
                        timeout: timeout, attempts: max(1, attempts), continuation: continuation))
                if !posted { continuation.resume(returning: .failure(.closed)) }
            }
        } onCancel: {
            mailbox.post(.cancelRequest(id: id))
        }
        let reply = try result.get()
        guard reply.count == 3, reply[0] == Array(requestID.utf8) else {
            throw .malformedReply(endpoint: Command.endpoint)
        }
        let status = String(decoding: reply[1], as: UTF8.self)
        guard status == "ok" else {
            // `{"code", "message"}`; an owner of an older version answers in words only.
            let error =
                (try? JSONDecoder().decode(CommandErrorReply.self, from: Data(reply[2])))
                ?? CommandErrorReply(.failed, String(decoding: reply[2], as: UTF8.self))
            throw .remote(endpoint: Command.endpoint, error: error)
        }
        do {
            return try BusSchema.decoder.decode(Command.Reply.self, from: Data(reply[2]))
        } catch {
            throw .encoding("reply from \(Command.endpoint) is not a \(Command.Reply.self): \(error)")
        }
    }

    /// Binds the request endpoint `name` in the run directory and returns the commands that
    /// arrive there. Holds `name.lock` first: a second program serving the same endpoint is refused.
    public func serve(endpoint name: String) async throws(BusError) -> AsyncStream<IncomingCommand> {
        let lock = try LockFile(path: runDirectory.file(name + ".lock"), name: name)
        let endpoint = try runDirectory.endpoint(name)
        // A socket file left by a program that died: the lock says nobody serves it now.
        unlink(runDirectory.file(name))
        let (stream, continuation) = AsyncStream<IncomingCommand>.makeStream(bufferingPolicy: .bufferingOldest(10_000))
        let mailbox = self.mailbox
        let result: Result<Void, BusError> = await withCheckedContinuation { ready in
            let posted = mailbox.post(.serve(name: name, endpoint: endpoint, continuation: continuation, ready: ready))
            if !posted { ready.resume(returning: .failure(.closed)) }
        }
        try result.get()
        locks.withLock { $0.append(lock) }
        return stream
    }

    /// Answers a command with a reply body encoded already.
    public func reply(to command: IncomingCommand, encodedBody: Data) throws(BusError) {
        try post(.reply(name: command.endpoint, frames: [command.identity, Array(command.requestID.utf8), Array("ok".utf8), Array(encodedBody)]))
    }

    /// Answers a command with an error: `{"code", "message"}`.
    public func reply(to command: IncomingCommand, error: CommandErrorReply) throws(BusError) {
        try post(
            .reply(
                name: command.endpoint, frames: [command.identity, Array(command.requestID.utf8), Array("error".utf8), Array(CommandErrorReply.encoded(error))])
        )
    }

    // MARK: Lifetime

    /// Closes every socket and ends every subscription and command stream; returns once what
    /// was published has left for the proxy (waiting at most 1 s when the proxy is not there).
    public func close() async {
        let mailbox = self.mailbox
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            if !mailbox.post(.shutdown(done)) { done.resume() }
        }
        locks.withLock { $0.removeAll() }
    }

    deinit {
        // Its owner closes a client; one dropped without that still ends its thread and sockets.
        if mailbox.post(.shutdown(nil)) {
            logger.warning("a bus client was dropped without being closed; closing it now", metadata: ["bus.source": "\(source)"])
        }
    }

    private func post(_ operation: BusOperation) throws(BusError) {
        guard mailbox.post(operation) else { throw .closed }
    }
}

/// Work for the socket-owning thread.
enum BusOperation: Sendable {
    case publish(topic: String, body: [UInt8], retain: Bool)
    case publishRaw(frames: [[UInt8]])
    case subscribe(
        id: Int, prefixes: [String], buffer: SubscriptionBuffer,
        confirmation: CheckedContinuation<Result<Void, BusError>, Never>?, timeout: Duration)
    case unsubscribe(id: Int)
    case watchPresence(id: Int, topic: String, continuation: AsyncStream<Bool>.Continuation)
    case unwatchPresence(id: Int)
    case request(
        id: Int, name: String, endpoint: String, replyKey: [UInt8], frames: [[UInt8]], timeout: Duration, attempts: Int,
        continuation: CheckedContinuation<Result<[[UInt8]], BusError>, Never>)
    /// The caller of request `id` stopped waiting.
    case cancelRequest(id: Int)
    /// The caller of subscription `id`'s confirmation stopped waiting.
    case cancelConfirmation(id: Int)
    case serve(
        name: String, endpoint: String, continuation: AsyncStream<IncomingCommand>.Continuation,
        ready: CheckedContinuation<Result<Void, BusError>, Never>)
    case reply(name: String, frames: [[UInt8]])
    /// Close everything; resume the continuation, if any, once done.
    case shutdown(CheckedContinuation<Void, Never>?)
}

extension CommandErrorReply {
    /// The JSON body of an `error` reply.
    public static func encoded(_ error: CommandErrorReply) -> Data {
        (try? BusSchema.encoder.encode(error)) ?? Data(#"{"code":"failed","message":"unencodable error"}"#.utf8)
    }
}
