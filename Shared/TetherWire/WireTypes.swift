public import FoundationEssentials

/// The identifier of a chat message: `{"value": "msg-1"}` on the wire.
public struct MessageID: Hashable, Codable, Sendable, CustomStringConvertible {
    public var value: String

    public init(_ value: String) {
        self.value = value
    }

    /// A new, globally unique identifier.
    public static func random() -> MessageID {
        MessageID(UUID().uuidString.lowercased())
    }

    public var description: String { value }
}

/// Who wrote a message: `{"type": "user"}` or `{"type": "bot", "name": "Opta"}`.
public enum Sender: Hashable, Codable, Sendable {
    case user
    case bot(name: String)

    private enum CodingKeys: String, CodingKey {
        case type
        case name
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "user":
            self = .user
        case "bot":
            self = .bot(name: try container.decodeIfPresent(String.self, forKey: .name) ?? "")
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: container, debugDescription: "unknown sender type '\(type)'")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .user:
            try container.encode("user", forKey: .type)
        case .bot(let name):
            try container.encode("bot", forKey: .type)
            try container.encode(name, forKey: .name)
        }
    }
}

/// The delivery status a chat message carries on the wire.
public enum MessageStatus: String, Codable, Sendable, CaseIterable {
    case pending
    case sending
    case sent
    case delivered
    case read
    case failed
}

/// A chat message, in either direction.
public struct ChatMessage: Hashable, Codable, Sendable {
    public var id: MessageID
    public var content: String
    public var sender: Sender
    public var timestamp: Date
    public var status: MessageStatus
    public var threadID: String?
    public var replyTo: MessageID?

    public init(
        id: MessageID = .random(),
        content: String,
        sender: Sender,
        timestamp: Date = Date(),
        status: MessageStatus = .pending,
        threadID: String? = nil,
        replyTo: MessageID? = nil
    ) {
        self.id = id
        self.content = content
        self.sender = sender
        self.timestamp = timestamp
        self.status = status
        self.threadID = threadID
        self.replyTo = replyTo
    }

    private enum CodingKeys: String, CodingKey {
        case id, content, sender, timestamp, status, threadID, replyTo
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(MessageID.self, forKey: .id)
        content = try container.decode(String.self, forKey: .content)
        sender = try container.decode(Sender.self, forKey: .sender)
        timestamp = try container.decode(Date.self, forKey: .timestamp)
        status = try container.decode(MessageStatus.self, forKey: .status)
        threadID = try container.decodeIfPresent(String.self, forKey: .threadID)
        replyTo = try container.decodeIfPresent(MessageID.self, forKey: .replyTo)
    }

    /// Writes absent optionals as `null`, as the seed examples do.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(content, forKey: .content)
        try container.encode(sender, forKey: .sender)
        try container.encode(timestamp, forKey: .timestamp)
        try container.encode(status, forKey: .status)
        try container.encode(threadID, forKey: .threadID)
        try container.encode(replyTo, forKey: .replyTo)
    }
}

/// What the gateway says it did with a message.
public enum AckStatus: String, Codable, Sendable, CaseIterable {
    case received
    case processed
    case failed

    /// Whether the gateway has the message.
    public var isDelivered: Bool { self != .failed }
}

/// `message.ack`: the gateway acknowledges a chat message.
public struct MessageAck: Hashable, Codable, Sendable {
    public var messageID: MessageID
    public var status: AckStatus
    public var serverTimestamp: Date

    public init(messageID: MessageID, status: AckStatus, serverTimestamp: Date = Date()) {
        self.messageID = messageID
        self.status = status
        self.serverTimestamp = serverTimestamp
    }
}

/// What the bot is doing.
public enum BotState: String, Codable, Sendable, CaseIterable {
    case idle
    case thinking
    case typing
    case responding
    case error
}

/// `bot.state`: the bot's activity changed.
public struct BotStateUpdate: Hashable, Codable, Sendable {
    public var state: BotState
    public var botName: String
    public var detail: String?
    public var timestamp: Date

    public init(state: BotState, botName: String, detail: String? = nil, timestamp: Date = Date()) {
        self.state = state
        self.botName = botName
        self.detail = detail
        self.timestamp = timestamp
    }

    private enum CodingKeys: String, CodingKey {
        case state, botName, detail, timestamp
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        state = try container.decode(BotState.self, forKey: .state)
        botName = try container.decode(String.self, forKey: .botName)
        detail = try container.decodeIfPresent(String.self, forKey: .detail)
        timestamp = try container.decode(Date.self, forKey: .timestamp)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(state, forKey: .state)
        try container.encode(botName, forKey: .botName)
        try container.encode(detail, forKey: .detail)
        try container.encode(timestamp, forKey: .timestamp)
    }
}

/// `streaming.chunk`: one piece of a reply the bot is still writing.
public struct StreamingChunk: Hashable, Codable, Sendable {
    public var messageID: MessageID
    public var chunkIndex: Int
    public var content: String
    public var isFinal: Bool
    /// The user message this reply answers: a Tether addition, absent from seed peers (and
    /// then not written).
    public var replyTo: MessageID?

    public init(messageID: MessageID, chunkIndex: Int, content: String, isFinal: Bool, replyTo: MessageID? = nil) {
        self.messageID = messageID
        self.chunkIndex = chunkIndex
        self.content = content
        self.isFinal = isFinal
        self.replyTo = replyTo
    }
}

/// The payload of `system.ping` and `system.pong`.
public struct HeartbeatPayload: Hashable, Codable, Sendable {
    public var timestamp: Date?

    public init(timestamp: Date? = Date()) {
        self.timestamp = timestamp
    }
}

/// `session.resume` (Tether → gateway, a Tether addition): sent first on a new connection,
/// it asks the gateway for every frame after the last one this client processed.
public struct SessionResume: Hashable, Codable, Sendable {
    /// The gateway session the sequence belongs to; nil when the client never had one.
    public var sessionID: String?
    /// The last server sequence processed; 0 for none.
    public var lastSequence: Int

    public init(sessionID: String?, lastSequence: Int) {
        self.sessionID = sessionID
        self.lastSequence = lastSequence
    }

    private enum CodingKeys: String, CodingKey {
        case sessionID, lastSequence
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sessionID = try container.decodeIfPresent(String.self, forKey: .sessionID)
        lastSequence = try container.decode(Int.self, forKey: .lastSequence)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sessionID, forKey: .sessionID)
        try container.encode(lastSequence, forKey: .lastSequence)
    }
}

/// `session.resumed` (gateway → Tether, a Tether addition): the answer to `session.resume`,
/// sent after the replayed frames.
public struct SessionResumed: Hashable, Codable, Sendable {
    /// The gateway's session; a different one than asked for means the gateway restarted.
    public var sessionID: String
    /// The gateway's latest sequence.
    public var lastSequence: Int
    /// How many frames were sent again.
    public var replayed: Int
    /// False when frames the client asked for are gone (a restarted gateway, or older than
    /// its history): a stream that was open may never complete.
    public var complete: Bool

    public init(sessionID: String, lastSequence: Int, replayed: Int, complete: Bool) {
        self.sessionID = sessionID
        self.lastSequence = lastSequence
        self.replayed = replayed
        self.complete = complete
    }
}
