import Synchronization

/// Time that moves only when a test moves it, for code that takes a `Clock`: a wait on it
/// ends when ``advance(to:)`` passes its deadline, so a test decides in milliseconds what
/// would take seconds of real time. ``sleeping(until:)`` says when the code under test has
/// got as far as waiting, so that the test moves time then and not before.
public final class ManualClock: Clock, Sendable {
    /// A moment: how long after the clock was made.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        public var offset: Duration

        public init(offset: Duration) {
            self.offset = offset
        }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "\(offset)" }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    /// A test waiting for something to sleep until `deadline` or later.
    private struct Watcher {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        /// Sleeps cancelled before they were registered.
        var cancelled: Set<Int> = []
        var watchers: [Watcher] = []
        var nextID = 0
    }

    private let state = Mutex(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }

    public var minimumResolution: Duration { .zero }

    /// Returns once the clock is moved to `deadline` or past it (at once for one passed);
    /// throws `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (cancelled, due, watchers): (Bool, Bool, [Watcher]) = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return (true, false, []) }
                    if deadline <= state.now { return (false, true, []) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    let woken = state.watchers.filter { $0.deadline <= deadline }
                    state.watchers.removeAll { $0.deadline <= deadline }
                    return (false, false, woken)
                }
                if cancelled {
                    continuation.resume(throwing: CancellationError())
                } else if due {
                    continuation.resume()
                }
                for watcher in watchers { watcher.continuation.resume() }
            }
        } onCancel: {
            let sleeper: Sleeper? = state.withLock { state in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper }
                state.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the time to `instant` (never back), ending every sleep due by then, the
    /// earliest first.
    public func advance(to instant: Instant) {
        let woken = state.withLock { state in
            state.now = max(state.now, instant)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }.sorted { $0.value.deadline < $1.value.deadline }
            for (id, _) in due { state.sleepers[id] = nil }
            return due.map { $0.value.continuation }
        }
        for continuation in woken { continuation.resume() }
    }

    /// Moves the time on by `duration`.
    public func advance(by duration: Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// Returns once something sleeps until `deadline` or later on this clock.
    public func sleeping(until deadline: Instant) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let already = state.withLock { state in
                if state.sleepers.values.contains(where: { $0.deadline >= deadline }) { return true }
                state.watchers.append(Watcher(deadline: deadline, continuation: continuation))
                return false
            }
            if already { continuation.resume() }
        }
    }
}
