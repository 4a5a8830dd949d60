import Synchronization

/// Tells any number of waiters that something changed, without a timer: each waiter's
/// stream yields once for any burst of changes it has not yet read.
public final class ChangeSignal: Sendable {
    private let waiters = Mutex<[Int: AsyncStream<Void>.Continuation]>([:])
    private let nextWaiter = Atomic<Int>(0)

    public init() {}

    /// Something changed: every waiter wakes.
    public func notify() {
        waiters.withLock { waiters in
            for waiter in waiters.values { waiter.yield() }
        }
    }

    /// A stream that yields after each change (several unread changes yield once); ending
    /// the iteration stops the waiting.
    public func changes() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = nextWaiter.add(1, ordering: .relaxed).newValue
        waiters.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.waiters.withLock { _ = $0.removeValue(forKey: id) }
        }
        return stream
    }
}
