public import FoundationEssentials
public import TetherSchema

/// What a program uses of the bus: publish, retain, subscribe, watch a topic's
/// subscribers, send commands and serve them.
///
/// ``BusClient`` is the real one, over ZeroMQ; TetherTesting's `InMemoryBus` stands in for
/// it where a program's service is tested without processes.
public protocol Bus: Sendable {
    /// Publishes an event.
    func publish(_ payload: some Encodable, on topic: Topic) throws(BusError)
    /// Publishes an event whose body writes itself (``DirectJSONBody``, as a gateway frame):
    /// chosen where the type is known, rather than by a cast at run time.
    func publish<Payload: DirectJSONBody>(_ payload: Payload, on topic: Topic) throws(BusError)
    /// Publishes a retained value: sent now, and again to every subscription that matches it
    /// later, until the next value replaces it.
    func retain(_ payload: some Encodable, on topic: Topic) throws(BusError)
    /// Subscribes to every topic that starts with one of `prefixes` (`""` for all); with
    /// `confirm`, returns once nothing published afterwards can be missed.
    func subscribe(to prefixes: [String], confirm: Bool, timeout: Duration) async throws(BusError) -> BusSubscription
    /// Returns once this client's subscriptions are shown to be in place.
    func confirmRoundTrip(timeout: Duration) async throws(BusError)
    /// Whether a subscriber takes `topic`: the answer now, then each change.
    func subscriberPresence(for topic: Topic) throws(BusError) -> AsyncStream<Bool>
    /// Sends a command to its owner and waits for the reply, `attempts` times at most.
    func request<Command: BusCommand>(
        _ command: Command.Type, _ request: Command.Request, requestID: String, timeout: Duration, attempts: Int
    ) async throws(BusError) -> Command.Reply
    /// Serves the commands of endpoint `name`.
    func serve(endpoint name: String) async throws(BusError) -> AsyncStream<IncomingCommand>
    /// Answers a command with a reply body encoded already.
    func reply(to command: IncomingCommand, encodedBody: Data) throws(BusError)
    /// Answers a command with an error: its code and words.
    func reply(to command: IncomingCommand, error: CommandErrorReply) throws(BusError)
    /// What this client counted: messages published, received and dropped (its heartbeat says them).
    var statistics: BusCounters { get }
}

extension Bus {
    /// Subscribes with the usual settings (see ``Bus/subscribe(to:confirm:timeout:)``).
    public func subscribe(to prefixes: [String], confirm: Bool = false) async throws(BusError) -> BusSubscription {
        try await subscribe(to: prefixes, confirm: confirm, timeout: .seconds(5))
    }

    /// Sends a command with the usual retries (see ``Bus/request(_:_:requestID:timeout:attempts:)``).
    public func request<Command: BusCommand>(
        _ command: Command.Type, _ request: Command.Request, timeout: Duration = .milliseconds(2500), attempts: Int = 3
    ) async throws(BusError) -> Command.Reply {
        try await self.request(command, request, requestID: UUID().uuidString.lowercased(), timeout: timeout, attempts: attempts)
    }

    /// Answers a command with a reply.
    public func reply(to command: IncomingCommand, with reply: some Encodable) throws(BusError) {
        let body: Data
        do {
            body = try BusSchema.encoder.encode(reply)
        } catch {
            throw .encoding("cannot encode \(type(of: reply)): \(error)")
        }
        try self.reply(to: command, encodedBody: body)
    }
}

extension BusClient: Bus {}
