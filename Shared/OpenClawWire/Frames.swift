import FoundationEssentials

/// An error as the gateway reports it (`ErrorShape`).
public struct GatewayErrorShape: Sendable, Hashable, Codable {
    public var code: String
    public var message: String
    public var details: JSONValue?
    public var retryable: Bool?
    public var retryAfterMs: Int?

    public init(code: String, message: String, details: JSONValue? = nil, retryable: Bool? = nil, retryAfterMs: Int? = nil) {
        self.code = code
        self.message = message
        self.details = details
        self.retryable = retryable
        self.retryAfterMs = retryAfterMs
    }
}

/// One frame of the OpenClaw gateway protocol: a request, its response, or an event.
public enum OpenClawFrame: Sendable, Hashable {
    case request(id: String, method: String, params: JSONValue?)
    case response(id: String, ok: Bool, payload: JSONValue?, error: GatewayErrorShape?)
    /// `seq` is the connection's event counter (absent on targeted sends such as `connect.challenge`).
    case event(name: String, payload: JSONValue?, seq: Int?)
}

/// Why a text is not an OpenClaw frame.
public struct OpenClawFrameError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// Reads and writes OpenClaw frames: one JSON object per WebSocket message.
public struct OpenClawCodec: Sendable {
    public init() {}

    private struct Envelope: Codable {
        var type: String
        var id: String?
        var method: String?
        var params: JSONValue?
        var ok: Bool?
        var payload: JSONValue?
        var error: GatewayErrorShape?
        var event: String?
        var seq: Int?
    }

    public func decode(_ text: String) throws -> OpenClawFrame {
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: Data(text.utf8))
        } catch {
            // The gateway cuts long texts in `chat.history` by UTF-16 units, which can split an
            // emoji's surrogate pair: JavaScript writes the half left as `\ud83d`, which
            // Foundation refuses, and with it the whole answer. Such a half is read as U+FFFD.
            guard let repaired = Self.replacingLoneSurrogates(in: text),
                let decoded = try? JSONDecoder().decode(Envelope.self, from: Data(repaired.utf8))
            else { throw OpenClawFrameError(description: "not a JSON frame object: \(Self.reason(error))") }
            envelope = decoded
        }
        switch envelope.type {
        case "req":
            guard let id = envelope.id, !id.isEmpty, let method = envelope.method else {
                throw OpenClawFrameError(description: "a request without an id or a method")
            }
            return .request(id: id, method: method, params: envelope.params)
        case "res":
            guard let id = envelope.id, let ok = envelope.ok else { throw OpenClawFrameError(description: "a response without an id or ok") }
            return .response(id: id, ok: ok, payload: envelope.payload, error: envelope.error)
        case "event":
            guard let name = envelope.event else { throw OpenClawFrameError(description: "an event without a name") }
            return .event(name: name, payload: envelope.payload, seq: envelope.seq)
        default:
            throw OpenClawFrameError(description: "unknown frame type \(envelope.type)")
        }
    }

    public func encode(_ frame: OpenClawFrame) -> String {
        let envelope: Envelope
        switch frame {
        case .request(let id, let method, let params):
            envelope = Envelope(type: "req", id: id, method: method, params: params)
        case .response(let id, let ok, let payload, let error):
            envelope = Envelope(type: "res", id: id, ok: ok, payload: payload, error: error)
        case .event(let name, let payload, let seq):
            envelope = Envelope(type: "event", payload: payload, event: name, seq: seq)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding these value types cannot fail.
        return String(decoding: (try? encoder.encode(envelope)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// A request with typed params.
    public func request(id: String, method: String, params: some Encodable) -> String {
        encode(.request(id: id, method: method, params: try? JSONValue(encoding: params)))
    }

    /// `text` with every `\uXXXX` escape of a surrogate that is not half of a pair written as
    /// `\ufffd`; nil when it has none.
    static func replacingLoneSurrogates(in text: String) -> String? {
        let bytes = Array(text.utf8)
        func hexValue(at index: Int) -> Int? {
            guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
            var value = 0
            for byte in bytes[(index + 2)..<(index + 6)] {
                guard let digit = Int(String(UnicodeScalar(byte)), radix: 16) else { return nil }
                value = value * 16 + digit
            }
            return value
        }
        var output: [UInt8] = []
        var index = 0
        var changed = false
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count else {
                output.append(bytes[index])
                index += 1
                continue
            }
            guard let value = hexValue(at: index) else {
                // Any other escape, `\\` included, is two bytes that stay as they are.
                output.append(contentsOf: bytes[index...(index + 1)])
                index += 2
                continue
            }
            if (0xD800...0xDBFF).contains(value), let low = hexValue(at: index + 6), (0xDC00...0xDFFF).contains(low) {
                output.append(contentsOf: bytes[index..<(index + 12)])
                index += 12
            } else if (0xD800...0xDFFF).contains(value) {
                output.append(contentsOf: Array(#"\ufffd"#.utf8))
                index += 6
                changed = true
            } else {
                output.append(contentsOf: bytes[index..<(index + 6)])
                index += 6
            }
        }
        return changed ? String(decoding: output, as: UTF8.self) : nil
    }

    private static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): context.debugDescription
        case DecodingError.keyNotFound(let key, _): "no \(key.stringValue)"
        case DecodingError.typeMismatch(_, let context): "\(context.codingPath.map(\.stringValue).joined(separator: ".")) has the wrong type"
        default: "\(error)"
        }
    }
}
