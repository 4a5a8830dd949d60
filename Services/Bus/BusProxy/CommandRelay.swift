import CZeroMQ
import FoundationEssentials
import Logging
import TetherBus
import TetherSchema

/// Which owner a relayed command goes to and whom its reply goes back to: a value, with no
/// sockets, so each rule is tested alone.
///
/// A command from another host arrives on the relay's ROUTER as [caller, endpoint, request
/// id, method, body]; it leaves for its owner as [request id, method, body], and the owner's
/// reply [request id, status, body] goes back to the caller that sent that request id.
public struct CommandRelayTable: Sendable {
    /// What to do with a message.
    public enum Action: Equatable, Sendable {
        /// Send `frames` to the owner of `endpoint`.
        case forward(endpoint: String, frames: [[UInt8]])
        /// Answer the caller at once (`frames` start with its routing identity).
        case answer(frames: [[UInt8]])
        /// Nothing can be done (a reply nobody waits for any more).
        case drop
    }

    /// The endpoints commands may be relayed to.
    public let endpoints: Set<String>
    /// How long a caller is remembered for its reply.
    public let memory: Duration
    private var callers: [[UInt8]: (identity: [UInt8], at: ContinuousClock.Instant)] = [:]

    public init(endpoints: Set<String>, memory: Duration = .seconds(60)) {
        self.endpoints = endpoints
        self.memory = memory
    }

    /// A message from a caller on another host.
    public mutating func fromCaller(_ frames: [[UInt8]], now: ContinuousClock.Instant) -> Action {
        forget(before: now - memory)
        guard let identity = frames.first else { return .drop }
        guard frames.count == 5 else {
            return error(
                to: identity, requestID: frames.count > 2 ? frames[2] : [], .malformed,
                "a relayed command is four frames (endpoint, request id, method, JSON body); this one had \(max(0, frames.count - 1))")
        }
        guard let endpoint = String(validating: frames[1], as: UTF8.self), endpoints.contains(endpoint) else {
            return error(
                to: identity, requestID: frames[2], .unknownMethod,
                "no endpoint \(String(decoding: frames[1], as: UTF8.self)) here; the relay reaches \(endpoints.sorted().joined(separator: ", "))")
        }
        callers[frames[2]] = (identity, now)
        return .forward(endpoint: endpoint, frames: Array(frames[2...]))
    }

    /// A reply from an owner.
    public mutating func fromOwner(_ frames: [[UInt8]]) -> Action {
        guard frames.count == 3, let caller = callers.removeValue(forKey: frames[0]) else { return .drop }
        return .answer(frames: [caller.identity] + frames)
    }

    private mutating func forget(before cutoff: ContinuousClock.Instant) {
        callers = callers.filter { $0.value.at >= cutoff }
    }

    private func error(to identity: [UInt8], requestID: [UInt8], _ code: CommandErrorReply.Code, _ words: String) -> Action {
        .answer(frames: [identity, requestID, Array("error".utf8), Array(CommandErrorReply.encoded(CommandErrorReply(code, words)))])
    }
}

/// The thread that owns the relay's sockets: a CURVE-guarded ROUTER on TCP for callers on
/// other hosts (the same allow-list as the bus, through ZAP) and a DEALER to each owner's
/// endpoint in the run directory.
final class CommandRelay: Sendable {
    private let listen: String
    private let secretKey: String
    private let owners: [String: String]
    private let control = "inproc://tether-bus-relay-\(UUID().uuidString)"
    private let logger: Logger
    private let finished = AsyncStream<Void>.makeStream()

    /// - Parameter owners: endpoint names and the ipc addresses of their owners.
    init(listen: String, secretKey: String, owners: [String: String], logger: Logger) {
        self.listen = listen
        self.secretKey = secretKey
        self.owners = owners
        self.logger = logger
    }

    func start() async throws {
        let (listen, secretKey, owners, control, logger) = (self.listen, self.secretKey, self.owners, self.control, self.logger)
        let finished = self.finished.continuation
        let bound: Result<Void, any Error> = await withCheckedContinuation { ready in
            startDetachedThread(name: "tether-bus-relay") {
                Self.run(listen: listen, secretKey: secretKey, owners: owners, control: control, logger: logger, ready: ready)
                finished.finish()
            }
        }
        try bound.get()
    }

    /// Stops the relay and waits for its thread to end; when it cannot be told to stop, says
    /// so and leaves it running rather than waiting for ever.
    func stop() async {
        do {
            try sendControl("TERMINATE", to: control)
        } catch {
            logger.error("cannot stop the command relay: it runs until the program exits", metadata: ["bus.error": "\(error)"])
            return
        }
        for await _ in finished.stream {}
    }

    private static func run(
        listen: String, secretKey: String, owners: [String: String], control: String, logger: Logger, ready: CheckedContinuation<Result<Void, any Error>, Never>
    ) {
        let router: ZMQSocket
        let controlSocket: ZMQSocket
        var dealers: [(name: String, socket: ZMQSocket)] = []
        do {
            router = try ZMQSocket(type: ZMQ_ROUTER, context: .shared)
            try router.set(ZMQ_LINGER, 0)
            try router.set64(ZMQ_MAXMSGSIZE, Int64(BusSchema.commandReadLimit))
            try router.set(ZMQ_CURVE_SERVER, 1)
            try router.set(ZMQ_CURVE_SECRETKEY, bytes: Array(secretKey.utf8))
            try router.set(ZMQ_ZAP_DOMAIN, bytes: Array("tether".utf8))
            try router.bind(listen)
            controlSocket = try ZMQSocket(type: ZMQ_PAIR, context: .shared)
            try controlSocket.set(ZMQ_LINGER, 0)
            try controlSocket.bind(control)
            for (name, endpoint) in owners.sorted(by: { $0.key < $1.key }) {
                let dealer = try ZMQSocket(type: ZMQ_DEALER, context: .shared)
                try dealer.set(ZMQ_LINGER, 0)
                try dealer.connect(endpoint)
                dealers.append((name, dealer))
            }
        } catch {
            ready.resume(returning: .failure(ProxyError(.relay, "the command relay cannot start: \(error)")))
            return
        }
        ready.resume(returning: .success(()))
        var table = CommandRelayTable(endpoints: Set(owners.keys))
        let sockets = [controlSocket, router] + dealers.map(\.socket)
        var items = sockets.map { zmq_pollitem_t(socket: $0.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0) }
        while true {
            guard zmq_poll(&items, Int32(items.count), -1) >= 0 else {
                if zmq_errno() == EINTR { continue }
                logger.error("the command relay stopped", metadata: ["bus.error": "\(String(cString: zmq_strerror(zmq_errno())))"])
                return
            }
            if items[0].revents != 0 { return }
            if items[1].revents != 0 {
                while let frames = try? router.receive() {
                    switch table.fromCaller(frames, now: .now) {
                    case .forward(let endpoint, let forwarded):
                        if let dealer = dealers.first(where: { $0.name == endpoint })?.socket { _ = try? dealer.send(forwarded) }
                    case .answer(let answer):
                        _ = try? router.send(answer)
                    case .drop:
                        break
                    }
                }
            }
            for (index, dealer) in dealers.enumerated() where items[index + 2].revents != 0 {
                while let frames = try? dealer.socket.receive() {
                    if case .answer(let answer) = table.fromOwner(frames) { _ = try? router.send(answer) }
                }
            }
        }
    }
}
