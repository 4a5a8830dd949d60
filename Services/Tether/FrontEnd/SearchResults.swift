public import FoundationEssentials
public import TetherSchema
import TetherService

/// What `tether search` prints for the messages found: a line each, newest first.
public enum SearchResults {
    /// `2026-11-27 17:10  You: … deploy the **build** …` (the words found in bold when
    /// `highlight`); an entry of another session than `shown` names its session. Control
    /// characters in the text are shown as text.
    public static func line(_ hit: SearchCommand.Hit, shown: String? = nil, highlight: Bool, timeZone: TimeZone = .current) -> String {
        let entry = hit.entry
        let session = entry.session.flatMap { $0 == shown ? nil : "[\($0)] " } ?? ""
        return
            "\(time(entry.timestamp, in: timeZone))  \(session)\(TerminalSafe.visible(hit.speaker, newlines: false)): \(excerpt(hit.excerpt, highlight: highlight))"
    }

    /// A hit in its conversation, a line a message, oldest first (``AroundCommand/Reply/lines(shown:time:)``),
    /// with control characters shown as text.
    public static func context(_ reply: AroundCommand.Reply, shown: String? = nil, timeZone: TimeZone = .current) -> [String] {
        reply.lines(shown: shown) { time($0, in: timeZone) }.map { TerminalSafe.visible($0, newlines: false) }
    }

    /// The excerpt on one line, each word found between bold and normal when `highlight`.
    static func excerpt(_ excerpt: String, highlight: Bool) -> String {
        var result = ""
        var inside = false
        var part = ""
        func flush() {
            result += TerminalSafe.visible(part, newlines: false)
            part = ""
        }
        for character in excerpt {
            switch String(character) {
            case SearchCommand.matchStart where !inside:
                flush()
                if highlight { result += "\u{1B}[1m" }
                inside = true
            case SearchCommand.matchEnd where inside:
                flush()
                if highlight { result += "\u{1B}[22m" }
                inside = false
            default:
                part.append(character == "\n" ? " " : character)
            }
        }
        flush()
        if inside && highlight { result += "\u{1B}[22m" }
        return result
    }

    static func time(_ date: Date, in timeZone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        func two(_ value: Int?) -> String { value.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "??" }
        return "\(parts.year.map(String.init) ?? "????")-\(two(parts.month))-\(two(parts.day)) \(two(parts.hour)):\(two(parts.minute))"
    }
}
