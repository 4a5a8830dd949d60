import CZeroMQ
import FoundationEssentials
public import Logging
public import ServiceLifecycle
public import TetherBus
import TetherSchema

#if canImport(Glibc)
import Glibc
#endif

/// The bus: a ZeroMQ XSUB/XPUB proxy (`zmq_proxy_steerable`) on `bus.in` and `bus.out`
/// in the run directory.
///
/// Publishers connect to `bus.in`, subscribers to `bus.out`. The XPUB side is verbose, so
/// every subscription, repeated ones included, travels upstream to the publishers, which
/// is how owners of retained topics learn that a new subscriber needs the current value.
/// The proxy keeps no state: restarting it costs in-flight messages only.
///
/// With ``TCPListener``, it also listens on two TCP ports for programs on other hosts,
/// which must authenticate with CURVE and whose keys must be in an allow-list; the ipc
/// endpoints stay as they are, guarded by the run directory's permissions.
public struct BusProxy: Service {
    /// The TCP ports of a bus shared with other hosts, and what guards them.
    public struct TCPListener: Sendable {
        /// The address to listen on (`0.0.0.0`, a host's address, `127.0.0.1`).
        public var host: String
        /// The port of `bus.in`; `bus.out` is on the next one.
        public var port: Int
        /// The proxy's key pair; clients are given its public key.
        public var keys: CurveKeyPair
        /// The allow-list file, read at every connection (see ``AllowedKeys``).
        public var allowListPath: String

        public init(host: String, port: Int, keys: CurveKeyPair, allowListPath: String) {
            self.host = host
            self.port = port
            self.keys = keys
            self.allowListPath = allowListPath
        }
    }

    private let runDirectory: RunDirectory
    private let listener: TCPListener?
    private let logger: Logger

    public init(runDirectory: RunDirectory, listener: TCPListener? = nil, logger: Logger) {
        self.runDirectory = runDirectory
        self.listener = listener
        self.logger = logger
    }

    public func run() async throws {
        try runDirectory.prepare()
        // An ipc bind silently steals the path from a running proxy: hold the lock first.
        let lock = try LockFile(path: runDirectory.file("bus.lock"), name: "the bus (\(runDirectory.file("bus.lock")))")
        let endpoints = ProxyThread.Endpoints(
            busIn: try runDirectory.endpoint(Endpoints.busIn),
            busOut: try runDirectory.endpoint(Endpoints.busOut),
            control: "inproc://tether-bus-control-\(UUID().uuidString)",
            tcp: listener.map {
                .init(busIn: "tcp://\($0.host):\($0.port)", busOut: "tcp://\($0.host):\($0.port + 1)", secretKey: $0.keys.secretKey)
            })
        // Socket files left by a proxy that died: nobody holds the lock, so nobody uses them.
        unlink(runDirectory.file(Endpoints.busIn))
        unlink(runDirectory.file(Endpoints.busOut))

        // Without a ZAP handler libzmq lets every CURVE client in: it is bound before the TCP ports.
        let authenticator = listener.map { ZAPHandler(allowListPath: $0.allowListPath, logger: logger) }
        try await authenticator?.start()
        let proxy = ProxyThread(endpoints: endpoints, logger: logger)
        // Commands from other hosts, to the owners in this run directory, behind the same keys.
        let relay = try listener.map { listener in
            CommandRelay(
                listen: "tcp://\(listener.host):\(listener.port + 2)", secretKey: listener.keys.secretKey,
                owners: Dictionary(
                    uniqueKeysWithValues: try [Endpoints.protocolHandler, Endpoints.snapshotStore, Endpoints.connectionManager].map {
                        ($0, try runDirectory.endpoint($0))
                    }), logger: logger)
        }
        do {
            try await proxy.start()
            try await relay?.start()
        } catch {
            await proxy.stop()
            await authenticator?.stop()
            throw error
        }
        logger.info("bus proxy running", metadata: ["bus.in": "\(endpoints.busIn)", "bus.out": "\(endpoints.busOut)"])
        if let listener, let tcp = endpoints.tcp {
            logger.info(
                "bus proxy listening for other hosts with CURVE",
                metadata: [
                    "bus.tcp.in": "\(tcp.busIn)", "bus.tcp.out": "\(tcp.busOut)", "bus.tcp.commands": "tcp://\(listener.host):\(listener.port + 2)",
                    "bus.key": "\(listener.keys.publicKey)",
                    "bus.allowed": "\(listener.allowListPath)",
                ])
        }
        try? await gracefulShutdown()
        logger.info("bus proxy stopping")
        await relay?.stop()
        await proxy.stop()
        await authenticator?.stop()
        withExtendedLifetime(lock) {}
    }
}

/// The thread that owns the proxy's sockets and runs `zmq_proxy_steerable` on them.
final class ProxyThread: Sendable {
    struct Endpoints: Sendable {
        var busIn: String
        var busOut: String
        var control: String
        var tcp: TCPEndpoints?
    }

    /// The CURVE-guarded endpoints for other hosts.
    struct TCPEndpoints: Sendable {
        var busIn: String
        var busOut: String
        var secretKey: String
    }

    private let endpoints: Endpoints
    private let logger: Logger
    private let finished = AsyncStream<Void>.makeStream()

    init(endpoints: Endpoints, logger: Logger) {
        self.endpoints = endpoints
        self.logger = logger
    }

