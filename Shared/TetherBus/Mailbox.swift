import CLinux
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Operations handed from any thread to the thread that owns the sockets.
///
/// Posting appends under a lock and, when the queue was empty, writes to an eventfd, which
/// the owner's `zmq_poll` watches; the owner takes the whole queue on each wake.
final class Mailbox<Operation: Sendable>: Sendable {
    private struct State {
        var operations: [Operation] = []
        var isClosed = false
    }

    private let state = Mutex(State())
    /// The eventfd the owning thread polls.
    let wakeDescriptor: Int32

    init() throws(BusError) {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard fd >= 0 else {
            throw .system(call: "eventfd", errno: errno, message: String(cString: strerror(errno)))
        }
        wakeDescriptor = fd
    }

    deinit {
        Glibc.close(wakeDescriptor)
    }

    /// Hands an operation to the owner; false once the mailbox is closed.
    @discardableResult
    func post(_ operation: Operation) -> Bool {
        let (posted, wake) = state.withLock { state in
            guard !state.isClosed else { return (false, false) }
            state.operations.append(operation)
            // A queue that was not empty has a wake pending already: the owner takes it all.
            return (true, state.operations.count == 1)
        }
        if wake {
            var one: UInt64 = 1
            _ = write(wakeDescriptor, &one, MemoryLayout<UInt64>.size)
        }
        return posted
    }

    /// Takes every waiting operation into `operations`, an empty array whose storage then
    /// takes the next ones: the queue and the owner's batch trade places, and nothing is
    /// allocated. Called by the owner when the eventfd is readable.
    func drain(into operations: inout [Operation]) {
        var counter: UInt64 = 0
        _ = read(wakeDescriptor, &counter, MemoryLayout<UInt64>.size)
        state.withLock { swap(&$0.operations, &operations) }
    }

    /// Refuses further operations and returns those still waiting.
    func close() -> [Operation] {
        state.withLock { state in
            state.isClosed = true
            defer { state.operations.removeAll() }
            return state.operations
        }
    }
}
