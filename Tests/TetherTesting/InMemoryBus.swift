public import Foundation
import Synchronization
public import TetherBus
public import TetherSchema

/// A bus in memory, for testing a program's service without processes or sockets: what
/// one client publishes reaches every subscription of every client whose prefix matches,
/// at once and in order; retained values are replayed to new subscriptions; commands go to
/// the client serving their endpoint. Every client is a ``Bus``. A command's timeout is
/// measured on the clock the bus is given (a ``ManualClock`` in a test that moves time itself).
public final class InMemoryBus: Sendable {
    private struct Subscription {
        var prefixes: [String]
        var buffer: SubscriptionBuffer
    }

    private struct Presence {
        var topic: String
        var continuation: AsyncStream<Bool>.Continuation
        var last: Bool
    }

    private struct State {
        var subscriptions: [Int: Subscription] = [:]
        var presences: [Int: Presence] = [:]
        var retained: [String: (header: BusHeader, body: Data)] = [:]
        var servers: [String: AsyncStream<IncomingCommand>.Continuation] = [:]
        /// Commands sent before anyone served their endpoint: delivered when someone does.
        var unserved: [String: [IncomingCommand]] = [:]
        var waitingReplies: [String: CheckedContinuation<Result<Data, BusError>, Never>] = [:]
        /// The timeout of each waiting command, cancelled once it is answered.
        var timeouts: [String: Task<Void, Never>] = [:]
        var nextID = 1
        var sequences: [String: UInt64] = [:]
    }

    private let state = Mutex(State())
    /// Waits a command's timeout.
    private let sleep: @Sendable (Duration) async throws -> Void

    /// A bus whose commands time out on `clock`.
    public init(clock: some Clock<Duration> = ContinuousClock()) {
        sleep = { try await clock.sleep(for: $0) }
    }

    /// A client of this bus that publishes as `source`.
    public func client(_ source: String) -> Client {
        Client(bus: self, source: source)
    }

    /// One program's connection to the in-memory bus.
    public struct Client: Bus {
        let bus: InMemoryBus
        public let source: String

        public func publish(_ payload: some Encodable, on topic: Topic) throws(BusError) {
            bus.deliver(topic: topic, body: try Self.encode(payload), source: source, retain: false)
        }

        public func publish<Payload: DirectJSONBody>(_ payload: Payload, on topic: Topic) throws(BusError) {
            bus.deliver(topic: topic, body: Data(payload.jsonBytes()), source: source, retain: false)
        }

        public func retain(_ payload: some Encodable, on topic: Topic) throws(BusError) {
            bus.deliver(topic: topic, body: try Self.encode(payload), source: source, retain: true)
        }

        public func subscribe(to prefixes: [String], confirm: Bool, timeout: Duration) async throws(BusError) -> BusSubscription {
            bus.subscribe(prefixes)
        }

        public func confirmRoundTrip(timeout: Duration) async throws(BusError) {}

        public func subscriberPresence(for topic: Topic) throws(BusError) -> AsyncStream<Bool> {
            bus.watchPresence(of: topic.name)
        }

        public func request<Command: BusCommand>(
            _ command: Command.Type, _ request: Command.Request, requestID: String, timeout: Duration, attempts: Int
        ) async throws(BusError) -> Command.Reply {
            let body = try Self.encode(request)
            let reply = try await bus.request(endpoint: Command.endpoint, method: Command.method, requestID: requestID, body: body, timeout: timeout)
            do {
                return try BusSchema.makeDecoder().decode(Command.Reply.self, from: reply)
            } catch {
                throw .encoding("reply from \(Command.endpoint) is not a \(Command.Reply.self): \(error)")
            }
        }

        public func serve(endpoint name: String) async throws(BusError) -> AsyncStream<IncomingCommand> {
            try bus.serve(name)
        }

        public func reply(to command: IncomingCommand, encodedBody: Data) throws(BusError) {
            bus.answer(command, with: .success(encodedBody))
        }

        public func reply(to command: IncomingCommand, error: CommandErrorReply) throws(BusError) {
            bus.answer(command, with: .failure(.remote(endpoint: command.endpoint, error: error)))
        }

        /// The messages this client published; nothing is dropped in memory.
        public var statistics: BusCounters {
            var counters = BusCounters()
            counters.published = bus.state.withLock { $0.sequences[source] ?? 0 }
            return counters
        }