    /// Binds the endpoints on the proxy thread and returns once they are bound.
    func start() async throws {
        let endpoints = self.endpoints
        let logger = self.logger
        let finished = self.finished.continuation
        let bound: Result<Void, any Error> = await withCheckedContinuation { ready in
            startDetachedThread(name: "tether-bus-proxy") {
                Self.runProxy(endpoints: endpoints, logger: logger, ready: ready)
                finished.finish()
            }
        }
        try bound.get()
    }

    /// Tells the proxy to terminate and waits for its thread to end; when it cannot be told,
    /// says so and leaves it running rather than waiting for ever.
    func stop() async {
        do {
            try sendControl("TERMINATE", to: endpoints.control)
        } catch {
            logger.error("cannot stop the proxy: it runs until the program exits", metadata: ["bus.error": "\(error)"])
            return
        }
        for await _ in finished.stream {}
    }

    private static func runProxy(endpoints: Endpoints, logger: Logger, ready: CheckedContinuation<Result<Void, any Error>, Never>) {
        let context = ZMQContext.shared.handle
        guard let frontend = zmq_socket(context, ZMQ_XSUB),
            let backend = zmq_socket(context, ZMQ_XPUB),
            let control = zmq_socket(context, ZMQ_PAIR)
        else {
            ready.resume(returning: .failure(ProxyError(.socket, "zmq_socket failed: \(String(cString: zmq_strerror(zmq_errno())))")))
            return
        }
        defer {
            zmq_close(frontend)
            zmq_close(backend)
            zmq_close(control)
        }
        /// Whether libzmq took an option; a refusal fails the start, in words.
        func took(_ result: Int32, _ what: String) -> Bool {
            guard result != 0 else { return true }
            ready.resume(returning: .failure(ProxyError(.option, "cannot set \(what): \(String(cString: zmq_strerror(zmq_errno())))")))
            return false
        }
        func set(_ socket: UnsafeMutableRawPointer, _ option: Int32, _ value: Int32) -> Int32 {
            var value = value
            return zmq_setsockopt(socket, option, &value, MemoryLayout<Int32>.size)
        }
        // A publisher that sends more than any valid message is cut off rather than let through.
        // The proxy does not read topics: a body up to the largest limit of any topic passes,
        // and a subscriber drops one over its own topic's limit.
        var maximumMessageSize = Int64(BusSchema.largestBodySize + 64 * 1024)
        let options: [(Int32, String)] = [
            (set(frontend, ZMQ_RCVHWM, 100_000), "bus.in's receive limit"), (set(frontend, ZMQ_SNDHWM, 100_000), "bus.in's send limit"),
            (zmq_setsockopt(frontend, ZMQ_MAXMSGSIZE, &maximumMessageSize, MemoryLayout<Int64>.size), "bus.in's largest message"),
            (set(backend, ZMQ_SNDHWM, 100_000), "bus.out's send limit"), (set(backend, ZMQ_RCVHWM, 100_000), "bus.out's receive limit"),
            (set(backend, ZMQ_XPUB_VERBOSE, 1), "bus.out's verbose subscriptions"), (set(frontend, ZMQ_LINGER, 0), "bus.in's linger"),
            (set(backend, ZMQ_LINGER, 0), "bus.out's linger"), (set(control, ZMQ_LINGER, 0), "the control socket's linger"),
        ]
        guard options.allSatisfy({ took($0.0, $0.1) }) else { return }
        func bind(_ bindings: [(UnsafeMutableRawPointer, String)]) -> Bool {
            for (socket, endpoint) in bindings where zmq_bind(socket, endpoint) != 0 {
                let message = String(cString: zmq_strerror(zmq_errno()))
                ready.resume(returning: .failure(ProxyError(.bind, "cannot bind \(endpoint): \(message)")))
                return false
            }
            return true
        }
        guard bind([(frontend, endpoints.busIn), (backend, endpoints.busOut), (control, endpoints.control)]) else { return }
        if let tcp = endpoints.tcp {
            // libzmq takes a socket's options at each bind: the ipc endpoints bound above stay
            // as they are, those bound after these options are CURVE servers.
            for socket in [frontend, backend] {
                guard took(set(socket, ZMQ_CURVE_SERVER, 1), "the CURVE server option"),
                    took(zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, tcp.secretKey, tcp.secretKey.utf8.count), "the bus's secret key"),
                    took(zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, "tether", 6), "the ZAP domain")
                else { return }
            }
            guard bind([(frontend, tcp.busIn), (backend, tcp.busOut)]) else { return }
        }
        ready.resume(returning: .success(()))
        // Returns when the control socket receives TERMINATE.
        if zmq_proxy_steerable(frontend, backend, nil, control) != 0, zmq_errno() != ETERM {
            logger.error("the proxy stopped", metadata: ["bus.error": "\(String(cString: zmq_strerror(zmq_errno())))"])
        }
    }
}

/// An error starting or stopping the proxy.
public typealias ProxyError = CodedError<ProxyErrorCode>

/// What kept the proxy from starting, or one of its threads from being told to stop.
public enum ProxyErrorCode: String, ErrorCode {
    /// libzmq made no socket.
    case socket
    /// libzmq refused a socket option.
    case option
    /// An endpoint could not be bound (in use, or a path that cannot be made).
    case bind
    /// The command relay could not start.
    case relay
    /// A thread's control socket could not be sent its command (`TERMINATE`).
    case control
}
