public import Foundation
public import TetherBus
public import TetherSchema

/// One line of a tap recording (`tether-tap --record`, also what `--json` prints):
/// `{"at": 1.234, "topic": "conv.message", "header": {…}, "body": {…}}`, where `at` is the
/// seconds since the recording started.
public struct RecordedMessage: Sendable, Equatable {
    public var at: TimeInterval
    public var topic: String
    public var header: BusHeader
    /// The body as it was published (secrets hidden).
    public var body: Data

    public init(at: TimeInterval, topic: String, header: BusHeader, body: Data) {
        self.at = at
        self.topic = topic
        self.header = header
        self.body = body
    }

    /// The bus frames that publish this message again.
    public var frames: [[UInt8]] {
        [Array(topic.utf8), header.jsonBytes(), Array(body)]
    }

    /// The recording line of a message. A body that is not JSON is kept as a string, so the
    /// line stays JSON.
    static func line(at offset: TimeInterval, topic: String, header: BusHeader, body: Data) -> String {
        let headerJSON = String(decoding: header.jsonBytes(), as: UTF8.self)
        let bodyIsJSON = (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) != nil
        let bodyJSON = bodyIsJSON ? String(decoding: body, as: UTF8.self) : quoted(String(decoding: body, as: UTF8.self))
        let at = String(format: "%.6f", offset)
        return "{\"at\":\(at),\"topic\":\(quoted(topic)),\"header\":\(headerJSON),\"body\":\(bodyJSON)}"
    }

    static func quoted(_ text: String) -> String {
        (try? JSONEncoder().encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    }

    /// Reads one recording line; nil for a note line (gaps the tap saw). Throws on a line
    /// that is neither.
    public static func parse(_ line: Substring, lineNumber: Int) throws -> RecordedMessage? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw RecordingError(.invalidLine, "line \(lineNumber) is not a JSON object")
        }
        if object["note"] != nil { return nil }
        guard let topic = object["topic"] as? String, let headerObject = object["header"], let bodyObject = object["body"] else {
            throw RecordingError(.invalidLine, "line \(lineNumber) lacks topic, header or body")
        }
        let at = (object["at"] as? NSNumber)?.doubleValue ?? 0
        let header: BusHeader
        do {
            let headerData = try JSONSerialization.data(withJSONObject: headerObject)
            header = try BusHeader(jsonBytes: Array(headerData))
        } catch {
            throw RecordingError(.invalidHeader, "line \(lineNumber): the header is not a bus header: \(error)")
        }
        let body: Data
        if let text = bodyObject as? String {
            // A body that was not JSON was recorded as a string. (Bodies on the bus are objects.)
            body = Data(text.utf8)
        } else {
            body = try JSONSerialization.data(withJSONObject: bodyObject, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        }
        return RecordedMessage(at: at, topic: topic, header: header, body: body)
    }

    /// Reads a whole recording, in order.
    public static func load(path: String) throws -> [RecordedMessage] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw RecordingError(.unreadable, "cannot read the recording \(path): \(error.localizedDescription)")
        }
        var messages: [RecordedMessage] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
            if let message = try parse(line, lineNumber: index + 1) { messages.append(message) }
        }
        return messages
    }
}

/// A recording that cannot be replayed.
public typealias RecordingError = CodedError<RecordingErrorCode>

/// What is wrong with a recording.
public enum RecordingErrorCode: String, ErrorCode {
    /// A line is not a JSON object, or lacks the topic, header or body.
    case invalidLine
    /// A line's header is not a bus header.
    case invalidHeader
    /// The file cannot be read.
    case unreadable
}
