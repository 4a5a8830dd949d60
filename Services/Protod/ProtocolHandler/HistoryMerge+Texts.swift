import Foundation

/// How a history entry's text is told to be a message's: the gateway shortens long texts,
/// strips a time stamp from the start of a user entry and appends a line for each image it
/// saved to its media store.
extension HistoryMerge {
    /// What the gateway appends to a text it shortened for `chat.history` (at 12,000 UTF-16
    /// units by default).
    static let truncationMark = "\n...(truncated)..."

    /// Whether a history entry's text is a message's: the same, or the same shortened by the
    /// gateway, or the same once the time stamp the gateway strips from the start is gone, or
    /// the same with a line for each image the gateway saved to its media store.
    static func same(_ historyText: String?, _ text: String) -> Bool {
        guard let historyText = historyText.map(withoutOffloadedImages) else { return false }
        if historyText == text || shortened(historyText, of: text) { return true }
        let unstamped = withoutTimeStamp(text)
        return unstamped != text && (historyText == unstamped || shortened(historyText, of: unstamped))
    }

    /// Whether `historyText` is `text` as the gateway shortens it. A cut through an emoji
    /// leaves half of it, read as U+FFFD (``OpenClawCodec``), which the text does not hold.
    static func shortened(_ historyText: String, of text: String) -> Bool {
        guard historyText.hasSuffix(truncationMark) else { return false }
        var kept = historyText.dropLast(truncationMark.count)
        if kept.unicodeScalars.last == "\u{FFFD}" { kept = Substring(kept.unicodeScalars.dropLast()) }
        return !kept.isEmpty && text.unicodeScalars.count > kept.unicodeScalars.count && text.unicodeScalars.starts(with: kept.unicodeScalars)
    }

    /// What OpenClaw's `chat.send` appends to a message, a line for each image over 2,000,000
    /// bytes it saves to its media store instead of passing it inline, after a line break:
    /// `[media attached: media://inbound/ID]`.
    static let offloadedImageMark = "[media attached: media://inbound/"

    /// A history entry's text without the lines OpenClaw appended for its offloaded images.
    static func withoutOffloadedImages(_ historyText: String) -> String {
        var text = Substring(historyText)
        while text.hasSuffix("]"), let newline = text.lastIndex(of: "\n") {
            let line = text[text.index(after: newline)...]
            guard line.hasPrefix(offloadedImageMark) else { break }
            let id = line.dropFirst(offloadedImageMark.count).dropLast()
            guard !id.isEmpty, !id.contains(where: { $0 == "]" || $0.isWhitespace }) else { break }
            text = text[..<newline]
        }
        return String(text)
    }

    /// A text without the time stamp the gateway strips from the start of a user entry
    /// (`[Thu 2026-11-26 08:14 UTC] `).
    static func withoutTimeStamp(_ text: String) -> String {
        // A regex literal is parsed each time it is evaluated: most texts are passed by first.
        guard text.hasPrefix("["), let match = text.prefixMatch(of: /\[[A-Za-z]{3} \d{4}-\d{2}-\d{2} \d{2}:\d{2}[^\]]*\] */) else { return text }
        return String(text[match.range.upperBound...])
    }
}
