import FoundationEssentials
public import TetherBus
import TetherWire

/// The public keys of the programs allowed on a `tcp://` bus: a file with one key a line,
/// optionally followed by a name (`KEY laptop-tap`), like ssh's authorized_keys. Blank lines
/// and lines starting with `#` are skipped.
public struct AllowedKeys: Sendable, Equatable {
    /// The names of the allowed keys, by key; a key without a name has an empty one.
    public private(set) var names: [String: String] = [:]

    /// The keys of `text`; a line that does not start with a key is an error naming the line.
    public init(parsing text: String, source: String) throws {
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingWhitespace()
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
            let fields = trimmed.split(separator: " ", maxSplits: 1)
            let key = String(fields[0])
            guard CurveKey.isValid(key) else {
                throw AllowedKeysError(.invalidKey, "\(source):\(index + 1): '\(key)' is not a CURVE public key (40 Z85 characters)")
            }
            names[key] = fields.count > 1 ? fields[1].trimmingWhitespace() : ""
        }
    }

    /// The keys in the file at `path`.
    public static func load(_ path: String) throws -> AllowedKeys {
        let text: String
        do {
            text = try TextFile.read(path)
        } catch {
            throw AllowedKeysError(.unreadable, "cannot read the allow-list \(path): \(error)")
        }
        return try AllowedKeys(parsing: text, source: path)
    }

    /// Whether `key` (Z85) is allowed.
    public func allows(_ key: String) -> Bool {
        names[key] != nil
    }
}

/// An allow-list that cannot be read or parsed.
public typealias AllowedKeysError = CodedError<AllowedKeysErrorCode>

/// What is wrong with an allow-list.
public enum AllowedKeysErrorCode: String, ErrorCode {
    /// A line is not a CURVE public key.
    case invalidKey
    /// The file cannot be read.
    case unreadable
}
