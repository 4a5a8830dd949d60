import TetherSchema
import TetherWire

/// The words a notification shows: one line, short, with no control characters and no
/// secret.
public enum NotificationText {
    /// The most characters a notification's body line keeps; longer ones end in `…`.
    public static let bodyLimit = 120

    /// The first line of `text` holding anything but spaces, trimmed, its secrets hidden
    /// (``hidingSecrets(_:)``) and cut to `limit` characters with `…`; empty when there is none.
    public static func firstLine(of text: String, limit: Int = bodyLimit) -> String {
        let line =
            text.split(whereSeparator: \.isNewline).lazy
            .map { withoutControls(String($0)).trimmingWhitespace() }
            .first { !$0.isEmpty } ?? ""
        return shortened(hidingSecrets(line), to: limit)
    }

    /// `text` cut to `limit` characters, the last of them `…`, when longer.
    public static func shortened(_ text: String, to limit: Int) -> String {
        guard text.count > limit, limit > 0 else { return text }
        return text.prefix(limit - 1).trimmingWhitespace() + "…"
    }

    /// `text` with the value of every secret it shows hidden as `<redacted>`, as tether-tap
    /// hides a secret field (``SecretNames``): `NAME=VALUE` and `NAME: VALUE` where the name
    /// says it holds one (`TOKEN=…`, `password: …`, `--api-key=…`), the word after such an
    /// option (`--token VALUE`), after `Bearer` or `Basic`, and the password of a URL
    /// (`https://user:PASSWORD@host`).
    public static func hidingSecrets(_ text: String) -> String {
        var words: [String] = []
        var hideNext = false
        for word in text.split(separator: " ", omittingEmptySubsequences: false).map(String.init) {
            let bare = withoutQuotes(word)
            let lowered = bare.lowercased()
            // `Authorization: Bearer VALUE`: the scheme stays, the value goes.
            if lowered == "bearer" || lowered == "basic" {
                words.append(word)
                hideNext = true
                continue
            }
            if hideNext, !word.isEmpty {
                words.append(SecretNames.mask)
                hideNext = false
                continue
            }
            if let separator = bare.firstIndex(where: { $0 == "=" || $0 == ":" }), !bare.contains("://") {
                let name = String(bare[..<separator])
                if SecretNames.isSecret(fieldName: name) {
                    let value = bare[bare.index(after: separator)...]
                    if value.isEmpty {
                        words.append(word)
                        hideNext = true
                    } else {
                        // The quotes around it stay: "`TOKEN=s3cret`" is "`TOKEN=<redacted>`".
                        let (opening, closing) = quotes(around: word)
                        words.append(opening + name + String(bare[separator]) + SecretNames.mask + closing)
                    }
                    continue
                }
            }
            if bare.hasPrefix("-"), SecretNames.isSecret(fieldName: bare) {
                words.append(word)
                hideNext = true
                continue
            }
            words.append(hidingURLPassword(word))
        }
        return words.joined(separator: " ")
    }

    /// `text` with `&`, `<` and `>` escaped, for a notification service that reads markup in a body.
    public static func escapingMarkup(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// `word` without the quotes around it (`'Authorization:` is `Authorization:`).
    /// Quotes and the backticks of Markdown code around a word.
    private static func isQuote(_ character: Character) -> Bool { character == "\"" || character == "'" || character == "`" }

    private static func withoutQuotes(_ word: String) -> String {
        guard let first = word.firstIndex(where: { !isQuote($0) }), let last = word.lastIndex(where: { !isQuote($0) }) else { return "" }
        return String(word[first...last])
    }

    /// The quotes a word opens and closes with.
    private static func quotes(around word: String) -> (String, String) {
        (String(word.prefix(while: isQuote)), String(word.reversed().prefix(while: isQuote).reversed()))
    }

    private static func withoutControls(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : $0 }))
    }

    private static func hidingURLPassword(_ word: String) -> String {
        guard let scheme = word.firstRange(of: "://") else { return word }
        let rest = word[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" }
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return word }
        return String(word[..<word.index(after: colon)]) + SecretNames.mask + String(word[at...])
    }
}
