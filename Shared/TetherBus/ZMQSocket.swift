import CZeroMQ
import FoundationEssentials

/// A libzmq context.
///
/// libzmq documents its contexts as thread-safe, unlike its sockets; a context is the one
/// ZeroMQ object shared between threads. Sockets are created and used on one thread each.
public final class ZMQContext: @unchecked Sendable {
    /// The context of the proxy's sockets.
    public static let shared = ZMQContext(blocky: false)

    public let handle: UnsafeMutableRawPointer

    /// - Parameter blocky: whether terminating the context waits for each socket's linger
    ///   (the default); without, sockets that set none linger 0.
    init(blocky: Bool = true) {
        guard let handle = zmq_ctx_new() else {
            fatalError("zmq_ctx_new failed: \(String(cString: zmq_strerror(zmq_errno())))")
        }
        if !blocky { zmq_ctx_set(handle, ZMQ_BLOCKY, 0) }
        self.handle = handle
    }

    /// Ends the context once every socket of it is closed and has sent what it still holds,
    /// within its linger.
    func terminate() {
        while zmq_ctx_term(handle) != 0 && zmq_errno() == EINTR {}
    }
}

/// The error of the last libzmq call on this thread.
public func zmqError(_ call: String) -> BusError {
    let code = zmq_errno()
    return .system(call: call, errno: code, message: String(cString: zmq_strerror(code)))
}

/// A ZeroMQ socket. Not Sendable: it is created, used and closed on one thread.
public final class ZMQSocket {
    public let handle: UnsafeMutableRawPointer
    private var isClosed = false
    /// Whether the socket was sent on, set or made since its input was last read to the end.
    ///
    /// Its descriptor (`ZMQ_FD`) signals that something may have arrived, and only once
    /// until the socket looks at its commands again; sending on it or setting it may look at
    /// them, taking the signal of a message that arrived meanwhile. A loop that polls the
    /// descriptor itself reads such a socket before it waits (see ``takeMayHaveInput()``).
    ///
    /// Read and written at every wake of the loop that owns the socket, on its thread alone:
    /// without the check at run time of each access (see ``BusEventLoop``).
    @exclusivity(unchecked) private var mayHaveInput = true

    public init(type: Int32, context: ZMQContext) throws(BusError) {
        guard let handle = zmq_socket(context.handle, type) else { throw zmqError("zmq_socket") }
        self.handle = handle
    }

    /// The descriptor that signals when the socket may have something to read (`ZMQ_FD`).
    public func descriptor() throws(BusError) -> Int32 {
        var descriptor: Int32 = -1
        var size = MemoryLayout<Int32>.size
        guard zmq_getsockopt(handle, ZMQ_FD, &descriptor, &size) == 0 else { throw zmqError("zmq_getsockopt(ZMQ_FD)") }
        return descriptor
    }

    /// Whether its input must be read before waiting on its descriptor; clears it.
    public func takeMayHaveInput() -> Bool {
        defer { mayHaveInput = false }
        return mayHaveInput
    }

    deinit {
        close()
    }

    public func set(_ option: Int32, _ value: Int32) throws(BusError) {
        mayHaveInput = true
        var value = value
        guard zmq_setsockopt(handle, option, &value, MemoryLayout<Int32>.size) == 0 else {
            throw zmqError("zmq_setsockopt(\(option))")
        }
    }

    /// For the options libzmq declares as 64-bit (ZMQ_MAXMSGSIZE).
    public func set64(_ option: Int32, _ value: Int64) throws(BusError) {
        mayHaveInput = true
        var value = value
        guard zmq_setsockopt(handle, option, &value, MemoryLayout<Int64>.size) == 0 else {
            throw zmqError("zmq_setsockopt(\(option))")
        }
    }

    public func set(_ option: Int32, bytes: [UInt8]) throws(BusError) {
        mayHaveInput = true
        let rc = bytes.withUnsafeBytes { zmq_setsockopt(handle, option, $0.baseAddress, $0.count) }
        guard rc == 0 else { throw zmqError("zmq_setsockopt(\(option))") }
    }

    public func bind(_ endpoint: String) throws(BusError) {
        mayHaveInput = true
        guard zmq_bind(handle, endpoint) == 0 else { throw zmqError("zmq_bind \(endpoint)") }
    }

    public func connect(_ endpoint: String) throws(BusError) {
        mayHaveInput = true
        guard zmq_connect(handle, endpoint) == 0 else { throw zmqError("zmq_connect \(endpoint)") }
    }

