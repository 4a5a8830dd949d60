public import FoundationEssentials

/// An error reading or writing a wire message.
public struct WireCodecError: Error, CustomStringConvertible, Sendable {
    private enum Code: Sendable {
        case tooLarge(size: Int, limit: Int)
        case invalidJSON
        case missingType
        case invalidPayload(type: String)
        case encodingFailed(type: String)
    }

    private let code: Code
    /// The underlying decoding or encoding error, where there is one.
    public let underlying: String?

    private init(_ code: Code, underlying: (any Error)? = nil) {
        self.code = code
        self.underlying = underlying.map { String(describing: $0) }
    }

    /// The frame is larger than the codec accepts.
    public static func tooLarge(size: Int, limit: Int) -> Self { .init(.tooLarge(size: size, limit: limit)) }
    /// The frame is not a JSON object.
    public static func invalidJSON(_ error: (any Error)? = nil) -> Self { .init(.invalidJSON, underlying: error) }
    /// The frame has no string `type` field.
    public static var missingType: Self { .init(.missingType) }
    /// The frame names a known type but its envelope or payload has the wrong shape.
    public static func invalidPayload(type: String, _ error: any Error) -> Self {
        .init(.invalidPayload(type: type), underlying: error)
    }
    /// A message could not be encoded.
    public static func encodingFailed(type: String, _ error: any Error) -> Self {
        .init(.encodingFailed(type: type), underlying: error)
    }

    /// A short name for the kind of error, for counters.
    public var kind: String {
        switch code {
        case .tooLarge: "too-large"
        case .invalidJSON: "invalid-json"
        case .missingType: "missing-type"
        case .invalidPayload: "invalid-payload"
        case .encodingFailed: "encoding-failed"
        }
    }

    public var description: String {
        let base: String =
            switch code {
            case .tooLarge(let size, let limit): "frame of \(size) bytes is over the limit of \(limit) bytes"
            case .invalidJSON: "frame is not a JSON object"
            case .missingType: "frame has no string \"type\" field"
            case .invalidPayload(let type): "frame of type '\(type)' has the wrong shape"
            case .encodingFailed(let type): "could not encode a '\(type)' message"
            }
        guard let underlying else { return base }
        return "\(base): \(underlying)"
    }
}

/// Reads and writes the wire envelope of the gateway protocol.
///
/// Writes sorted keys, ISO 8601 dates without fractional seconds and `null` for absent
/// optional fields, as the protocol's examples do; reads dates with or without
/// fractional seconds. Unknown message types decode to ``WireMessage/unknown(type:sequence:data:)``.
public struct WireCodec: Sendable {
    /// The largest frame the codec reads, in bytes.
    public let maximumFrameSize: Int

    /// Creates a codec that refuses frames over `maximumFrameSize` bytes (1 MiB by default).
    public init(maximumFrameSize: Int = 1 << 20) {
        self.maximumFrameSize = maximumFrameSize
    }

    // MARK: Encoding

    /// Encodes a payload in an envelope of the given type.
    public func encode<Payload: Codable & Sendable>(
        _ payload: Payload,
        type: String,
        sequence: Int,
        serverTimestamp: Date? = nil
    ) throws(WireCodecError) -> Data {
        let envelope = WireEnvelope(type: type, sequence: sequence, payload: payload, serverTimestamp: serverTimestamp)
        do {
            return try Self.encoder.encode(envelope)
        } catch {
            throw .encodingFailed(type: type, error)
        }
    }

    /// Encodes a decoded message again, unknown types byte for byte.
    public func encode(_ message: WireMessage) throws(WireCodecError) -> Data {
        switch message {
        case .chatMessage(let envelope): try encode(envelope)
        case .messageAck(let envelope): try encode(envelope)
        case .botState(let envelope): try encode(envelope)
        case .streamingChunk(let envelope): try encode(envelope)
        case .ping(let envelope): try encode(envelope)
        case .pong(let envelope): try encode(envelope)
        case .sessionResume(let envelope): try encode(envelope)
        case .sessionResumed(let envelope): try encode(envelope)
        case .unknown(_, _, let data): data
        }
    }

    private func encode<Payload>(_ envelope: WireEnvelope<Payload>) throws(WireCodecError) -> Data {
        do {
            return try Self.encoder.encode(envelope)
        } catch {
            throw .encodingFailed(type: envelope.type, error)
        }
    }

    /// Encodes a chat message.
    public func encode(chatMessage: ChatMessage, sequence: Int) throws(WireCodecError) -> Data {
        try encode(chatMessage, type: WireMessageType.chatMessage.rawValue, sequence: sequence)
    }

