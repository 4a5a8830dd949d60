public import Foundation
import TetherSchema

/// Hides secrets in message bodies before the tap shows or records them: the value of every
/// field whose name says it holds one (token, secret, password, authorization, api key,
/// private key), also inside JSON carried as a string (a gateway frame in `wire.in`); a
/// count of a model's tokens (`inputTokens: 12`) is not one.
///
/// No Tether program publishes a secret; this guards against one that would.
public enum SecretRedactor {
    /// What a hidden value is shown as.
    public static let mask = SecretNames.mask

    /// `body` with its secrets hidden; the same bytes when it holds none or is not JSON.
    public static func redact(_ body: Data) -> Data {
        guard let object = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else { return body }
        var changed = false
        let redacted = redact(object, changed: &changed)
        guard changed, let data = try? JSONSerialization.data(withJSONObject: redacted, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        else { return body }
        return data
    }

    /// Whether a field counts tokens of a model's context (`totalTokens: 1540`): a number
    /// under a plural name, which no secret is.
    static func isCount(fieldName: String, _ value: Any) -> Bool {
        fieldName.lowercased().hasSuffix("tokens") && value is NSNumber
    }

    private static func redact(_ value: Any, changed: inout Bool) -> Any {
        switch value {
        case let object as [String: Any]:
            var result: [String: Any] = [:]
            for (key, field) in object {
                if SecretNames.isSecret(fieldName: key), !(field is NSNull), !isCount(fieldName: key, field) {
                    result[key] = mask
                    changed = true
                } else {
                    result[key] = redact(field, changed: &changed)
                }
            }
            return result
        case let array as [Any]:
            return array.map { redact($0, changed: &changed) }
        case let text as String where text.hasPrefix("{"):
            let inner = redact(Data(text.utf8))
            guard inner != Data(text.utf8) else { return text }
            changed = true
            return String(decoding: inner, as: UTF8.self)
        default:
            return value
        }
    }
}
