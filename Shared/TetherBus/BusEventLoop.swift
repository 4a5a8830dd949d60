import CZeroMQ
import FoundationEssentials
import Logging
import Synchronization
import TetherSchema

#if canImport(Glibc)
import Glibc
#endif

/// The thread that owns a ``BusClient``'s sockets and runs `zmq_poll` over them and the mailbox.
///
/// The properties read or written at every wake are `@exclusivity(unchecked)`: the loop's
/// thread alone touches them, and no access to one spans a call that touches it again (the
/// decisions' mutating methods, `probes.timePassed(now:)` and the like, touch nothing of the
/// loop's), so the check Swift makes at run time at each access of a class's property (some
/// 70 instructions with its thread-local look-up, about 1,500 a message in all, callgrind)
/// had nothing to catch.
final class BusEventLoop {
    struct Configuration: Sendable {
        var source: String
        var busIn: String
        var busOut: String
        /// Where the proxy is, in the words of errors: the run directory, or the remote endpoint.
        var busLocation: String
        /// The remote bus whose CURVE keys the publisher and subscriber use, if not local.
        var remote: RemoteBus?
        var logger: Logger
    }

    struct LocalSubscription {
        var prefixes: [String]
        var buffer: SubscriptionBuffer
    }

    struct Server {
        var socket: ZMQSocket
        var continuation: AsyncStream<IncomingCommand>.Continuation
    }

    /// What a poll item stands for.
    private enum Watched {
        case mailbox
        case publisher
        case publisherMonitor
        case subscriber
        case subscriberMonitor
        case server(String)
        case requests(endpoint: String)
    }

    let configuration: Configuration
    private let mailbox: Mailbox<BusOperation>
    let counters: BusCounterBox
    var logger: Logger
    let clock = ContinuousClock()
    /// The client's own context: closing the client terminates it, which waits (within the
    /// publisher's linger) until what was published has left, so a program that publishes
    /// and exits loses nothing.
    private let context = ZMQContext()

    @exclusivity(unchecked) var publisher: ZMQSocket? {
        didSet { pollSetIsCurrent = false }
    }
    /// Reports the publisher's connection to the proxy dropping.
    var publisherMonitor: ZMQSocket? {
        didSet { pollSetIsCurrent = false }
    }
    @exclusivity(unchecked) var subscriber: ZMQSocket? {
        didSet { pollSetIsCurrent = false }
    }
    /// Reports the subscriber's CURVE handshakes with a remote proxy.
    var subscriberMonitor: ZMQSocket? {
        didSet { pollSetIsCurrent = false }
    }
    @exclusivity(unchecked) var sequence: UInt64 = 0
    /// What this wake published, received and dropped, not yet in ``counters``.
    @exclusivity(unchecked) var uncounted = BusCounters()
    let processID = getpid()
    @exclusivity(unchecked) var subscriptions: [Int: LocalSubscription] = [:]
    var servers: [String: Server] = [:] {
        didSet { pollSetIsCurrent = false }
    }

    /// The decisions of the commands sent, of subscription confirmations and of what the
    /// proxy asks for; what they decide is carried out below.
    @exclusivity(unchecked) var requests = RequestTracker()
    @exclusivity(unchecked) var probes: SubscriptionProbes
    var interest = UpstreamInterest()
    /// One socket for each endpoint commands were sent to, kept between requests.
    var requestSockets: [String: ZMQSocket] = [:] {
        didSet { pollSetIsCurrent = false }
    }
    /// Each waiting request's caller.
    var requestCallers: [Int: CheckedContinuation<Result<[[UInt8]], BusError>, Never>] = [:]
    /// The callers waiting for a subscription's confirmation.
    var confirmations: [Int: CheckedContinuation<Result<Void, BusError>, Never>] = [:]
    var presenceWatchers: [Int: AsyncStream<Bool>.Continuation] = [:]
    @exclusivity(unchecked) private var shuttingDown = false
    /// Whoever asked for the shutdown, resumed once it is done.
    private var shutdownWaiters: [CheckedContinuation<Void, Never>] = []

    init(configuration: Configuration, mailbox: Mailbox<BusOperation>, counters: BusCounterBox) {
        self.configuration = configuration
        self.mailbox = mailbox
        self.counters = counters
        self.logger = configuration.logger
        self.probes = SubscriptionProbes(busLocation: configuration.busLocation)
    }

