import CZeroMQ
import Foundation
public import Logging
public import ServiceLifecycle
public import TetherBus
import TetherSchema

/// The bus: a ZeroMQ XSUB/XPUB proxy (`zmq_proxy_steerable`) on `bus.in` and `bus.out`
/// in the run directory.
///
/// Publishers connect to `bus.in`, subscribers to `bus.out`. The XPUB side is verbose, so
/// every subscription, repeated ones included, travels upstream to the publishers, which
/// is how owners of retained topics learn that a new subscriber needs the current value.
/// The proxy keeps no state: restarting it costs in-flight messages only.
public struct BusProxy: Service {
    private let runDirectory: RunDirectory
    private let logger: Logger

    public init(runDirectory: RunDirectory, logger: Logger) {
        self.runDirectory = runDirectory
        self.logger = logger
    }

    public func run() async throws {
        try runDirectory.prepare()
        // An ipc bind silently steals the path from a running proxy: hold the lock first.
        let lock = try LockFile(path: runDirectory.file("bus.lock"), name: "the bus (\(runDirectory.file("bus.lock")))")
        let endpoints = ProxyThread.Endpoints(
            busIn: try runDirectory.endpoint(Endpoints.busIn),
            busOut: try runDirectory.endpoint(Endpoints.busOut),
            control: "inproc://tether-bus-control-\(UUID().uuidString)")
        // Socket files left by a proxy that died: nobody holds the lock, so nobody uses them.
        unlink(runDirectory.file(Endpoints.busIn))
        unlink(runDirectory.file(Endpoints.busOut))

        let proxy = ProxyThread(endpoints: endpoints, logger: logger)
        try await proxy.start()
        logger.info("bus proxy running", metadata: ["bus.in": "\(endpoints.busIn)", "bus.out": "\(endpoints.busOut)"])
        try? await gracefulShutdown()
        logger.info("bus proxy stopping")
        await proxy.stop()
        withExtendedLifetime(lock) {}
    }
}

/// The thread that owns the proxy's sockets and runs `zmq_proxy_steerable` on them.
final class ProxyThread: Sendable {
    struct Endpoints: Sendable {
        var busIn: String
        var busOut: String
        var control: String
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
            let thread = Thread {
                Self.runProxy(endpoints: endpoints, logger: logger, ready: ready)
                finished.finish()
            }
            thread.name = "tether-bus-proxy"
            thread.start()
        }
        try bound.get()
    }

    /// Tells the proxy to terminate and waits for its thread to end.
    func stop() async {
        Self.sendTerminate(to: endpoints.control)
        for await _ in finished.stream {}
    }

    private static func runProxy(endpoints: Endpoints, logger: Logger, ready: CheckedContinuation<Result<Void, any Error>, Never>) {
        let context = ZMQContext.shared.handle
        guard let frontend = zmq_socket(context, ZMQ_XSUB),
            let backend = zmq_socket(context, ZMQ_XPUB),
            let control = zmq_socket(context, ZMQ_PAIR)
        else {
            ready.resume(returning: .failure(ProxyError("zmq_socket failed: \(String(cString: zmq_strerror(zmq_errno())))")))
            return
        }
        defer {
            zmq_close(frontend)
            zmq_close(backend)
            zmq_close(control)
        }
        func set(_ socket: UnsafeMutableRawPointer, _ option: Int32, _ value: Int32) {
            var value = value
            zmq_setsockopt(socket, option, &value, MemoryLayout<Int32>.size)
        }
        set(frontend, ZMQ_RCVHWM, 100_000)
        set(frontend, ZMQ_SNDHWM, 100_000)
        // A publisher that sends more than any valid message is cut off rather than let through.
        var maximumMessageSize = Int64(BusSchema.maximumBodySize + 64 * 1024)
        zmq_setsockopt(frontend, ZMQ_MAXMSGSIZE, &maximumMessageSize, MemoryLayout<Int64>.size)
        set(backend, ZMQ_SNDHWM, 100_000)
        set(backend, ZMQ_RCVHWM, 100_000)
        set(backend, ZMQ_XPUB_VERBOSE, 1)
        set(frontend, ZMQ_LINGER, 0)
        set(backend, ZMQ_LINGER, 0)
        set(control, ZMQ_LINGER, 0)
        for (socket, endpoint) in [(frontend, endpoints.busIn), (backend, endpoints.busOut), (control, endpoints.control)] {
            guard zmq_bind(socket, endpoint) == 0 else {
                let message = String(cString: zmq_strerror(zmq_errno()))
                ready.resume(returning: .failure(ProxyError("cannot bind \(endpoint): \(message)")))
                return
            }
        }
        ready.resume(returning: .success(()))
        // Returns when the control socket receives TERMINATE.
        if zmq_proxy_steerable(frontend, backend, nil, control) != 0, zmq_errno() != ETERM {
            logger.error("the proxy stopped", metadata: ["bus.error": "\(String(cString: zmq_strerror(zmq_errno())))"])
        }
    }

    /// Sends TERMINATE to the proxy's control socket from a socket this call creates, uses and closes.
    private static func sendTerminate(to endpoint: String) {
        guard let socket = zmq_socket(ZMQContext.shared.handle, ZMQ_PAIR) else { return }
        defer { zmq_close(socket) }
        var linger: Int32 = 1000
        zmq_setsockopt(socket, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
        guard zmq_connect(socket, endpoint) == 0 else { return }
        _ = "TERMINATE".withCString { zmq_send(socket, $0, 9, 0) }
    }
}

/// An error starting the proxy.
public struct ProxyError: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
