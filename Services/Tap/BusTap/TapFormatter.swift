public import Foundation
public import TetherBus
import TetherSchema
import TetherService

/// Writes bus messages for people (one line each: time, source, pid and sequence, topic,
/// body; colored on a terminal) or as JSON lines, with secrets hidden.
public struct TapFormatter: Sendable {
    public enum Style: Sendable {
        case pretty
        case json
    }

    public var style: Style
    /// Whether pretty lines carry ANSI colors.
    public var colored: Bool

    public init(style: Style, colored: Bool = false) {
        self.style = style
        self.colored = colored
    }

    /// `22:35:04.120 tether-protod[4242]#12 conv.message {"content":…}`, or the JSON line
    /// `{"at", "topic", "header", "body"}` where `at` is seconds since the tap started.
    public func format(_ message: BusMessage, at offset: TimeInterval) -> String {
        let bodyData = SecretRedactor.redact(message.body)
        switch style {
        case .pretty:
            // What publishers wrote is shown, never obeyed: no escape sequence reaches the terminal.
            let body = TerminalSafe.visible(String(decoding: bodyData, as: UTF8.self), newlines: false)
            let header = message.header
            let source = TerminalSafe.visible(header.source, newlines: false)
            let pid = header.pid.map { "[\($0)]" } ?? ""
            let replay = header.replay ? paint(" (retained)", .magenta) : ""
            return "\(paint(Self.clock(header.timestamp), .dim)) \(paint("\(source)\(pid)#\(header.sequence)", .cyan)) "
                + "\(paint(TerminalSafe.visible(message.topic.name, newlines: false), Self.color(of: message.topic)))\(replay) \(body)"
        case .json:
            return RecordedMessage.line(at: offset, topic: message.topic.name, header: message.header, body: bodyData)
        }
    }

    /// A line about the tap's own findings (gaps, restarts), set apart from messages.
    public func note(_ text: String) -> String {
        switch style {
        case .pretty: paint("-- \(TerminalSafe.visible(text, newlines: false))", .red)
        case .json: "{\"note\":\(RecordedMessage.quoted(text))}"
        }
    }

    /// The `--rate` table.
    public func rates(_ rows: [RateMeter.Row], window: TimeInterval) -> String {
        let width = max(5, rows.map(\.topic.count).max() ?? 0)
        var lines = [paint("TOPIC".padding(toLength: width, withPad: " ", startingAt: 0) + "      MSG/S     TOTAL  MEAN BYTES", .dim)]
        for row in rows {
            let rate = String(format: "%9.1f", row.rate)
            let total = String(row.total).leftPadded(to: 9)
            let bytes = String(row.meanBytes).leftPadded(to: 11)
            lines.append(
                "\(paint(row.topic.padding(toLength: width, withPad: " ", startingAt: 0), Self.color(of: Topic(row.topic))))  \(rate) \(total)  \(bytes)")
        }
        if rows.isEmpty { lines.append("(nothing yet)") }
        lines.append(paint("rates over the last \(Int(window)) s", .dim))
        return lines.joined(separator: "\n")
    }

    enum Color: String {
        case dim = "2"
        case red = "31"
        case green = "32"
        case yellow = "33"
        case blue = "34"
        case magenta = "35"
        case cyan = "36"
    }

    private func paint(_ text: String, _ color: Color) -> String {
        colored ? "\u{1B}[\(color.rawValue)m\(text)\u{1B}[0m" : text
    }

    /// One color per family of topics, so the eye can follow one.
    static func color(of topic: Topic) -> Color {
        switch topic.name.split(separator: ".").first.map(String.init) ?? "" {
        case "conv": .yellow
        case "conn", "net": .green
        case "wire": .blue
        case "health", "diag": .red
        case "sys": .dim
        default: .magenta
        }
    }

    /// Hours, minutes, seconds and milliseconds, UTC.
    static func clock(_ date: Date) -> String {
        let milliseconds = Int((date.timeIntervalSince1970 * 1000).rounded(.down))
        let millisecondsOfDay = ((milliseconds % 86_400_000) + 86_400_000) % 86_400_000
        let hours = millisecondsOfDay / 3_600_000
        let minutes = millisecondsOfDay / 60_000 % 60
        let seconds = millisecondsOfDay / 1000 % 60
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fraction = millisecondsOfDay % 1000
        return "\(two(hours)):\(two(minutes)):\(two(seconds)).\(fraction < 10 ? "00" : fraction < 100 ? "0" : "")\(fraction)"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
