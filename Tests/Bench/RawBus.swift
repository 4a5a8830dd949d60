import CZeroMQ
import Foundation
import Synchronization

/// The baseline for the bus rows: the same proxy, reached with plain libzmq PUB and SUB
/// sockets carrying a topic frame and an 8-byte index (no header, no JSON, no client thread).
enum RawBus {
    struct Throughput {
        var received: Int
        var gaps: Int
        var elapsed: Duration
    }

    /// One-way latency from a PUB to a SUB through the proxy, both owned by one thread.
    static func latency(busIn: String, busOut: String, count: Int, warmup: Int) async throws -> Samples {
        try await onThread {
            let context = Context()
            let publisher = try context.socket(ZMQ_PUB, connect: busIn)
            let subscriber = try context.socket(ZMQ_SUB, connect: busOut, subscribe: "bench.raw.latency")
            try awaitPath(publisher: publisher, subscriber: subscriber, topic: "bench.raw.latency")
            var samples = Samples()
            for index in 0..<(warmup + count) {
                let start = ContinuousClock.now
                send(publisher, topic: "bench.raw.latency", index: index)
                guard let received = receive(subscriber, timeoutMilliseconds: 2000) else {
                    throw BenchError("raw libzmq: message \(index) did not arrive")
                }
                if received == index, index >= warmup { samples.add(start.duration(to: .now)) }
            }
            return samples
        }
    }

    /// `count` messages published as fast as the socket takes them from one thread and
    /// read on another: how many arrived, how many were skipped, how long it took.
    static func throughput(busIn: String, busOut: String, count: Int) async throws -> Throughput {
        let subscribed = Atomic<Bool>(false)
        let pathOpen = Atomic<Bool>(false)
        let started = Mutex<ContinuousClock.Instant?>(nil)
        async let receiving: Throughput = onThread {
            let context = Context()
            let subscriber = try context.socket(ZMQ_SUB, connect: busOut, subscribe: "bench.raw.")
            subscribed.store(true, ordering: .releasing)
            var received = 0
            var gaps = 0
            var expected = 0
            var last = ContinuousClock.now
            while let index = receive(subscriber, timeoutMilliseconds: 3000) {
                guard index >= 0 else {
                    pathOpen.store(true, ordering: .releasing)
                    continue
                }
                received += 1
                if index != expected { gaps += 1 }
                expected = index + 1
                last = .now
                if index == count - 1 { break }
            }
            let start = started.withLock { $0 } ?? last
            return Throughput(received: received, gaps: gaps, elapsed: start.duration(to: last))
        }
        try await onThread {
            while !subscribed.load(ordering: .acquiring) { usleep(1000) }
            let context = Context()
            let publisher = try context.socket(ZMQ_PUB, connect: busIn)
            // Probes (index -1) until the receiver has one: the subscription is through.
            let deadline = ContinuousClock.now + .seconds(10)
            while !pathOpen.load(ordering: .acquiring) {
                guard ContinuousClock.now < deadline else { throw BenchError("raw libzmq: the path through the proxy did not open") }
                send(publisher, topic: "bench.raw.probe", index: -1)
                usleep(10_000)
            }
            started.withLock { $0 = .now }
            for index in 0..<count { send(publisher, topic: "bench.raw.throughput", index: index) }
            // Let the last messages leave before the socket closes.
            usleep(200_000)
        }
        return try await receiving
    }

    // MARK: Sockets

    private final class Context {
        let handle: UnsafeMutableRawPointer
        private var sockets: [UnsafeMutableRawPointer] = []

        init() {
            handle = zmq_ctx_new()
        }

        deinit {
            for socket in sockets { zmq_close(socket) }
            zmq_ctx_term(handle)
        }

        func socket(_ type: Int32, connect endpoint: String, subscribe prefix: String? = nil) throws -> UnsafeMutableRawPointer {
            guard let socket = zmq_socket(handle, type) else { throw BenchError("zmq_socket failed") }
            sockets.append(socket)
            var highWaterMark: Int32 = 100_000
            zmq_setsockopt(socket, type == ZMQ_PUB ? ZMQ_SNDHWM : ZMQ_RCVHWM, &highWaterMark, MemoryLayout<Int32>.size)
            var linger: Int32 = 1000
            zmq_setsockopt(socket, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
            if let prefix { zmq_setsockopt(socket, ZMQ_SUBSCRIBE, prefix, prefix.utf8.count) }
            guard zmq_connect(socket, endpoint) == 0 else { throw BenchError("zmq_connect \(endpoint) failed") }
            return socket
        }
    }

    private static func awaitPath(publisher: UnsafeMutableRawPointer, subscriber: UnsafeMutableRawPointer, topic: String) throws {
        for _ in 0..<1000 {
            send(publisher, topic: topic, index: -1)
            if receive(subscriber, timeoutMilliseconds: 10) != nil {
                // Drain the probes still on their way.
                while receive(subscriber, timeoutMilliseconds: 50) != nil {}
                return
            }
        }
        throw BenchError("raw libzmq: the path through the proxy did not open")
    }

    private static func send(_ socket: UnsafeMutableRawPointer, topic: String, index: Int) {
        var value = Int64(index).littleEndian
        _ = zmq_send(socket, topic, topic.utf8.count, ZMQ_SNDMORE)
        _ = zmq_send(socket, &value, 8, 0)
    }

    /// The index of the next message, or nil when none comes within the timeout.
    private static func receive(_ socket: UnsafeMutableRawPointer, timeoutMilliseconds: Int) -> Int? {
        var item = zmq_pollitem_t(socket: socket, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)
        guard zmq_poll(&item, 1, timeoutMilliseconds) > 0 else { return nil }
        var topic = [UInt8](repeating: 0, count: 256)
        _ = zmq_recv(socket, &topic, topic.count, 0)
        var value: Int64 = 0
        _ = zmq_recv(socket, &value, 8, 0)
        return Int(Int64(littleEndian: value))
    }

    /// Runs blocking socket work on a thread of its own and returns its result.
    private static func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try work() })
            }
        }
    }
}