    /// Encodes a ping.
    public func encodePing(sequence: Int, timestamp: Date = Date()) throws(WireCodecError) -> Data {
        try encode(HeartbeatPayload(timestamp: timestamp), type: WireMessageType.ping.rawValue, sequence: sequence)
    }

    /// Encodes the pong that answers the ping with `sequence`.
    public func encodePong(sequence: Int, timestamp: Date = Date()) throws(WireCodecError) -> Data {
        try encode(HeartbeatPayload(timestamp: timestamp), type: WireMessageType.pong.rawValue, sequence: sequence)
    }

    // MARK: Decoding

    /// Decodes a text frame.
    public func decode(_ text: String) throws(WireCodecError) -> WireMessage {
        try decode(Data(text.utf8))
    }

    /// Decodes a frame, parsing it once: the type first, then its envelope from the same parse.
    public func decode(_ data: Data) throws(WireCodecError) -> WireMessage {
        guard data.count <= maximumFrameSize else {
            throw .tooLarge(size: data.count, limit: maximumFrameSize)
        }
        if let chunk = data.withUnsafeBytes({ Self.directChunk($0.assumingMemoryBound(to: UInt8.self)) }) {
            return .streamingChunk(chunk)
        }
        let routed: RoutedFrame
        do {
            routed = try Self.decoder.decode(RoutedFrame.self, from: data)
        } catch let error as RoutingError {
            switch error {
            case .missingType: throw .missingType
            case .invalidPayload(let type, let underlying): throw .invalidPayload(type: type, underlying)
            }
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            throw .invalidJSON(DecodingError.typeMismatch(Any.self, context))
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw .invalidJSON(DecodingError.dataCorrupted(context))
        } catch {
            throw .missingType
        }
        return routed.message ?? .unknown(type: routed.type, sequence: routed.sequence, data: data)
    }

    /// Why a frame that is a JSON object did not route.
    private enum RoutingError: Error {
        /// No string `type`, or a `sequence` that is not an integer.
        case missingType
        case invalidPayload(type: String, any Error)
    }

    /// A frame's type and, for a known type, its message, read from one parse of the frame.
    private struct RoutedFrame: Decodable {
        var type: String
        var sequence: Int?
        /// Nil for a type this codec does not know.
        var message: WireMessage?

        private enum Keys: String, CodingKey {
            case type
            case sequence
        }

        init(from decoder: any Decoder) throws {
            // Not an object: the caller's invalidJSON.
            let container = try decoder.container(keyedBy: Keys.self)
            do {
                type = try container.decode(String.self, forKey: .type)
                sequence = try container.decodeIfPresent(Int.self, forKey: .sequence)
            } catch {
                throw RoutingError.missingType
            }
            guard let known = WireMessageType(rawValue: type) else { return }
            do {
                message =
                    switch known {
                    case .chatMessage: .chatMessage(try WireEnvelope<ChatMessage>(from: decoder))
                    case .messageAck: .messageAck(try WireEnvelope<MessageAck>(from: decoder))
                    case .botState: .botState(try WireEnvelope<BotStateUpdate>(from: decoder))
                    case .streamingChunk: .streamingChunk(try WireEnvelope<StreamingChunk>(from: decoder))
                    case .ping: .ping(try WireEnvelope<HeartbeatPayload>(from: decoder))
                    case .pong: .pong(try WireEnvelope<HeartbeatPayload>(from: decoder))
                    case .sessionResume: .sessionResume(try WireEnvelope<SessionResume>(from: decoder))
                    case .sessionResumed: .sessionResumed(try WireEnvelope<SessionResumed>(from: decoder))
                    }
            } catch {
                throw RoutingError.invalidPayload(type: type, error)
            }
        }
    }

    // MARK: JSON settings

    /// One encoder and one decoder for the process: making them for each frame costs more than
    /// a small frame's own encoding.
    static let encoder = makeEncoder()
    static let decoder = makeDecoder()

    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = ISO8601.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "'\(text)' is not an ISO 8601 date")
            }
            return date
        }
        return decoder
    }
}

/// ISO 8601 dates as the protocol writes them, with or without fractional seconds.
public enum ISO8601 {
    private static let plain = Date.ISO8601FormatStyle()
    private static let fractional = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// Parses `2024-01-30T12:00:00Z` or `2024-01-30T12:00:00.123Z`.
    public static func parse(_ text: String) -> Date? {
        if let date = try? plain.parse(text) { return date }
        return try? fractional.parse(text)
    }

    /// Formats a date with millisecond precision.
    public static func formatPrecise(_ date: Date) -> String {
        fractional.format(date)
    }
}
