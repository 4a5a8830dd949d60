import Foundation
public import TetherBus
import TetherSchema

/// Writes bus messages for people (one line each: time, source and sequence, topic, body)
/// or as JSON lines.
public struct TapFormatter: Sendable {
    public enum Style: Sendable {
        case pretty
        case json
    }

    public var style: Style

    public init(style: Style) {
        self.style = style
    }

    /// `22:35:04.120 tether-protod#12 conv.message {"content":…}`
    public func format(_ message: BusMessage) -> String {
        let body = String(decoding: message.body, as: UTF8.self)
        switch style {
        case .pretty:
            let replay = message.header.replay ? " (retained)" : ""
            return "\(Self.clock(message.header.timestamp)) \(message.header.source)#\(message.header.sequence) \(message.topic)\(replay) \(body)"
        case .json:
            let header = (try? BusSchema.makeEncoder().encode(message.header)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
            let topic = (try? JSONEncoder().encode(message.topic.name)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
            // A body that is not JSON is shown as a string rather than breaking the line's JSON.
            let bodyJSON =
                (try? JSONSerialization.jsonObject(with: message.body, options: [.fragmentsAllowed])) != nil
                ? body : (try? JSONEncoder().encode(body)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
            return "{\"topic\":\(topic),\"header\":\(header),\"body\":\(bodyJSON)}"
        }
    }

    /// Hours, minutes, seconds and milliseconds, UTC.
    static func clock(_ date: Date) -> String {
        let milliseconds = Int((date.timeIntervalSince1970 * 1000).rounded(.down))
        let millisecondsOfDay = ((milliseconds % 86_400_000) + 86_400_000) % 86_400_000
        let hours = millisecondsOfDay / 3_600_000
        let minutes = millisecondsOfDay / 60_000 % 60
        let seconds = millisecondsOfDay / 1000 % 60
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fraction = millisecondsOfDay % 1000
        return "\(two(hours)):\(two(minutes)):\(two(seconds)).\(fraction < 10 ? "00" : fraction < 100 ? "0" : "")\(fraction)"
    }
}

/// Which messages the tap shows.
public struct TapFilter: Sendable {
    /// Topic prefixes; empty shows every topic.
    public var prefixes: [String]
    /// Whether to show the probes subscribers use to confirm their subscriptions.
    public var showProbes: Bool

    public init(prefixes: [String], showProbes: Bool = false) {
        self.prefixes = prefixes
        self.showProbes = showProbes
    }

    /// What the tap subscribes to: the prefixes, or everything.
    public var subscription: [String] {
        prefixes.isEmpty ? [""] : prefixes
    }

    public func accepts(_ message: BusMessage) -> Bool {
        if !showProbes && message.topic.name.hasPrefix(Topic.probePrefix) { return false }
        return prefixes.isEmpty || prefixes.contains(where: message.topic.matches(prefix:))
    }
}
