/// The decisions behind a confirmed subscription: a probe topic of the client's own is
/// subscribed beside it, and a probe published on it until it comes back through the proxy
/// (the subscription is in place) or the deadline passes (the bus is not there). The probe
/// goes at once, then every ``resendInterval``, and at once again when the proxy reports the
/// probe's subscription, which is when it can first come back.
///
/// It also follows the CURVE handshakes with a remote proxy: a failed one fails the waiting
/// confirmations at once, and new ones until a handshake succeeds; the failure is said once,
/// not at every reconnection.
///
/// Events in, actions out, time passed in; the event loop owns the sockets.
struct SubscriptionProbes {
    /// What the event loop does for a confirmation.
    enum Action: Equatable {
        /// Subscribe to `topic` at the proxy.
        case subscribe(topic: String)
        /// Publish a probe on `topic`.
        case publishProbe(topic: String)
        /// Unsubscribe from `topic`, when there is one, and tell confirmation `id`'s caller:
        /// confirmed when `failure` is nil.
        case finish(id: Int, topic: String?, failure: BusError?)
        /// Say in the log that the handshake with the proxy failed.
        case reportHandshakeFailure(BusError)
        /// Say in the log that the proxy accepted this program's key after a failure.
        case reportHandshakeRecovered
    }

    /// How often a probe is published again while no answer has come.
    static let resendInterval = Duration.milliseconds(50)

    private struct Probe {
        var topic: String
        var deadline: ContinuousClock.Instant
        var nextSend: ContinuousClock.Instant
    }

    /// Where the proxy is, in the words of errors.
    private let busLocation: String
    private var probes: [Int: Probe] = [:]
    /// Why the last handshake with a remote proxy failed, until one succeeds.
    private(set) var handshakeFailure: BusError?

    init(busLocation: String) {
        self.busLocation = busLocation
    }

    /// How many confirmations wait.
    var count: Int { probes.count }

    /// When the next probe is due or the next confirmation runs out, if any waits.
    var nextDeadline: ContinuousClock.Instant? {
        probes.isEmpty ? nil : probes.values.map { min($0.nextSend, $0.deadline) }.min()
    }

    /// Confirmation `id` of a new subscription, probed on `topic` (unique to it) until `timeout` has passed.
    mutating func start(id: Int, topic: String, timeout: Duration, now: ContinuousClock.Instant) -> [Action] {
        if let handshakeFailure { return [.finish(id: id, topic: nil, failure: handshakeFailure)] }
        probes[id] = Probe(topic: topic, deadline: now + timeout, nextSend: now + Self.resendInterval)
        return [.subscribe(topic: topic), .publishProbe(topic: topic)]
    }

    /// The proxy reports a subscription to `prefix`: a probe whose topic it is can come back now.
    func proxySubscribed(to prefix: String) -> [Action] {
        probes.values.filter { $0.topic == prefix }.map { .publishProbe(topic: $0.topic) }
    }

    /// A probe came back on `topic`: the subscription it stands for is in place.
    mutating func probeArrived(topic: String) -> [Action] {
        guard let id = probes.first(where: { $0.value.topic == topic })?.key else { return [] }
        return [end(id, nil)]
    }

    /// Confirmation `id` is no longer wanted (its subscription ended, or its caller was cancelled).
    mutating func cancel(id: Int, because error: BusError) -> [Action] {
        guard probes[id] != nil else { return [] }
        return [end(id, error)]
    }

    /// A handshake with the remote proxy succeeded.
    mutating func handshakeSucceeded() -> [Action] {
        guard handshakeFailure != nil else { return [] }
        handshakeFailure = nil
        return [.reportHandshakeRecovered]
    }

    /// A handshake with the remote proxy failed: the waiting confirmations fail with it.
    /// The publisher and the subscriber fail alike, and again at every reconnection: only the
    /// first failure counts until a handshake succeeds.
    mutating func handshakeFailed(_ failure: BusError) -> [Action] {
        guard handshakeFailure == nil else { return [] }
        handshakeFailure = failure
        return [.reportHandshakeFailure(failure)] + probes.keys.sorted().map { end($0, failure) }
    }

    /// The time is `now`: confirmations past their deadline fail, due probes go out again.
    mutating func timePassed(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        for (id, probe) in probes.sorted(by: { $0.key < $1.key }) {
            if now >= probe.deadline {
                actions.append(end(id, handshakeFailure ?? .busUnavailable(path: busLocation)))
            } else if now >= probe.nextSend {
                probes[id]?.nextSend = now + Self.resendInterval
                actions.append(.publishProbe(topic: probe.topic))
            }
        }
        return actions
    }

    /// The client closes: every waiting confirmation fails with ``BusError/closed``.
    mutating func closeAll() -> [Action] {
        probes.keys.sorted().map { end($0, .closed) }
    }

    private mutating func end(_ id: Int, _ failure: BusError?) -> Action {
        let probe = probes.removeValue(forKey: id)
        return .finish(id: id, topic: probe?.topic, failure: failure)
    }
}
