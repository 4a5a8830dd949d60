import CZeroMQ
import FoundationEssentials
import Logging
import TetherBus

#if canImport(Glibc)
import Glibc
#endif

/// Decides who may connect to the proxy's `tcp://` endpoints: libzmq asks it (ZAP, RFC 27)
/// at every CURVE handshake, and a client is let in when its public key is in the allow-list.
///
/// The allow-list file is read again at every request, so a key added or removed takes
/// effect at the next connection without a restart; a file that cannot be read lets no one in.
final class ZAPHandler: Sendable {
    /// Where libzmq sends its requests, in the context of the sockets it guards.
    static let endpoint = "inproc://zeromq.zap.01"

    private let allowListPath: String
    private let logger: Logger
    private let control = "inproc://tether-zap-control-\(UUID().uuidString)"
    private let finished = AsyncStream<Void>.makeStream()

    init(allowListPath: String, logger: Logger) {
        self.allowListPath = allowListPath
        self.logger = logger
    }

    /// Binds the handler on its own thread and returns once it answers.
    func start() async throws {
        let finished = self.finished.continuation
        let bound: Result<Void, BusError> = await withCheckedContinuation { ready in
            startDetachedThread(name: "tether-bus-zap") { [self] in
                run(ready: ready)
                finished.finish()
            }
        }
        try bound.get()
    }

    /// Stops the handler and waits for its thread to end; when it cannot be told to stop,
    /// says so and leaves it running rather than waiting for ever.
    func stop() async {
        do {
            try sendControl("TERMINATE", to: control)
        } catch {
            logger.error("cannot stop the ZAP handler: it runs until the program exits", metadata: ["bus.error": "\(error)"])
            return
        }
        for await _ in finished.stream {}
    }

    private func run(ready: CheckedContinuation<Result<Void, BusError>, Never>) {
        let requests: ZMQSocket
        let stop: ZMQSocket
        do {
            requests = try ZMQSocket(type: ZMQ_REP, context: .shared)
            stop = try ZMQSocket(type: ZMQ_PAIR, context: .shared)
            try requests.set(ZMQ_LINGER, 0)
            try stop.set(ZMQ_LINGER, 0)
            try requests.bind(Self.endpoint)
            try stop.bind(control)
        } catch {
            ready.resume(returning: .failure(error))
            return
        }
        ready.resume(returning: .success(()))
        var items = [
            zmq_pollitem_t(socket: requests.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0),
            zmq_pollitem_t(socket: stop.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0),
        ]
        while items[1].revents == 0 {
            guard zmq_poll(&items, 2, -1) >= 0 || zmq_errno() == EINTR else {
                logger.error("the ZAP handler stopped", metadata: ["bus.error": "\(zmqError("zmq_poll"))"])
                return
            }
            guard items[0].revents != 0, let frames = try? requests.receive() else { continue }
            do {
                try requests.send(answer(frames))
            } catch {
                logger.error("cannot answer a ZAP request", metadata: ["bus.error": "\(error)"])
            }
        }
    }

    /// The reply to a ZAP request: version, request id, status code and text, user id, metadata.
    private func answer(_ request: [[UInt8]]) -> [[UInt8]] {
        // version, request id, domain, address, routing id, mechanism, credentials…
        guard request.count >= 6, request[0] == Array("1.0".utf8) else {
            logger.warning("dropped a malformed ZAP request", metadata: ["bus.frames": "\(request.count)"])
            return reply(request.count > 1 ? request[1] : [], status: "500", text: "malformed request", user: "")
        }
        let address = String(decoding: request[3], as: UTF8.self)
        let mechanism = String(decoding: request[5], as: UTF8.self)
        guard mechanism == "CURVE", request.count == 7, let key = CurveKey.text(request[6]) else {
            logger.warning("refused a bus client without a CURVE key", metadata: ["bus.peer": "\(address)", "bus.mechanism": "\(mechanism)"])
            return reply(request[1], status: "400", text: "a CURVE key is required", user: "")
        }
        let allowed: AllowedKeys
        do {
            allowed = try AllowedKeys.load(allowListPath)
        } catch {
            logger.error("refused a bus client: the allow-list is unusable", metadata: ["bus.peer": "\(address)", "bus.error": "\(error)"])
            return reply(request[1], status: "500", text: "the allow-list is unusable", user: "")
        }
        guard let name = allowed.names[key] else {
            logger.warning("refused a bus client whose key is not in the allow-list", metadata: ["bus.peer": "\(address)", "bus.key": "\(key)"])
            return reply(request[1], status: "400", text: "key not allowed", user: "")
        }
        logger.info("a bus client connected", metadata: ["bus.peer": "\(address)", "bus.key": "\(key)", "bus.name": "\(name)"])
        return reply(request[1], status: "200", text: "OK", user: name.isEmpty ? key : name)
    }

    private func reply(_ requestID: [UInt8], status: String, text: String, user: String) -> [[UInt8]] {
        [Array("1.0".utf8), requestID, Array(status.utf8), Array(text.utf8), Array(user.utf8), []]
    }
}

/// Sends `message` to the inproc PAIR socket bound at `endpoint`, from a socket this call
/// creates, uses and closes; a ``ProxyError`` (`control`) in words when it cannot.
func sendControl(_ message: String, to endpoint: String) throws(ProxyError) {
    let socket: ZMQSocket
    do {
        socket = try ZMQSocket(type: ZMQ_PAIR, context: .shared)
    } catch {
        throw ProxyError(.control, "cannot make a socket to send \(message) to \(endpoint): \(error)")
    }
    defer { socket.close() }
    do {
        try socket.set(ZMQ_LINGER, 1000)
        // The peer is bound before anyone asks it to stop, so a send waits for no one; the
        // timeout only keeps a send that cannot go from waiting for ever.
        try socket.set(ZMQ_SNDTIMEO, 1000)
        try socket.connect(endpoint)
    } catch {
        throw ProxyError(.control, "cannot connect to \(endpoint) to send \(message): \(error)")
    }
    guard message.withCString({ zmq_send(socket.handle, $0, strlen($0), 0) }) >= 0 else {
        throw ProxyError(.control, "cannot send \(message) to \(endpoint): \(String(cString: zmq_strerror(zmq_errno())))")
    }
}
