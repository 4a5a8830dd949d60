import Foundation
import OpenClawWire
import TetherService

/// `chat.history`: a page of a session's last entries, or, on today's gateway, what came after
/// a cursor (`chat-history-handler.ts`, `chat-history-delta.ts`).
extension OpenClawGateway {
    // MARK: History

    /// The most events a catch-up carries (`CHAT_HISTORY_DELTA_MAX_EVENTS`); past it, `reset`.
    static let catchUpEventLimit = 200
    /// The most bytes a catch-up's messages take (`CHAT_HISTORY_DELTA_MAX_BYTES`); past it, `reset`.
    static let catchUpByteLimit = 1_000_000

    func history(_ raw: JSONValue?) -> (ok: Bool, payload: JSONValue?, error: GatewayErrorShape?) {
        guard let params = try? raw?.decode(ChatHistoryParams.self) else { return (false, nil, Self.invalid("invalid chat.history params")) }
        if let refusal = Self.receiptQueryError(params.inputRunIds) { return (false, nil, refusal) }
        if params.cursor != nil, raw?["offset"] != nil || raw?["messageId"] != nil {
            return (false, nil, Self.invalid("cursor cannot be used with offset or messageId"))
        }
        let key = Self.canonical(params.sessionKey)
        let entries = transcripts[key] ?? []
        let textLimit = min(params.maxChars ?? Self.historyTextLimit, Self.historyTextLimit)
        let additions = historyAdditions(for: params, session: key)
        if let cursor = params.cursor {
            return (true, try? JSONValue(encoding: catchUp(after: cursor, in: entries, textLimit: textLimit, additions: additions)), nil)
        }
        let limit = min(max(params.limit ?? 200, 1), 1000)
        let messages = entries.suffix(limit).map { Self.shortenedForHistory($0, limit: textLimit) }
        // The key as the client sent it; an unknown session has no id.
        var result = ChatHistoryResult(sessionKey: params.sessionKey, sessionId: transcripts[key] == nil ? nil : sessionID(key), messages: messages)
        if let additions {
            result.inputReceipts = additions.inputReceipts
            result.pendingInputs = additions.pendingInputs
            result.sessionInfo = additions.sessionInfo
            result.inFlightRun = additions.inFlightRun
        }
        if settings.release.givesCursors { result.deltaCursor = .string(Self.cursor(at: entries)) }
        return (true, try? JSONValue(encoding: result), nil)
    }

    /// What came after `cursor`: `reset` when the cursor is not this transcript's (rewritten
    /// since, or another session's), or the gap is over 200 events or 1 MB.
    private func catchUp(after cursor: JSONValue, in entries: [ChatTranscriptMessage], textLimit: Int, additions: ChatHistoryResult?) -> ChatHistoryResult {
        let reset = ChatHistoryResult(sessionKey: nil, sessionId: nil, messages: [], kind: "reset")
        guard settings.release.givesCursors, let text = cursor.stringValue, let start = Self.position(of: text, in: entries) else { return reset }
        let gap = entries[start...].map { Self.shortenedForHistory($0, limit: textLimit) }
        guard gap.count <= Self.catchUpEventLimit else { return reset }
        let bytes = gap.reduce(2) { $0 + ((try? JSONEncoder().encode($1).count) ?? Self.catchUpByteLimit) + 1 }
        guard bytes <= Self.catchUpByteLimit else { return reset }
        return ChatHistoryResult(
            sessionKey: nil, sessionId: nil, messages: Array(gap), kind: "delta", deltaCursor: .string(Self.cursor(at: entries)),
            inputReceipts: additions?.inputReceipts, pendingInputs: additions?.pendingInputs, sessionInfo: additions?.sessionInfo,
            inFlightRun: additions?.inFlightRun)
    }

    /// The cursor at a transcript's end: how many entries it has and the last one's id, so
    /// that one rewritten since (an entry put before another, a reset) is told apart. It lasts
    /// across restarts, as the transcript does. Opaque to clients.
    static func cursor(at entries: [ChatTranscriptMessage]) -> String {
        Base64URL.encode(Data("v1:\(entries.count):\(entries.last?.entryID ?? "")".utf8))
    }

    /// Where the entries after a cursor start, or nil when it is not one of this transcript.
    static func position(of cursor: String, in entries: [ChatTranscriptMessage]) -> Int? {
        guard let data = Base64URL.decode(cursor), let text = String(data: data, encoding: .utf8) else { return nil }
        let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1", let count = Int(parts[1]), count >= 0, count <= entries.count else { return nil }
        let lastID = count == 0 ? "" : entries[count - 1].entryID ?? ""
        return lastID == parts[2] ? count : nil
    }
}
