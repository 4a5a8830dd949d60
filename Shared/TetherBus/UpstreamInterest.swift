/// What the proxy's subscribers want from this publisher, as the proxy reports it (an XPUB
/// socket receives each subscription and the last unsubscription of a prefix), and what
/// follows from it: retained values published again to each new subscription that covers
/// them, and presence told to whoever watches a topic.
///
/// The connection to the proxy dropping takes every reported subscription with it; a proxy
/// that comes back reports them again. Events in, actions out; the event loop publishes.
struct UpstreamInterest {
    /// What the event loop does.
    enum Action: Equatable {
        /// Publish a retained value again, marked as a replay.
        case replay(topic: String, body: [UInt8])
        /// Tell watch `id` whether a subscriber takes its topic now.
        case tell(watch: Int, present: Bool)
    }

    /// One report from the proxy, as its first frame carries it.
    enum Report: Equatable {
        case subscribed(prefix: String)
        case unsubscribed(prefix: String)

        /// The report in an XPUB frame: 1 (subscribe) or 0 (unsubscribe), then the prefix;
        /// nil for an empty frame.
        init?(frame: [UInt8]) {
            guard let kind = frame.first else { return nil }
            let prefix = String(decoding: frame.dropFirst(), as: UTF8.self)
            self = kind == 1 ? .subscribed(prefix: prefix) : .unsubscribed(prefix: prefix)
        }
    }

    private struct Watch {
        var topic: String
        var present: Bool
    }

    private var retained: [String: [UInt8]] = [:]
    private var prefixes: Set<String> = []
    private var watches: [Int: Watch] = [:]

    /// `body` is the latest value of `topic`: replayed to subscriptions that come later.
    mutating func retain(_ body: [UInt8], on topic: String) {
        retained[topic] = body
    }

    /// Whether a subscriber at the proxy takes `topic`.
    func isPresent(_ topic: String) -> Bool {
        prefixes.contains { topic.hasPrefix($0) }
    }

    /// The proxy reported a subscription or the end of one.
    mutating func proxyReported(_ report: Report) -> [Action] {
        switch report {
        case .subscribed(let prefix):
            prefixes.insert(prefix)
            // Every subscription, repeated ones too (a verbose XPUB): each new subscriber gets the values.
            let replays = retained.filter { $0.key.hasPrefix(prefix) }.sorted { $0.key < $1.key }.map { Action.replay(topic: $0.key, body: $0.value) }
            return replays + presenceChanges()
        case .unsubscribed(let prefix):
            // Only the last unsubscription of a prefix reaches a verbose XPUB.
            prefixes.remove(prefix)
            return presenceChanges()
        }
    }

    /// The connection to the proxy dropped: what it had reported went with it.
    mutating func proxyLost() -> [Action] {
        prefixes.removeAll()
        return presenceChanges()
    }

    /// Watch `id` wants to hear whether a subscriber takes `topic`: the answer now, then each change.
    mutating func watch(id: Int, topic: String) -> [Action] {
        let present = isPresent(topic)
        watches[id] = Watch(topic: topic, present: present)
        return [.tell(watch: id, present: present)]
    }

    /// Watch `id` ended.
    mutating func unwatch(id: Int) {
        watches[id] = nil
    }

    /// The watches whose answer changed, each told once.
    private mutating func presenceChanges() -> [Action] {
        var actions: [Action] = []
        for (id, watch) in watches.sorted(by: { $0.key < $1.key }) {
            let present = isPresent(watch.topic)
            guard present != watch.present else { continue }
            watches[id]?.present = present
            actions.append(.tell(watch: id, present: present))
        }
        return actions
    }
}
