import Crypto
public import Foundation
public import OpenClawWire
public import TetherSchema
public import TetherWire

/// Reads an OpenClaw `chat.history` answer against what Tether knows: which of its messages
/// the gateway has, and which entries of the gateway's transcript are not yet in Tether's.
///
/// The gateway's transcript carries no message id or idempotency key, so identity is decided
/// here (docs/WIRE.md, "Matching history"):
/// - a user message in history is one Tether sent when its text is the same and the gateway
///   received it no earlier than Tether made it (times corrected by the clock offset measured
///   at the handshake, with ``tolerance``); Tether's messages are matched oldest first, in
///   order, each to one history entry;
/// - the last assistant message after a user message is that message's reply, `<id>:reply`
///   (the id a live `final` of the same run gets), earlier ones after it `<id>:reply-<n>`;
/// - any other entry (sent by another client, or before this window) gets an id made of its
///   role, time and text, `oc:<hash>`, the same on every reload.
public struct HistoryMerge: Sendable, Equatable {
    /// A user message Tether sent (or knows from its transcript).
    public struct Sent: Sendable, Equatable {
        public var id: MessageID
        public var text: String
        public var createdAt: Date

        public init(id: MessageID, text: String, createdAt: Date) {
            self.id = id
            self.text = text
            self.createdAt = createdAt
        }
    }

    /// How far a gateway time may lie before Tether's own, after the offset: clock jitter
    /// and the offset's own error.
    public static let tolerance: TimeInterval = 2

    /// Tether's messages the gateway has.
    public var found: Set<MessageID> = []
    /// Entries to publish: not in the transcript, or in it with other content or unfinished.
    public var entries: [TranscriptEntry] = []
    /// Replies found for Tether's messages, by the message.
    public var replies: [MessageID: TranscriptEntry] = [:]
    /// When the window starts (Tether's clock), if the answer was cut at its limit: a message
    /// made before it and not found may still be in the gateway's transcript.
    public var windowStart: Date?

    /// The reply id of a message (a run of it).
    public static func replyID(of message: MessageID) -> MessageID { MessageID(message.value + ":reply") }

    /// - Parameters:
    ///   - sent: Tether's user messages, oldest first.
    ///   - clockOffset: the gateway's clock minus Tether's, in seconds.
    ///   - known: the transcript's content and status for an id, nil when it has none.
    public static func merge(
        _ history: [ChatTranscriptMessage], limit: Int, sent: [Sent], clockOffset: TimeInterval, botName: String,
        known: (MessageID) -> (content: String, status: DeliveryStatus)?
    ) -> HistoryMerge {
        var result = HistoryMerge()
        func local(_ message: ChatTranscriptMessage) -> Date? {
            message.timestamp.map { Date(timeIntervalSince1970: Double($0) / 1000 - clockOffset) }
        }
        // Identities of the user messages, matched in order.
        var identities: [Int: MessageID] = [:]
        var nextCandidate = 0
        for (index, message) in history.enumerated() where message.role == "user" {
            let text = message.text
            let received = local(message)
            var matched: Int?
            for candidate in nextCandidate..<sent.count where sent[candidate].text == text {
                guard let received, received >= sent[candidate].createdAt.addingTimeInterval(-tolerance) else { continue }
                matched = candidate
                break
            }
            if let matched {
                identities[index] = sent[matched].id
                result.found.insert(sent[matched].id)
                nextCandidate = matched + 1
            } else {
                identities[index] = contentID(message)
            }
        }
        // Replies: the assistant messages with text between one user message and the next.
        var owner: MessageID?
        var span: [Int] = []
        func closeSpan() {
            defer { span = [] }
            guard !span.isEmpty else { return }
            for (position, index) in span.enumerated() {
                let message = history[index]
                let id: MessageID
                if let owner {
                    id = position == span.count - 1 ? replyID(of: owner) : MessageID(owner.value + ":reply-\(position + 1)")
                } else {
                    id = contentID(message)
                }
                let entry = TranscriptEntry(
                    id: id, sender: .bot(name: botName), content: message.text, timestamp: local(message) ?? Date(timeIntervalSince1970: 0),
                    status: .received, inReplyTo: owner, attribution: owner == nil ? nil : .history)
                if let owner, position == span.count - 1, result.found.contains(owner) { result.replies[owner] = entry }
                if let existing = known(id), existing.content == entry.content, existing.status == .received { continue }
                result.entries.append(entry)
            }
        }
        for (index, message) in history.enumerated() {
            switch message.role {
            case "user":
                closeSpan()
                let id = identities[index]
                owner = id
                guard let id, !result.found.contains(id), known(id) == nil else { continue }
                result.entries.append(
                    TranscriptEntry(
                        id: id, sender: .user, content: message.text, timestamp: local(message) ?? Date(timeIntervalSince1970: 0), status: .delivered))
            case "assistant" where !message.text.isEmpty:
                span.append(index)
            default:
                break
            }
        }
        closeSpan()
        if history.count >= limit, let first = history.first.flatMap(local) { result.windowStart = first }
        return result
    }

    /// The texts a gateway's overflow summary turn names: the messages its busy session's queue
    /// dropped at its cap, one line each (`- [Thu 2026-11-26 08:14 UTC] <text>`).
    public static func droppedAtCap(_ history: [ChatTranscriptMessage]) -> Set<String> {
        var dropped: Set<String> = []
        for message in history where message.role == "user" {
            let text = message.text
            guard text.contains("[Queue overflow] Dropped "), let summary = text.range(of: "Summary:\n") else { continue }
            // A line per message; a message of several lines continues until the next "- [".
            var current: String?
            for line in text[summary.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix("- ["), let close = line.range(of: "] ") {
                    if let current { dropped.insert(current) }
                    current = String(line[close.upperBound...])
                } else if let text = current {
                    current = text + "\n" + line
                }
            }
            if let current { dropped.insert(current) }
        }
        return dropped
    }

    /// The id of an entry Tether did not send: the same for the same role, time and text.
    static func contentID(_ message: ChatTranscriptMessage) -> MessageID {
        let key = "\(message.role)|\(message.timestamp.map(String.init) ?? "-")|\(message.text)"
        let digest = SHA256.hash(data: Data(key.utf8)).prefix(10).lowercaseHex
        return MessageID("oc:" + digest)
    }
}
