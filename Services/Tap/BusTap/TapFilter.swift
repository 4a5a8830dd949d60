public import TetherBus
import TetherSchema

#if canImport(Glibc)
import Glibc
#endif

/// Which messages the tap shows: topics by prefix or glob, sources by name or glob.
public struct TapFilter: Sendable {
    /// Topic patterns; empty shows every topic. A pattern with `*`, `?` or `[` is a glob
    /// matched against the whole topic (`conn.*`, `*.state`); any other is a prefix (`conv.`).
    public var topics: [String]
    /// Source patterns (`tether-protod`, `tether-c*`); empty shows every source.
    public var sources: [String]
    /// Whether to show the probes subscribers use to confirm their subscriptions.
    public var showProbes: Bool

    public init(topics: [String], sources: [String] = [], showProbes: Bool = false) {
        self.topics = topics
        self.sources = sources
        self.showProbes = showProbes
    }

    public func accepts(_ message: BusMessage) -> Bool {
        let topic = message.topic.name
        if !showProbes && topic.hasPrefix(Topic.probePrefix) { return false }
        if !topics.isEmpty && !topics.contains(where: { Self.matches(topic, pattern: $0, prefixWithoutGlob: true) }) { return false }
        if !sources.isEmpty && !sources.contains(where: { Self.matches(message.header.source, pattern: $0, prefixWithoutGlob: false) }) {
            return false
        }
        return true
    }

    static func isGlob(_ pattern: String) -> Bool {
        pattern.contains(where: { $0 == "*" || $0 == "?" || $0 == "[" })
    }

    static func matches(_ text: String, pattern: String, prefixWithoutGlob: Bool) -> Bool {
        guard isGlob(pattern) else { return prefixWithoutGlob ? text.hasPrefix(pattern) : text == pattern }
        return fnmatch(pattern, text, 0) == 0
    }
}
