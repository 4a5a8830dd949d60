public import Foundation
public import TetherBus
import TetherWire

/// One chat message as the gateway received it.
public struct RecordedMessage: Codable, Hashable, Sendable {
    public var id: String
    public var content: String
    public var receivedAt: Date
    /// The number of the WebSocket connection it arrived on, from 1.
    public var connection: Int
    /// OpenClaw: the images it carried that the gateway kept, each as `TYPE BYTES` (`image/png 12345`).
    public var images: [String]?

    public init(id: String, content: String, receivedAt: Date, connection: Int, images: [String]? = nil) {
        self.id = id
        self.content = content
        self.receivedAt = receivedAt
        self.connection = connection
        self.images = images
    }
}

/// Every chat message the gateway received, once each (or, as a seed-only peer, every time
/// it arrived), in arrival order; also appended to a JSON-lines file when one is
/// configured, so tests and people can read it.
actor GatewayRecord {
    private var messages: [RecordedMessage] = []
    private var seenIDs: Set<String> = []
    private let file: FileHandle?

    /// Opens the record, reading back what an earlier run of the gateway received, so that a
    /// message sent again after a gateway restart is still recognised.
    init(path: String?) throws {
        if let path {
            if let existing = try? String(contentsOfFile: path, encoding: .utf8) {
                let decoder = JSONDecoder()
                decoder.dateDecodingStrategy = .iso8601
                for line in existing.split(separator: "\n") {
                    guard let message = try? decoder.decode(RecordedMessage.self, from: Data(line.utf8)) else { continue }
                    if seenIDs.insert(message.id).inserted { messages.append(message) }
                }
            }
            if !FileManager.default.fileExists(atPath: path) {
                guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                    throw GatewayError(.recordFile, "cannot create the record file \(path)")
                }
            }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.seekToEnd()
            file = handle
        } else {
            file = nil
        }
    }

    /// Records a message; false when its id was recorded before (a retry, not a new message).
    /// With `keepingRepeats`, a repeated id is recorded again, as a peer that does not
    /// recognise repeats would take it.
    func add(_ message: ChatMessage, connection: Int, keepingRepeats: Bool = false) -> Bool {
        add(id: message.id.value, content: message.content, connection: connection, keepingRepeats: keepingRepeats)
    }

    /// Records a message by id and text (an OpenClaw `chat.send`: its idempotency key).
    func add(id: String, content: String, connection: Int, keepingRepeats: Bool = false, images: [String]? = nil) -> Bool {
        guard seenIDs.insert(id).inserted || keepingRepeats else { return false }
        let recorded = RecordedMessage(id: id, content: content, receivedAt: Date(), connection: connection, images: images)
        messages.append(recorded)
        if let file, var line = try? JSONEncoder.gateway.encode(recorded) {
            line.append(0x0A)
            try? file.write(contentsOf: line)
        }
        return true
    }

    func all() -> [RecordedMessage] {
        messages
    }
}

extension JSONEncoder {
    static var gateway: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }
}

/// An error starting the gateway.
public typealias GatewayError = CodedError<GatewayErrorCode>

/// What kept the development gateway from starting.
public enum GatewayErrorCode: String, ErrorCode {
    /// Its record of messages could not be created.
    case recordFile
}
