import Foundation
public import TetherSchema
import TetherWire

/// Writes conversation entries as lines people read.
public struct TranscriptFormatter: Sendable {
    public init() {}

    /// 24-hour local time: `22:35:04`.
    private static let clock = Date.VerbatimFormatStyle(
        format: "\(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits):\(second: .twoDigits)",
        timeZone: .current, calendar: .current)

    /// `12:00:01 you: hello [delivered]`, `12:00:02 Opta: You said: hello`, or, for a message
    /// another client sent into the session, `12:00:03 openclaw-tui: hi`. An entry of another
    /// session than `shown` (a reply to a message sent there before a switch) names it:
    /// `12:00:04 [agent:main:main] Opta: …`.
    /// A tool call is one line: `12:00:01 ⚙ read README.md · ok · 0.3 s`.
    public func line(for entry: TranscriptEntry, shown: String? = nil) -> String {
        var time = entry.timestamp.formatted(Self.clock)
        if let session = entry.session, let shown, session != shown { time += " [\(session)]" }
        if let tool = entry.tool { return "\(time) \(Self.line(for: tool))" }
        switch entry.sender {
        case .user:
            let content = entry.contentWithAttachments
            if let author = entry.author { return "\(time) \(author): \(content)" }
            return "\(time) you: \(content) [\(entry.status.rawValue)" + (entry.status == .delivered ? entry.detail.map { ": \($0)" } ?? "" : "") + "]"
        case .bot(let name):
            let suffix = entry.status == .incomplete ? " [incomplete" + (entry.detail.map { ": \($0)" } ?? "") + "]" : ""
            return "\(time) \(name.isEmpty ? "bot" : name): \(entry.content)\(suffix)"
        }
    }

    /// `⚙ read README.md · ok · 0.3 s`.
    public static func line(for tool: ToolCall) -> String { "⚙ " + tool.words }

    /// `  message 1f2e… is now delivered`.
    public func line(for update: DeliveryUpdate) -> String {
        "  message \(update.id.value.prefix(8)) is now \(update.status.rawValue)" + (update.detail.map { ": \($0)" } ?? "")
    }
}
