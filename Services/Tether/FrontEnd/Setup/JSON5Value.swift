import Foundation

/// A JSON5 document read as plain values ([String: Any], [Any], String, Int, Double, Bool,
/// NSNull), as OpenClaw's configuration is written: comments, trailing commas, unquoted keys.
/// Foundation's JSONDecoder reads JSON5; JSONSerialization on Linux does not.
enum JSON5Value: Decodable {
    case object([String: JSON5Value])
    case array([JSON5Value])
    case string(String)
    case integer(Int)
    case number(Double)
    case bool(Bool)
    case null

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON5Value].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSON5Value].self))
        }
    }

    /// The document in `text`, as plain values.
    static func parse(_ text: String) throws -> Any {
        let decoder = JSONDecoder()
        decoder.allowsJSON5 = true
        return try decoder.decode(JSON5Value.self, from: Data(text.utf8)).plain
    }

    var plain: Any {
        switch self {
        case .object(let members): members.mapValues(\.plain)
        case .array(let items): items.map(\.plain)
        case .string(let text): text
        case .integer(let value): value
        case .number(let value): value
        case .bool(let value): value
        case .null: NSNull()
        }
    }
}
