/// The decisions of the command client, ZeroMQ's Lazy Pirate pattern: each attempt sends the
/// request on a fresh socket and waits `timeout` for the reply; when none comes, that socket is
/// dropped (a reply to it can no longer arrive) and the request sent again with the same
/// request id, up to `attempts` in all; then the request fails with
/// ``BusError/timedOut(endpoint:attempts:)``.
///
/// Events in, actions out, time passed in: the event loop opens and closes the sockets and
/// resumes the callers.
struct RequestTracker {
    /// What the event loop does for a request.
    enum Action: Equatable {
        /// Open a fresh socket to `endpoint` for request `id` (closing the one it had) and
        /// send `frames` on it.
        case send(id: Int, endpoint: String, frames: [[UInt8]])
        /// Close request `id`'s socket and hand its caller `result`.
        case finish(id: Int, result: Result<[[UInt8]], BusError>)
    }

    private struct Request {
        var name: String
        var endpoint: String
        var frames: [[UInt8]]
        var timeout: Duration
        var attempts: Int
        var attemptsMade: Int
        var deadline: ContinuousClock.Instant
    }

    private var pending: [Int: Request] = [:]

    /// How many requests wait for a reply.
    var count: Int { pending.count }

    /// When the next attempt runs out, if any request waits.
    var nextDeadline: ContinuousClock.Instant? { pending.values.map(\.deadline).min() }

    /// A new request: its first attempt. `name` is the owner's endpoint name, for errors.
    mutating func start(
        id: Int, name: String, endpoint: String, frames: [[UInt8]], timeout: Duration, attempts: Int, now: ContinuousClock.Instant
    ) -> Action {
        pending[id] = Request(
            name: name, endpoint: endpoint, frames: frames, timeout: timeout, attempts: max(1, attempts), attemptsMade: 1,
            deadline: now + timeout)
        return .send(id: id, endpoint: endpoint, frames: frames)
    }

    /// A reply arrived on request `id`'s socket; nil when that request is no longer waiting.
    mutating func replied(id: Int, frames: [[UInt8]]) -> Action? {
        guard pending.removeValue(forKey: id) != nil else { return nil }
        return .finish(id: id, result: .success(frames))
    }

    /// Opening or sending on request `id`'s socket failed: the request fails with `error`.
    mutating func sendFailed(id: Int, error: BusError) -> Action? {
        guard pending.removeValue(forKey: id) != nil else { return nil }
        return .finish(id: id, result: .failure(error))
    }

    /// The caller stopped waiting (its task was cancelled).
    mutating func cancel(id: Int) -> Action? {
        guard pending.removeValue(forKey: id) != nil else { return nil }
        return .finish(id: id, result: .failure(.cancelled))
    }

    /// The time is `now`: every attempt that ran out is made again, or its request fails.
    mutating func timePassed(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        for (id, request) in pending.sorted(by: { $0.key < $1.key }) where now >= request.deadline {
            if request.attemptsMade < request.attempts {
                pending[id]?.attemptsMade += 1
                pending[id]?.deadline = now + request.timeout
                actions.append(.send(id: id, endpoint: request.endpoint, frames: request.frames))
            } else {
                pending[id] = nil
                actions.append(.finish(id: id, result: .failure(.timedOut(endpoint: request.name, attempts: request.attempts))))
            }
        }
        return actions
    }

    /// The client closes: every waiting request fails with ``BusError/closed``.
    mutating func closeAll() -> [Action] {
        defer { pending.removeAll() }
        return pending.keys.sorted().map { .finish(id: $0, result: .failure(.closed)) }
    }
}