    func run() {
        do {
            let socket = try ZMQSocket(type: ZMQ_XPUB, context: context)
            // Every subscription, repeated ones too, so each new subscriber gets the retained values.
            try socket.set(ZMQ_XPUB_VERBOSE, 1)
            try socket.set(ZMQ_SNDHWM, 100_000)
            try socket.set(ZMQ_LINGER, 1000)
            try Self.setReconnect(socket)
            publisherMonitor = try makeMonitor(of: socket, events: ZMQ_EVENT_DISCONNECTED | handshakeEvents)
            if let remote = configuration.remote { try socket.setCurveClient(serverKey: remote.serverKey, keys: remote.keys) }
            try socket.connect(configuration.busIn)
            publisher = socket
        } catch {
            logger.error("cannot open the publisher socket", metadata: ["bus.error": "\(error)"])
        }
        while !shuttingDown {
            pollOnce()
        }
        tearDown()
    }

    /// A socket that receives `socket`'s `events` (libzmq's socket monitor over inproc).
    private func makeMonitor(of socket: ZMQSocket, events: Int32) throws(BusError) -> ZMQSocket {
        let endpoint = "inproc://tether-bus-monitor-\(UUID().uuidString)"
        guard zmq_socket_monitor(socket.handle, endpoint, events) == 0 else { throw zmqError("zmq_socket_monitor") }
        let monitor = try ZMQSocket(type: ZMQ_PAIR, context: context)
        try monitor.set(ZMQ_LINGER, 0)
        try monitor.connect(endpoint)
        return monitor
    }

    /// The handshake events watched on a remote proxy's connections; none on a local one.
    private var handshakeEvents: Int32 {
        guard configuration.remote != nil else { return 0 }
        return ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
            | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
    }

    private static func setReconnect(_ socket: ZMQSocket) throws(BusError) {
        try socket.set(ZMQ_RECONNECT_IVL, 100)
        try socket.set(ZMQ_RECONNECT_IVL_MAX, 1000)
    }

    // MARK: Polling

    // The thread waits in poll(2) on the descriptors themselves: the mailbox's eventfd and
    // each socket's `ZMQ_FD`. zmq_poll would do the same, but look at every socket's events
    // twice around each wait (about 3,000 instructions a wake with four sockets, against
    // 200 for the poll itself). A socket's descriptor signals only once for what arrives
    // until the socket looks at its commands again, which sending on it or setting it may
    // do: such a socket is read to the end before the thread waits (`ZMQSocket.mayHaveInput`).

    /// The descriptors polled, what each stands for and the socket behind it, kept between
    /// polls: rebuilt only when a socket is opened or closed (each socket property says so),
    /// not at every wake.
    @exclusivity(unchecked) private var pollDescriptors: [pollfd] = []
    @exclusivity(unchecked) private var pollWatched: [Watched] = []
    @exclusivity(unchecked) private var pollSockets: [ZMQSocket?] = []
    @exclusivity(unchecked) private var pollSetIsCurrent = false
    /// The operations taken from the mailbox at the last wake; its storage is reused.
    @exclusivity(unchecked) private var operations: [BusOperation] = []

    private func rebuildPollSet() {
        var descriptors = [pollfd(fd: mailbox.wakeDescriptor, events: Int16(POLLIN), revents: 0)]
        var watched: [Watched] = [.mailbox]
        var sockets: [ZMQSocket?] = [nil]
        func watch(_ socket: ZMQSocket?, as kind: Watched) {
            guard let socket else { return }
            do {
                descriptors.append(pollfd(fd: try socket.descriptor(), events: Int16(POLLIN), revents: 0))
                watched.append(kind)
                sockets.append(socket)
            } catch {
                logger.error("cannot wait for a socket: it is not read", metadata: ["bus.watched": "\(kind)", "bus.error": "\(error)"])
            }
        }
        // The monitor before the publisher: a drop of the old connection to the proxy must be
        // handled before the subscriptions that come over the new one.
        watch(publisherMonitor, as: .publisherMonitor)
        watch(publisher, as: .publisher)
        watch(subscriberMonitor, as: .subscriberMonitor)
        watch(subscriber, as: .subscriber)
        for (name, server) in servers { watch(server.socket, as: .server(name)) }
        for (endpoint, socket) in requestSockets { watch(socket, as: .requests(endpoint: endpoint)) }
        (pollDescriptors, pollWatched, pollSockets, pollSetIsCurrent) = (descriptors, watched, sockets, true)
    }

    private func pollOnce() {
        if !pollSetIsCurrent { rebuildPollSet() }
        readSocketsThatMayHaveInput()
        // What that read may have opened is waited on too.
        if !pollSetIsCurrent { rebuildPollSet() }
        addUncounted()
        guard !shuttingDown else { return }
        let rc = poll(&pollDescriptors, nfds_t(pollDescriptors.count), Int32(clamping: pollTimeoutMilliseconds()))
        if rc < 0 {
            if errno != EINTR {
                logger.error("poll failed", metadata: ["bus.error": "\(String(cString: strerror(errno)))"])
            }
            return
        }
        // What is read below may open or close sockets: the poll set is rebuilt before the
        // next poll, not during this one, whose items each name their socket (looked up again).
        let polled = pollDescriptors
        for index in polled.indices where polled[index].revents != 0 {
            read(pollWatched[index])
        }
        handleTimers()
    }

