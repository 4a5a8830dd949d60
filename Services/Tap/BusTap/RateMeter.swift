public import Foundation

/// Messages per second per topic over a sliding window, like `ros2 topic hz`.
public struct RateMeter: Sendable {
    /// One topic's figures.
    public struct Row: Sendable, Equatable {
        public var topic: String
        /// Messages per second over the window.
        public var rate: Double
        /// Messages since the tap started.
        public var total: Int
        /// Mean body size over the window, in bytes.
        public var meanBytes: Int
    }

    private struct Arrival {
        var time: TimeInterval
        var bytes: Int
    }

    /// The window rates are measured over.
    public let window: TimeInterval
    private var arrivals: [String: [Arrival]] = [:]
    private var totals: [String: Int] = [:]

    public init(window: TimeInterval = 5) {
        self.window = window
    }

    public mutating func record(topic: String, bytes: Int, at time: TimeInterval) {
        arrivals[topic, default: []].append(Arrival(time: time, bytes: bytes))
        totals[topic, default: 0] += 1
    }

    /// Every topic seen, busiest first, as of `time` (seconds on the clock `record` used).
    /// `elapsed` is how long the tap has been listening: rates are over the window or less.
    public mutating func rows(at time: TimeInterval, elapsed: TimeInterval) -> [Row] {
        let span = max(min(window, elapsed), 0.001)
        var rows: [Row] = []
        for (topic, seen) in arrivals {
            let recent = seen.filter { $0.time > time - window }
            arrivals[topic] = recent
            let bytes = recent.isEmpty ? 0 : recent.reduce(0) { $0 + $1.bytes } / recent.count
            rows.append(Row(topic: topic, rate: Double(recent.count) / span, total: totals[topic] ?? 0, meanBytes: bytes))
        }
        return rows.sorted { ($0.rate, $1.topic) > ($1.rate, $0.topic) }
    }
}
