public import FoundationEssentials

/// Facts about the bus message format every program shares.
public enum BusSchema {
    /// The schema version written in every message header. Bumped when a payload
    /// changes in a way an older reader would misread.
    public static let version = 1

    /// The largest message body a program publishes or accepts, in bytes, on every topic and
    /// in every command but those ``maximumBodySize(of:)`` names.
    public static let maximumBodySize = 1 << 20
    /// The largest body of a gateway frame (`wire.in`, `wire.out`) and of the command that
    /// carries a message's images (`send`): room for a frame of OpenClaw's `maxPayload`
    /// (25 MiB) and the envelope around it.
    public static let maximumFrameBodySize = 32 << 20

    /// Where a body crosses the bus: the limit of its size depends on it.
    public enum BodyCarrier: Hashable, Sendable {
        /// A message published on this topic.
        case topic(String)
        /// A command of this method (its request's body).
        case command(String)
    }

    /// The largest body `carrier` takes, in bytes: ``maximumFrameBodySize`` for gateway frames
    /// and for `send`, whose images go on to the gateway in one frame; ``maximumBodySize``
    /// for everything else. Publishers, receivers and command owners all ask this.
    public static func maximumBodySize(of carrier: BodyCarrier) -> Int {
        switch carrier {
        case .topic(let name): Topic.carriesGatewayFrames(name) ? maximumFrameBodySize : maximumBodySize
        case .command(let method): method == SendMessageCommand.method ? maximumFrameBodySize : maximumBodySize
        }
    }

    /// The largest body of any carrier: what a socket that carries every topic lets through.
    public static let largestBodySize = max(maximumBodySize, maximumFrameBodySize)

    /// The most a command's owner reads of one frame of a command: a megabyte over the largest
    /// body, so that a body over its method's limit is answered `tooLarge`, not dropped.
    public static let commandReadLimit = largestBodySize + maximumBodySize

    /// One encoder of ``makeEncoder()`` for the whole process: making one for each message
    /// costs more than most messages' encoding.
    public static let encoder = makeEncoder()

    /// One decoder of ``makeDecoder()`` for the whole process.
    public static let decoder = makeDecoder()

    /// JSON encoder for bus bodies and headers: sorted keys, ISO 8601 dates with milliseconds.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Self.format(date))
        }
        return encoder
    }

    /// JSON decoder matching ``makeEncoder()``; also reads dates without fractional seconds,
    /// and rounds finer ones to the millisecond.
    /// Dates before 1970 or from the year 10000 on are refused: no message carries one, and
    /// before 1583 the calendar would not even read them back the same.
    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = (try? Self.dateStyle.parse(text)) ?? (try? Date.ISO8601FormatStyle().parse(text)) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is not an ISO 8601 date")
            }
            guard (0..<253_402_300_800).contains(date.timeIntervalSince1970) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(text)' is outside the years 1970 to 9999")
            }
            // Bus dates have milliseconds; finer digits go, so a date reads back as it was written.
            return Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
        }
        return decoder
    }

    private static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// `2026-11-23T05:18:52.251Z`: to the nearest millisecond. The formatter's own fraction
    /// cuts off, and a date read from ".251" may lie a hair below it, so every round trip
    /// through it would lose a millisecond; whole seconds are exact, the rest is an integer.
    static func format(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let (seconds, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let (wholeSeconds, millisecond) = fraction < 0 ? (seconds - 1, fraction + 1000) : (seconds, fraction)
        let base = Date(timeIntervalSince1970: TimeInterval(wholeSeconds)).formatted(Date.ISO8601FormatStyle())
        let padded = millisecond < 10 ? "00\(millisecond)" : millisecond < 100 ? "0\(millisecond)" : "\(millisecond)"
        return base.dropLast() + ".\(padded)Z"
    }
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
    /// Retained. Which conversation of the gateway Tether chats in. Owner: tether-protod. Body: ``ConversationSession``.
    public static let conversationSession: Topic = "conv.session"
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
    /// Retained. The front ends attached now, as connd counts them from their presence. Owner: tether-connd. Body: ``AttachedFrontEnds``.
    public static let frontEndsAttached: Topic = "frontend.attached"
    /// snapd committed a display snapshot, the identity, a catch-up or a compaction. Owner: tether-snapd. Body: ``SnapshotSaved``.
    public static let snapshotSaved: Topic = "snap.saved"
    /// Retained. The state of a program's files: a full disk, damaged databases set aside. Owners: tether-protod, tether-snapd. Body: ``StorageReport``.
    public static let storage: Topic = "storage"
    /// Retained. A program is alive: as it starts, within a second of a change, and every 30 s. Every program. Body: ``Heartbeat``.
    public static let heartbeat: Topic = "sys.heartbeat"
    /// Retained. The approvals the gateway waits for (OpenClaw), and what last changed. Owner: tether-protod. Body: ``ApprovalsUpdate``.
    public static let approvals: Topic = "approvals"
    /// Retained. The settings and usage of the session chatted in (OpenClaw): model, thinking
    /// level, tokens, context window, cost. Owner: tether-protod. Body: ``SessionSettings``.
    public static let sessionSettings: Topic = "session.settings"
    /// Retained. The programs of the set that cannot run as configured, and why, in words that
    /// name the setting or file and the fix; empty once none is. Owner: tether-compose. Body: ``MisconfiguredPrograms``.
    public static let misconfigured: Topic = "sys.misconfigured"
    /// Used by a subscriber to learn that its own subscription has reached the proxy.
    public static let probePrefix = "sys.probe."

    /// Whether `name` is a topic of whole gateway frames (`wire.in`, `wire.out`), whose
    /// bodies may be as large as ``BusSchema/maximumFrameBodySize``.
    public static func carriesGatewayFrames(_ name: String) -> Bool {
        name == wireInbound.name || name == wireOutbound.name
    }
}