    /// Reads every socket that was sent on, set or made since it was last read to the end,
    /// until none is left (reading one may send on another): a message whose signal that
    /// took would otherwise wait for the next.
    private func readSocketsThatMayHaveInput() {
        var again = true
        while again {
            again = false
            let sockets = pollSockets
            for index in sockets.indices where sockets[index]?.takeMayHaveInput() == true {
                read(pollWatched[index])
                again = true
            }
        }
    }

    private func read(_ watched: Watched) {
        switch watched {
        case .mailbox:
            mailbox.drain(into: &operations)
            handle(operations)
            // Emptied at once, keeping its storage: what it held (bodies, callers) is let go.
            operations.removeAll(keepingCapacity: true)
        case .publisher: readSubscriptionRequests()
        case .publisherMonitor: readPublisherEvents()
        case .subscriber: readPublications()
        case .subscriberMonitor: readSubscriberEvents()
        case .server(let name): readCommands(server: name)
        case .requests(let endpoint): readReplies(endpoint: endpoint)
        }
    }

    private func pollTimeoutMilliseconds() -> Int {
        // Nothing waits on a deadline, as between commands: no clock to read.
        guard probes.count > 0 || requests.count > 0 else { return -1 }
        let next: ContinuousClock.Instant?
        switch (probes.nextDeadline, requests.nextDeadline) {
        case (let probe?, let request?): next = min(probe, request)
        case (let probe, let request): next = probe ?? request
        }
        guard let next else { return -1 }
        let remaining = clock.now.duration(to: next)
        let milliseconds = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
        return Int(max(0, milliseconds + 1))
    }

    // MARK: Operations

    private func handle(_ operations: [BusOperation]) {
        for operation in operations {
            switch operation {
            case .publish(let topic, let body, let retain):
                if retain { interest.retain(body, on: topic) }
                publish(topic: topic, body: body, replay: false)
            case .publishRaw(let frames):
                send(frames)
            case .subscribe(let id, let prefixes, let buffer, let confirmation, let timeout):
                subscribe(id: id, prefixes: prefixes, buffer: buffer, confirmation: confirmation, timeout: timeout)
            case .unsubscribe(let id):
                unsubscribe(id: id)
            case .watchPresence(let id, let topic, let continuation):
                presenceWatchers[id] = continuation
                perform(interest.watch(id: id, topic: topic))
            case .unwatchPresence(let id):
                presenceWatchers[id] = nil
                interest.unwatch(id: id)
            case .request(let id, let name, let endpoint, let replyKey, let frames, let timeout, let attempts, let continuation):
                requestCallers[id] = continuation
                perform(
                    requests.start(
                        id: id, name: name, endpoint: endpoint, replyKey: replyKey, frames: frames, timeout: timeout, attempts: attempts, now: clock.now))
            case .cancelRequest(let id):
                if let action = requests.cancel(id: id) { perform(action) }
            case .cancelConfirmation(let id):
                perform(probes.cancel(id: id, because: .cancelled))
            case .serve(let name, let endpoint, let continuation, let ready):
                ready.resume(returning: serve(name: name, endpoint: endpoint, continuation: continuation))
            case .reply(let name, let frames):
                guard let server = servers[name] else { continue }
                do {
                    try server.socket.send(frames)
                } catch {
                    logger.warning("cannot send a reply", metadata: ["bus.endpoint": "\(name)", "bus.error": "\(error)"])
                }
            case .shutdown(let continuation):
                shuttingDown = true
                if let continuation { shutdownWaiters.append(continuation) }
            }
        }
    }

    func publish(topic: String, body: [UInt8], replay: Bool) {
        sequence += 1
        let header = BusHeader(source: configuration.source, pid: processID, sequence: sequence, timestamp: Date(), replay: replay)
        guard let publisher else { return }
        count { () throws(BusError) in try publisher.send(topic: topic, header: header.jsonBytes(), body: body) }
    }

    func send(_ frames: [[UInt8]]) {
        guard let publisher else { return }
        count { () throws(BusError) in try publisher.send(frames) }
    }

    /// Counts a message published, or refused, in this wake's counts.
    private func count(_ sending: () throws(BusError) -> Bool) {
        do {
            if try sending() { uncounted.published += 1 } else { uncounted.drop(BusDrop.publishRefused) }
        } catch {
            uncounted.drop(BusDrop.publishRefused)
            logger.warning("cannot publish", metadata: ["bus.error": "\(error)"])
        }
    }

    /// Adds what this wake counted to the client's counters: under their lock once a wake,
    /// not once a message.
    private func addUncounted() {
        guard uncounted.published > 0 || uncounted.received > 0 || uncounted.droppedInAll > 0 else { return }
        let counted = uncounted
        uncounted = BusCounters()
        counters.update { $0.add(counted) }
    }