        private static func encode(_ payload: some Encodable) throws(BusError) -> Data {
            do {
                return try BusSchema.makeEncoder().encode(payload)
            } catch {
                throw .encoding("cannot encode \(type(of: payload)): \(error)")
            }
        }
    }

    // MARK: The medium

    private func deliver(topic: Topic, body: Data, source: String, retain: Bool) {
        state.withLock { state in
            let sequence = (state.sequences[source] ?? 0) + 1
            state.sequences[source] = sequence
            let header = BusHeader(source: source, sequence: sequence)
            if retain { state.retained[topic.name] = (header, body) }
            let message = BusMessage(topic: topic, header: header, body: body)
            for subscription in state.subscriptions.values where subscription.prefixes.contains(where: topic.name.hasPrefix) {
                subscription.buffer.deliver(message)
            }
        }
    }

    private func subscribe(_ prefixes: [String]) -> BusSubscription {
        let buffer: SubscriptionBuffer = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            let buffer = SubscriptionBuffer(limit: .max) { [weak self] in self?.unsubscribe(id) }
            state.subscriptions[id] = Subscription(prefixes: prefixes, buffer: buffer)
            for (topic, value) in state.retained.sorted(by: { $0.key < $1.key }) where prefixes.contains(where: topic.hasPrefix) {
                var header = value.header
                header.replay = true
                buffer.deliver(BusMessage(topic: Topic(topic), header: header, body: value.body))
            }
            Self.updatePresences(&state)
            return buffer
        }
        return BusSubscription(buffer)
    }

    private func unsubscribe(_ id: Int) {
        state.withLock { state in
            state.subscriptions[id] = nil
            Self.updatePresences(&state)
        }
    }

    private func watchPresence(of topic: String) -> AsyncStream<Bool> {
        let (stream, continuation) = AsyncStream<Bool>.makeStream()
        state.withLock { state in
            let present = Self.isTaken(topic, in: state)
            state.presences[state.nextID] = Presence(topic: topic, continuation: continuation, last: present)
            state.nextID += 1
            continuation.yield(present)
        }
        return stream
    }

    private static func isTaken(_ topic: String, in state: State) -> Bool {
        state.subscriptions.values.contains { $0.prefixes.contains(where: topic.hasPrefix) }
    }

    private static func updatePresences(_ state: inout State) {
        for (id, presence) in state.presences {
            let present = isTaken(presence.topic, in: state)
            guard present != presence.last else { continue }
            state.presences[id]?.last = present
            presence.continuation.yield(present)
        }
    }

    private func serve(_ endpoint: String) throws(BusError) -> AsyncStream<IncomingCommand> {
        let (stream, continuation) = AsyncStream<IncomingCommand>.makeStream()
        let served: Bool = state.withLock { state in
            guard state.servers[endpoint] == nil else { return false }
            state.servers[endpoint] = continuation
            for command in state.unserved.removeValue(forKey: endpoint) ?? [] { continuation.yield(command) }
            return true
        }
        guard served else { throw .alreadyRunning(name: endpoint, holder: nil) }
        return stream
    }

    private func request(endpoint: String, method: String, requestID: String, body: Data, timeout: Duration) async throws(BusError) -> Data {
        let key = UUID().uuidString
        let sleep = self.sleep
        let result: Result<Data, BusError> = await withCheckedContinuation { continuation in
            let command = IncomingCommand(endpoint: endpoint, requestID: requestID, method: method, body: body, identity: Array(key.utf8))
            state.withLock { state in
                state.waitingReplies[key] = continuation
                // As over ZeroMQ, a command waits for its endpoint to be served, until its timeout.
                state.timeouts[key] = Task { [weak self] in
                    guard (try? await sleep(timeout)) != nil else { return }
                    self?.resume(key, with: .failure(.timedOut(endpoint: endpoint, attempts: 1)))
                }
                if let server = state.servers[endpoint] {
                    server.yield(command)
                } else {
                    state.unserved[endpoint, default: []].append(command)
                }
            }
        }
        return try result.get()
    }

    private func answer(_ command: IncomingCommand, with result: Result<Data, BusError>) {
        resume(String(decoding: command.sender, as: UTF8.self), with: result)
    }

    private func resume(_ key: String, with result: Result<Data, BusError>) {
        let (waiting, timeout) = state.withLock { ($0.waitingReplies.removeValue(forKey: key), $0.timeouts.removeValue(forKey: key)) }
        timeout?.cancel()
        waiting?.resume(returning: result)
    }
}
