public import Foundation

/// Facts about the bus message format every program shares.
public enum BusSchema {
    /// The schema version written in every message header. Bumped when a payload
    /// changes in a way an older reader would misread.
    public static let version = 1

    /// The largest message body a program publishes or accepts, in bytes.
    public static let maximumBodySize = 1 << 20

    /// JSON encoder for bus bodies and headers: sorted keys, ISO 8601 dates with milliseconds.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Self.dateStyle))
        }
        return encoder
    }

    /// JSON decoder matching ``makeEncoder()``; also reads dates without fractional seconds.
    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = try? Self.dateStyle.parse(text) { return date }
            if let date = try? Date.ISO8601FormatStyle().parse(text) { return date }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is not an ISO 8601 date")
        }
        return decoder
    }

    private static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}

/// The second frame of every bus message.
///
/// `{"schema": 1, "source": "tether-connd", "pid": 4242, "sequence": 42, "timestamp": "…", "replay": false}`
public struct BusHeader: Codable, Hashable, Sendable {
    /// The schema version the body was written with.
    public var schema: Int
    /// The program that published the message.
    public var source: String
    /// The publishing process. Several processes may share a source name (two `tether watch`),
    /// so sequences are counted per source and pid. Absent from publishers that do not say.
    public var pid: Int32?
    /// Counts every message the process published since it started, from 1; a jump is a gap.
    public var sequence: UInt64
    /// When the source published the message.
    public var timestamp: Date
    /// True when a retained value is published again for a new subscriber.
    public var replay: Bool

    public init(
        schema: Int = BusSchema.version, source: String, pid: Int32? = nil, sequence: UInt64, timestamp: Date = Date(), replay: Bool = false
    ) {
        self.schema = schema
        self.source = source
        self.pid = pid
        self.sequence = sequence
        self.timestamp = timestamp
        self.replay = replay
    }
}

/// A topic on the bus. Subscriptions match topics by prefix, byte for byte.
public struct Topic: Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    public var name: String

    public init(_ name: String) {
        self.name = name
    }

    public init(stringLiteral value: String) {
        self.name = value
    }

    public init(from decoder: any Decoder) throws {
        name = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }

    public var description: String { name }

    /// Whether a subscription to `prefix` receives this topic.
    public func matches(prefix: String) -> Bool {
        name.hasPrefix(prefix)
    }
}

extension Topic {
    /// Retained. The network path as the kernel sees it. Owner: tether-netmon. Body: ``NetworkPath``.
    public static let networkPath: Topic = "net.path"
    /// Retained. The connection to the gateway. Owner: tether-connd. Body: ``ConnectionStatus``.
    public static let connectionState: Topic = "conn.state"
    /// Retained. Who connd connects as (never the secret), for the snapshot store. Owner: tether-connd. Body: ``ConnectionIdentity``.
    public static let connectionIdentity: Topic = "conn.identity"
    /// A frame received from the gateway. Owner: tether-connd. Body: ``WireFrame``.
    public static let wireInbound: Topic = "wire.in"
    /// A frame to write to the gateway. Owner: tether-protod. Body: ``WireFrame``.
    public static let wireOutbound: Topic = "wire.out"
    /// A message entered the conversation or changed. Owner: tether-protod. Body: ``TranscriptEntry``.
    public static let conversationMessage: Topic = "conv.message"
    /// A sent message's delivery status changed. Owner: tether-protod. Body: ``DeliveryUpdate``.
    public static let conversationDelivery: Topic = "conv.delivery"
    /// A streamed reply grew. Owner: tether-protod. Body: ``StreamProgress``.
    public static let conversationStream: Topic = "conv.stream"
    /// Retained. What the bot is doing. Owner: tether-protod. Body: ``BotActivity``.
    public static let botState: Topic = "bot.state"
    /// Retained. The outbox at a glance. Owner: tether-protod. Body: ``OutboxSummary``.
    public static let outboxSummary: Topic = "outbox.summary"
    /// Retained. How healthy delivery is. Owner: tether-protod. Body: ``HealthReport``.
    public static let health: Topic = "health"
    /// Something a person can do about a problem; the same one at most every 30 s. Owner: tether-protod. Body: ``RecoverySuggestion``.
    public static let suggestion: Topic = "health.suggestion"
    /// What happened inside the protocol handler. Owner: tether-protod. Body: ``DiagnosticEvent``.
    public static let diagnostic: Topic = "diag.event"
    /// A front end is attached; every front end, every second, and once as it leaves. Body: ``FrontEndPresence``.
    public static let frontEndPresence: Topic = "frontend.presence"
    /// snapd committed a display snapshot, the identity, a catch-up or a compaction. Owner: tether-snapd. Body: ``SnapshotSaved``.
    public static let snapshotSaved: Topic = "snap.saved"
    /// A program is alive. Every program, every second. Body: ``Heartbeat``.
    public static let heartbeat: Topic = "sys.heartbeat"
    /// Used by a subscriber to learn that its own subscription has reached the proxy.
    public static let probePrefix = "sys.probe."
}