    private func subscriberSocket() throws(BusError) -> ZMQSocket {
        if let subscriber { return subscriber }
        let socket = try ZMQSocket(type: ZMQ_SUB, context: context)
        try socket.set(ZMQ_RCVHWM, 100_000)
        try socket.set(ZMQ_LINGER, 0)
        try Self.setReconnect(socket)
        if let remote = configuration.remote {
            subscriberMonitor = try makeMonitor(of: socket, events: handshakeEvents)
            try socket.setCurveClient(serverKey: remote.serverKey, keys: remote.keys)
        }
        try socket.connect(configuration.busOut)
        subscriber = socket
        return socket
    }

    private func subscribe(
        id: Int, prefixes: [String], buffer: SubscriptionBuffer,
        confirmation: CheckedContinuation<Result<Void, BusError>, Never>?, timeout: Duration
    ) {
        do {
            let socket = try subscriberSocket()
            // Every subscription subscribes, also to a prefix another of this client's already
            // has: libzmq counts them and passes each upstream, so the owners of retained
            // topics send their values again (marked replay) for the new one too.
            for prefix in prefixes { try socket.set(ZMQ_SUBSCRIBE, bytes: Array(prefix.utf8)) }
            subscriptions[id] = LocalSubscription(prefixes: prefixes, buffer: buffer)
            if let confirmation {
                confirmations[id] = confirmation
                let topic = Topic.probePrefix + configuration.source + "." + UUID().uuidString.lowercased()
                perform(probes.start(id: id, topic: topic, timeout: timeout, now: clock.now))
            }
        } catch {
            confirmation?.resume(returning: .failure(error))
            buffer.finish()
        }
    }

    private func unsubscribe(id: Int) {
        guard let subscription = subscriptions.removeValue(forKey: id) else { return }
        // libzmq stops the prefix once each subscription to it has unsubscribed.
        for prefix in subscription.prefixes { try? subscriber?.set(ZMQ_UNSUBSCRIBE, bytes: Array(prefix.utf8)) }
        perform(probes.cancel(id: id, because: .closed))
    }

    private func serve(name: String, endpoint: String, continuation: AsyncStream<IncomingCommand>.Continuation) -> Result<Void, BusError> {
        do {
            let socket = try ZMQSocket(type: ZMQ_ROUTER, context: context)
            try socket.set(ZMQ_LINGER, 0)
            // A megabyte over the largest body is read, so that a command over its method's limit
            // gets its `tooLarge` answer; beyond that libzmq drops the caller's connection.
            try socket.set64(ZMQ_MAXMSGSIZE, Int64(BusSchema.commandReadLimit))
            try socket.bind(endpoint)
            servers[name] = Server(socket: socket, continuation: continuation)
            return .success(())
        } catch {
            continuation.finish()
            return .failure(error)
        }
    }

    func requestSocket(endpoint: String) throws(BusError) -> ZMQSocket {
        let socket = try ZMQSocket(type: ZMQ_DEALER, context: context)
        try socket.set(ZMQ_LINGER, 0)
        if let remote = configuration.remote, endpoint == remote.commands {
            try socket.setCurveClient(serverKey: remote.serverKey, keys: remote.keys)
        }
        try socket.connect(endpoint)
        return socket
    }

    // MARK: Shutdown

    private func tearDown() {
        for operation in mailbox.close() {
            switch operation {
            case .subscribe(_, _, let buffer, let confirmation, _):
                confirmation?.resume(returning: .failure(.closed))
                buffer.finish()
            case .request(_, _, _, _, _, _, _, let continuation):
                continuation.resume(returning: .failure(.closed))
            case .serve(_, _, let continuation, let ready):
                continuation.finish()
                ready.resume(returning: .failure(.closed))
            case .shutdown(let continuation):
                continuation?.resume()
            case .watchPresence(_, _, let continuation):
                continuation.finish()
            case .publish, .publishRaw, .unsubscribe, .unwatchPresence, .reply, .cancelRequest, .cancelConfirmation:
                break
            }
        }
        perform(probes.closeAll())
        for action in requests.closeAll() { perform(action) }
        for subscription in subscriptions.values { subscription.buffer.finish() }
        for watcher in presenceWatchers.values { watcher.finish() }
        presenceWatchers.removeAll()
        for server in servers.values {
            server.socket.close()
            server.continuation.finish()
        }
        subscriptions.removeAll()
        servers.removeAll()
        for socket in requestSockets.values { socket.close() }
        requestSockets.removeAll()
        subscriberMonitor?.close()
        subscriber?.close()
        publisherMonitor?.close()
        publisher?.close()
        context.terminate()
        for waiter in shutdownWaiters { waiter.resume() }
    }
}
