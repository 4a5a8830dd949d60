import Foundation
import Logging
import NIOWebSocket
import OpenClawWire
import TetherService

/// Session transcripts: in memory, and in the state directory across restarts.
extension OpenClawGateway {
    // MARK: Transcripts

    func sessionID(_ key: String) -> String {
        if let id = sessionIDs[key] { return id }
        let id = UUID().uuidString.lowercased()
        sessionIDs[key] = id
        return id
    }

    /// Writes a run's user entry held back in a session with no reply yet: its first reply is
    /// about to be written.
    func writeUserEntry(of runID: String) {
        guard let run = activeRuns[runID], let entry = run.unwrittenUserEntry else { return }
        activeRuns[runID]?.userEntryID = append(entry, to: run.sessionKey)
        activeRuns[runID]?.unwrittenUserEntry = nil
        consumeInput(key: run.inputKey)
    }

    /// Adds an entry at the end of a session's transcript, with an id and place of its own
    /// (`__openclaw`, as history shows them); returns its id.
    @discardableResult
    func append(_ message: ChatTranscriptMessage, to sessionKey: String) -> String {
        var message = message
        let id = Self.newEntryID()
        message.entryID = id
        message.entrySequence = (transcripts[sessionKey]?.count ?? 0) + 1
        transcripts[sessionKey, default: []].append(message)
        guard let directory = settings.stateDirectory, var line = try? JSONEncoder().encode(message) else { return id }
        line.append(0x0A)
        let path = Self.transcriptPath(directory, sessionKey)
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(line)
            try? handle.close()
        }
        return id
    }

    /// Adds an entry before another (at the end when there is no such entry) and writes the
    /// session's transcript anew.
    func insert(_ message: ChatTranscriptMessage, before entryID: String?, in sessionKey: String) {
        var entries = transcripts[sessionKey] ?? []
        guard let position = entries.firstIndex(where: { $0.entryID == entryID }) else {
            append(message, to: sessionKey)
            return
        }
        var message = message
        message.entryID = Self.newEntryID()
        entries.insert(message, at: position)
        for index in entries.indices { entries[index].entrySequence = index + 1 }
        transcripts[sessionKey] = entries
        guard let directory = settings.stateDirectory else { return }
        let lines = entries.compactMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) + "\n" }.joined()
        _ = FileManager.default.createFile(atPath: Self.transcriptPath(directory, sessionKey), contents: Data(lines.utf8))
    }

    /// Empties a session's transcript (`/new`, `/reset`), in memory and in the state directory.
    func clearTranscript(_ sessionKey: String) {
        transcripts[sessionKey] = []
        guard let directory = settings.stateDirectory else { return }
        _ = FileManager.default.createFile(atPath: Self.transcriptPath(directory, sessionKey), contents: Data())
    }

    /// The most UTF-16 units of an entry's text `chat.history` returns, as the gateway's
    /// default (`DEFAULT_CHAT_HISTORY_TEXT_MAX_CHARS`, counted as JavaScript's `length`).
    static let historyTextLimit = 12_000

    /// An entry as `chat.history` returns it: a longer text cut at ``historyTextLimit`` and
    /// marked, as the gateway does. The gateway can cut an emoji's surrogate pair in two and
    /// send the first half alone; this one cuts before the pair.
    static func shortenedForHistory(_ message: ChatTranscriptMessage, limit: Int = historyTextLimit) -> ChatTranscriptMessage {
        let text = message.text
        // As the gateway: tool calls and tool results are never cut.
        guard text.utf16.count > limit, message.role != "toolResult", message.toolCalls.isEmpty else { return message }
        var shortened = message
        var kept = String.UnicodeScalarView()
        var units = 0
        for scalar in text.unicodeScalars {
            units += UTF16.width(scalar)
            guard units <= limit else { break }
            kept.append(scalar)
        }
        shortened.content = .array([.object(["type": .string("text"), "text": .string(String(kept) + "\n...(truncated)...")])])
        return shortened
    }

    /// A transcript entry's id, eight hex digits as the gateway's.
    private static func newEntryID() -> String { String(UUID().uuidString.lowercased().filter(\.isHexDigit).prefix(8)) }

    static func transcriptPath(_ directory: String, _ sessionKey: String) -> String {
        let safe = Base64URL.encode(Data(sessionKey.utf8))
        return directory + "/session-\(safe).jsonl"
    }

    static func loadTranscripts(_ directory: String) -> [String: [ChatTranscriptMessage]] {
        var transcripts: [String: [ChatTranscriptMessage]] = [:]
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for file in files where file.hasPrefix("session-") && file.hasSuffix(".jsonl") {
            let encoded = String(file.dropFirst("session-".count).dropLast(".jsonl".count))
            guard let keyData = Base64URL.decode(encoded), let key = String(data: keyData, encoding: .utf8),
                let text = try? String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            else { continue }
            transcripts[canonical(key), default: []] += text.split(separator: "\n").compactMap {
                try? JSONDecoder().decode(ChatTranscriptMessage.self, from: Data($0.utf8))
            }
        }
        return transcripts
    }
}
