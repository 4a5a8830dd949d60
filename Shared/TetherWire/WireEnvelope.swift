public import FoundationEssentials

/// The message types Tether knows, by their name on the wire.
public enum WireMessageType: String, Codable, Sendable, CaseIterable {
    case chatMessage = "chat.message"
    case messageAck = "message.ack"
    case botState = "bot.state"
    case streamingChunk = "streaming.chunk"
    case ping = "system.ping"
    case pong = "system.pong"
    /// A Tether addition: resume a session after a reconnect.
    case sessionResume = "session.resume"
    /// A Tether addition: the answer to `session.resume`.
    case sessionResumed = "session.resumed"
}

/// The envelope around every wire message:
/// `{"version", "type", "sequence", "payload", "serverTimestamp"}`.
public struct WireEnvelope<Payload: Codable & Sendable>: Codable, Sendable {
    /// The protocol version every Tether peer writes.
    public static var currentVersion: String { "1.0" }

    public var version: String
    public var type: String
    public var sequence: Int
    public var payload: Payload
    public var serverTimestamp: Date?

    public init(
        version: String = WireEnvelope.currentVersion,
        type: String,
        sequence: Int,
        payload: Payload,
        serverTimestamp: Date? = nil
    ) {
        self.version = version
        self.type = type
        self.sequence = sequence
        self.payload = payload
        self.serverTimestamp = serverTimestamp
    }

    private enum CodingKeys: String, CodingKey {
        case version, type, sequence, payload, serverTimestamp
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(String.self, forKey: .version)
        type = try container.decode(String.self, forKey: .type)
        sequence = try container.decode(Int.self, forKey: .sequence)
        payload = try container.decode(Payload.self, forKey: .payload)
        serverTimestamp = try container.decodeIfPresent(Date.self, forKey: .serverTimestamp)
    }

    /// Writes `serverTimestamp` as `null` when absent, as the seed examples do.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(type, forKey: .type)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(payload, forKey: .payload)
        try container.encode(serverTimestamp, forKey: .serverTimestamp)
    }
}

/// A wire message after decoding, routed by its type.
public enum WireMessage: Sendable {
    case chatMessage(WireEnvelope<ChatMessage>)
    case messageAck(WireEnvelope<MessageAck>)
    case botState(WireEnvelope<BotStateUpdate>)
    case streamingChunk(WireEnvelope<StreamingChunk>)
    case ping(WireEnvelope<HeartbeatPayload>)
    case pong(WireEnvelope<HeartbeatPayload>)
    case sessionResume(WireEnvelope<SessionResume>)
    case sessionResumed(WireEnvelope<SessionResumed>)
    /// A type this peer does not know; kept whole so it can be logged or passed on.
    case unknown(type: String, sequence: Int?, data: Data)

    /// The type name on the wire.
    public var typeName: String {
        switch self {
        case .chatMessage: WireMessageType.chatMessage.rawValue
        case .messageAck: WireMessageType.messageAck.rawValue
        case .botState: WireMessageType.botState.rawValue
        case .streamingChunk: WireMessageType.streamingChunk.rawValue
        case .ping: WireMessageType.ping.rawValue
        case .pong: WireMessageType.pong.rawValue
        case .sessionResume: WireMessageType.sessionResume.rawValue
        case .sessionResumed: WireMessageType.sessionResumed.rawValue
        case .unknown(let type, _, _): type
        }
    }
}