    /// Sends a multipart message without blocking; false when the socket cannot take it now.
    @discardableResult
    public func send(_ frames: [[UInt8]]) throws(BusError) -> Bool {
        mayHaveInput = true
        for (index, frame) in frames.enumerated() {
            let flags = ZMQ_DONTWAIT | (index < frames.count - 1 ? ZMQ_SNDMORE : 0)
            let rc = frame.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, flags) }
            if rc < 0 {
                if zmq_errno() == EAGAIN && index == 0 { return false }
                throw zmqError("zmq_send")
            }
        }
        return true
    }

    /// Sends a bus message, its topic, header and body, without blocking and without
    /// gathering them in an array first; false when the socket cannot take it now.
    public func send(topic: String, header: [UInt8], body: [UInt8]) throws(BusError) -> Bool {
        mayHaveInput = true
        var topic = topic
        guard topic.withUTF8({ zmq_send(handle, $0.baseAddress, $0.count, ZMQ_DONTWAIT | ZMQ_SNDMORE) }) >= 0 else {
            if zmq_errno() == EAGAIN { return false }
            throw zmqError("zmq_send")
        }
        guard header.withUnsafeBytes({ zmq_send(handle, $0.baseAddress, $0.count, ZMQ_DONTWAIT | ZMQ_SNDMORE) }) >= 0,
            body.withUnsafeBytes({ zmq_send(handle, $0.baseAddress, $0.count, ZMQ_DONTWAIT) }) >= 0
        else { throw zmqError("zmq_send") }
        return true
    }

    /// Receives one whole multipart message without blocking; nil when none is waiting.
    public func receive() throws(BusError) -> [[UInt8]]? {
        var frames: [[UInt8]] = []
        while true {
            var message = zmq_msg_t()
            zmq_msg_init(&message)
            defer { zmq_msg_close(&message) }
            let rc = zmq_msg_recv(&message, handle, frames.isEmpty ? ZMQ_DONTWAIT : 0)
            if rc < 0 {
                if zmq_errno() == EAGAIN && frames.isEmpty { return nil }
                if zmq_errno() == EINTR { continue }
                throw zmqError("zmq_msg_recv")
            }
            let size = zmq_msg_size(&message)
            if size > 0, let data = zmq_msg_data(&message) {
                frames.append(Array(UnsafeRawBufferPointer(start: data, count: size)))
            } else {
                frames.append([])
            }
            if zmq_msg_more(&message) == 0 { return frames }
        }
    }

    /// Receives one whole multipart message without blocking and hands `read` its first
    /// `keep` frames where libzmq holds them, without copying, and how many frames it had
    /// in all (those past `keep` are dropped unread); nil when none is waiting. The frames
    /// are valid inside `read` only.
    public func receive<Value>(
        keeping keep: Int, _ read: (_ frames: UnsafeBufferPointer<UnsafeRawBufferPointer>, _ total: Int) -> Value
    ) -> Result<Value, BusError>? {
        // One slot more than is kept: the frames past `keep` go through it.
        withUnsafeTemporaryAllocation(of: zmq_msg_t.self, capacity: keep + 1) { slots -> Result<Value, BusError>? in
            let base = slots.baseAddress!
            var total = 0
            defer { for index in 0..<min(total, keep) { zmq_msg_close(base + index) } }
            while true {
                let slot = base + min(total, keep)
                zmq_msg_init(slot)
                if zmq_msg_recv(slot, handle, total == 0 ? ZMQ_DONTWAIT : 0) < 0 {
                    let code = zmq_errno()
                    zmq_msg_close(slot)
                    if code == EAGAIN && total == 0 { return nil }
                    if code == EINTR { continue }
                    return .failure(.system(call: "zmq_msg_recv", errno: code, message: String(cString: zmq_strerror(code))))
                }
                let more = zmq_msg_more(slot) != 0
                if total >= keep { zmq_msg_close(slot) }
                total += 1
                if !more { break }
            }
            let kept = min(total, keep)
            return withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer.self, capacity: max(1, kept)) { views in
                for index in 0..<kept {
                    views.initializeElement(at: index, to: UnsafeRawBufferPointer(start: zmq_msg_data(base + index), count: zmq_msg_size(base + index)))
                }
                return .success(read(UnsafeBufferPointer(rebasing: views[0..<kept]), total))
            }
        }
    }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        zmq_close(handle)
    }
}
