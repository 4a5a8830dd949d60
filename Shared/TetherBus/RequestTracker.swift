/// The decisions of the command client, ZeroMQ's Lazy Pirate pattern over one socket for
/// each endpoint, kept between requests: a request is sent on its endpoint's socket and
/// waits `timeout` for the reply, which names it by its request id. When none comes, that
/// socket is replaced (a stale connection cannot hold the retry back, and what it had queued
/// is dropped), and every request still waiting on the endpoint is sent again on the new one
/// with its request id (the owner answers a repeated id with the reply it gave), up to
/// `attempts` in all for the one that timed out; then it fails with
/// ``BusError/timedOut(endpoint:attempts:)``.
///
/// Events in, actions out, time passed in: the event loop opens and closes the sockets and
/// resumes the callers.
struct RequestTracker {
    /// What the event loop does for a request.
    enum Action: Equatable {
        /// Send `frames` for request `id` on the socket of `endpoint`, opening one if there is none.
        case send(id: Int, endpoint: String, frames: [[UInt8]])
        /// Close the socket of `endpoint`; the next send opens a fresh one.
        case replaceSocket(endpoint: String)
        /// Hand request `id`'s caller `result`.
        case finish(id: Int, result: Result<[[UInt8]], BusError>)
    }

    private struct Request {
        var name: String
        var endpoint: String
        /// The reply's first frame: the request id.
        var replyKey: [UInt8]
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
    var nextDeadline: ContinuousClock.Instant? { pending.isEmpty ? nil : pending.values.map(\.deadline).min() }

    /// A new request: its first attempt. `name` is the owner's endpoint name, for errors;
    /// `replyKey` the first frame of the reply that answers it.
    mutating func start(
        id: Int, name: String, endpoint: String, replyKey: [UInt8], frames: [[UInt8]], timeout: Duration, attempts: Int,
        now: ContinuousClock.Instant
    ) -> Action {
        pending[id] = Request(
            name: name, endpoint: endpoint, replyKey: replyKey, frames: frames, timeout: timeout, attempts: max(1, attempts), attemptsMade: 1,
            deadline: now + timeout)
        return .send(id: id, endpoint: endpoint, frames: frames)
    }

    /// A reply arrived on `endpoint`'s socket; nil when no request waiting there is named by it
    /// (a late reply to one already answered or given up).
    mutating func replied(on endpoint: String, frames: [[UInt8]]) -> Action? {
        guard let key = frames.first,
            let id = pending.first(where: { $0.value.endpoint == endpoint && $0.value.replyKey == key })?.key
        else { return nil }
        pending[id] = nil
        return .finish(id: id, result: .success(frames))
    }

    /// Opening the socket or sending on it failed for request `id`: it fails with `error`.
    mutating func sendFailed(id: Int, error: BusError) -> Action? {
        guard pending.removeValue(forKey: id) != nil else { return nil }
        return .finish(id: id, result: .failure(error))
    }

    /// The caller stopped waiting (its task was cancelled).
    mutating func cancel(id: Int) -> Action? {
        guard pending.removeValue(forKey: id) != nil else { return nil }
        return .finish(id: id, result: .failure(.cancelled))
    }

    /// The time is `now`. A request whose attempt ran out fails when it has no attempt left;
    /// otherwise its endpoint's socket is replaced and every request waiting there is sent
    /// again on the new one (only the ones that ran out use up an attempt).
    mutating func timePassed(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        var replaced: Set<String> = []
        for (id, request) in pending.sorted(by: { $0.key < $1.key }) where now >= request.deadline {
            if request.attemptsMade < request.attempts {
                pending[id]?.attemptsMade += 1
                pending[id]?.deadline = now + request.timeout
                replaced.insert(request.endpoint)
            } else {
                pending[id] = nil
                actions.append(.finish(id: id, result: .failure(.timedOut(endpoint: request.name, attempts: request.attempts))))
            }
        }
        for endpoint in replaced.sorted() {
            actions.append(.replaceSocket(endpoint: endpoint))
            for (id, request) in pending.sorted(by: { $0.key < $1.key }) where request.endpoint == endpoint {
                actions.append(.send(id: id, endpoint: endpoint, frames: request.frames))
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
