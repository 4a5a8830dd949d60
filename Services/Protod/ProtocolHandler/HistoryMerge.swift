import Crypto
public import Foundation
public import OpenClawWire
public import TetherSchema
public import TetherWire

/// Reads an OpenClaw `chat.history` answer against what Tether knows: which of its messages
/// the gateway has, which replies answer them for certain, and which entries of the gateway's
/// transcript are not yet in Tether's.
///
/// The 2026.4 gateway's transcript carries no message id, idempotency key or run id on a user
/// entry (today's keys a turn's user entry `<key>:user`, and that entry is its message,
/// exactly), so identity is decided here (docs/WIRE.md, "Matching history"):
/// - a user entry is one of Tether's messages when its text is the message's (or the last part
///   of the gateway's rewrite of it after a restart), the gateway received it no earlier than
///   Tether made it (times corrected by the clock offset, with ``tolerance``), and its sender
///   label, where it has one, is Tether's; Tether's messages are matched oldest first, in order;
///   entries another client sent keep their label as the entry's author;
/// - a reply is attached to a message only when that is certain: the message's entry is the
///   only one it could be (no other entry, and no other message of Tether's, of the same text in
///   reach), and the turn before it had ended (the gateway wrote something after it), so that
///   nothing of another run can follow the message. Then the last assistant entry of the turn
///   is `<id>:reply` (the id a live `final` of the same run gets), earlier ones `<id>:reply-<n>`.
///   Otherwise the turn's entries are shown without a claim and the message is said
///   ``unclaimed``;
/// - the entry the gateway injects for an aborted run names its run, and is that run's reply,
///   incomplete; the model's own partial entry of the run is the same reply;
/// - every other entry gets an id of its own, `oc:<digest>` of the gateway's entry id (or of
///   its role, time and text where it has none): the same on every reload. An entry already
///   published keeps the id it was published under, whatever window it is read in again;
/// - a tool call (an assistant entry's `toolCall` block, with the `toolResult` entry of the same
///   call id) is the entry `tool:<call id>`, the id its live events gave it: shown once, and
///   published again only when the history adds to what is shown (its output, its end, the
///   thinking before it); the time it took and its arguments, as the live events gave them, stay;
/// - an entry's `thinking` blocks go with its reply, or, in an entry with no text, with its first
///   tool call; a reply already shown is published again with its thinking, under its own id.
public struct HistoryMerge: Sendable, Equatable {
    /// A user message Tether sent (or knows from its transcript).
    public struct Sent: Sendable, Equatable {
        public var id: MessageID
        public var text: String
        public var createdAt: Date
        /// The session it was sent in (canonical); nil when not known.
        public var session: String?
        /// The images it carried, when protod holds them, to be written again with it if the
        /// gateway lost it.
        public var attachments: [Attachment]
        /// How many images it carried (known from its transcript entry even when their bytes
        /// are only in the outbox).
        public var imageCount: Int

        public init(id: MessageID, text: String, createdAt: Date, session: String? = nil, attachments: [Attachment] = [], imageCount: Int? = nil) {
            self.id = id
            self.text = text
            self.createdAt = createdAt
            self.session = session
            self.attachments = attachments
            self.imageCount = imageCount ?? attachments.count
        }
    }

    /// What an entry already published holds besides its content.
    public struct KnownDetail: Sendable, Equatable {
        public var tool: ToolCall?
        public var thinking: String?
        /// Why an incomplete entry is incomplete, as it was said when it ended.
        public var incompleteBecause: String?

        public init(tool: ToolCall? = nil, thinking: String? = nil, incompleteBecause: String? = nil) {
            self.tool = tool
            self.thinking = thinking
            self.incompleteBecause = incompleteBecause
        }
    }

    /// What Tether knows when it reads a history answer.
    public struct Context {
        /// Tether's user messages, oldest first.
        public var sent: [Sent]
        /// The gateway's clock minus Tether's, in seconds.
        public var clockOffset: TimeInterval
        public var botName: String
        /// The label the gateway gives the messages Tether sends; nil when not known.
        public var ownLabel: String?
        /// The transcript's content and status for an id, nil when it has none.
        public var known: (MessageID) -> (content: String, status: DeliveryStatus)?
        /// The id an entry of the gateway's (by its ``TranscriptEntry/gatewayID``) was published under.
        public var published: (String) -> MessageID?
        /// The tool call and thinking the transcript holds for an id, nil when it has neither.
        public var detail: (MessageID) -> KnownDetail?
        /// The message whose run asked for an exec approval, by its id, when known.
        public var followUpOwner: (String) -> MessageID?

        public init(
            sent: [Sent], clockOffset: TimeInterval, botName: String, ownLabel: String? = nil,
            known: @escaping (MessageID) -> (content: String, status: DeliveryStatus)? = { _ in nil },
            published: @escaping (String) -> MessageID? = { _ in nil }, detail: @escaping (MessageID) -> KnownDetail? = { _ in nil },
            followUpOwner: @escaping (String) -> MessageID? = { _ in nil }
        ) {
            self.detail = detail
            self.followUpOwner = followUpOwner
            self.sent = sent
            self.clockOffset = clockOffset
            self.botName = botName
            self.ownLabel = ownLabel
            self.known = known
            self.published = published
        }
    }

    /// How far a gateway time may lie before Tether's own, after the offset: clock jitter
    /// and the offset's own error.
    public static let tolerance: TimeInterval = 2

    /// Tether's messages the gateway has.
    public var found: Set<MessageID> = []
    /// Those found by the key of their turn (today's gateways), not by their text.
    public var foundByKey: Set<MessageID> = []
    /// Entries to publish: not in the transcript, or in it with other content or unfinished.
    public var entries: [TranscriptEntry] = []
    /// Replies found for Tether's messages, for certain, by the message: whole, or incomplete.
    public var replies: [MessageID: TranscriptEntry] = [:]
    /// Tether's messages whose turn in the history has a reply that cannot be attached to
    /// them for certain: the reply shown without a claim, by the message.
    public var unclaimed: [MessageID: MessageID] = [:]
    /// When the window starts (Tether's clock), if the answer was cut at its limit: a message
    /// made before it and not found may still be in the gateway's transcript.
    public var windowStart: Date?

    /// The reply id of a message (a run of it).
    public static func replyID(of message: MessageID) -> MessageID { MessageID(message.value + ":reply") }

    public static func merge(_ history: [ChatTranscriptMessage], limit: Int, context: Context) -> HistoryMerge {
        var result = HistoryMerge()
        let cut = history.count >= limit
        func local(_ message: ChatTranscriptMessage) -> Date? {
            message.timestamp.map { Date(timeIntervalSince1970: Double($0) / 1000 - context.clockOffset) }
        }
        func time(_ message: ChatTranscriptMessage) -> Date { local(message) ?? Date(timeIntervalSince1970: 0) }
        let sent = context.sent
        let users = history.indices.filter { history[$0].role == "user" }
        /// The text a user entry stands for: the new message of a rewrite, or its text.
        let texts = Dictionary(uniqueKeysWithValues: users.map { ($0, OpenClawProtocol.rewriteParts(of: history[$0].text).last ?? "") })
        /// Entries another client sent, by their label.
        func author(_ index: Int) -> String? {
            guard let label = history[index].senderLabel, let own = context.ownLabel, label != own else { return nil }
            return label
        }
        func reaches(_ index: Int, _ candidate: Int) -> Bool {
            guard let received = local(history[index]) else { return false }
            return received >= sent[candidate].createdAt.addingTimeInterval(-tolerance)
        }

        // Today's gateways key a turn's user entry with its `chat.send` (`<key>:user`): such an
        // entry is that message, exactly, whatever its text.
        var owners: [Int: Int] = [:]  // history index → sent index
        var taken: Set<Int> = []  // the sent indices owners holds, to look up in constant time
        let byKey = Dictionary(sent.indices.map { (ChatTranscriptMessage.userTurnKey(of: sent[$0].id.value), $0) }, uniquingKeysWith: { first, _ in first })
        var keyed: Set<Int> = []
        for index in users {
            guard let key = history[index].turnKey, let candidate = byKey[key], !taken.contains(candidate) else { continue }
            owners[index] = candidate
            taken.insert(candidate)
            keyed.insert(index)
            result.found.insert(sent[candidate].id)
            result.foundByKey.insert(sent[candidate].id)
        }
        // Tether's messages, matched oldest first, in order, each to one entry.
        var nextCandidate = 0
        for index in users where author(index) == nil && owners[index] == nil && history[index].turnKey == nil {
            let text = texts[index]
            guard
                let matched = (nextCandidate..<sent.count).first(where: { !taken.contains($0) && same(text, sent[$0].text) && reaches(index, $0) })
            else { continue }
            owners[index] = matched
            taken.insert(matched)
            result.found.insert(sent[matched].id)
            nextCandidate = matched + 1
        }
        // Turns do not always run in the order their messages were sent (a message released from
        // the gateway's queue, one written again after a restart): a message still unmatched
        // takes the first free entry of its text within its reach, whatever comes before it.
        for candidate in sent.indices where !taken.contains(candidate) {
            guard
                let index = users.first(where: { index in
                    owners[index] == nil && history[index].turnKey == nil && author(index) == nil && same(texts[index], sent[candidate].text)
                        && reaches(index, candidate)
                })
            else { continue }
            owners[index] = candidate
            taken.insert(candidate)
            result.found.insert(sent[candidate].id)
        }
        let matchedSent = taken
        /// A match is certain when nothing else of the same text could take its place: no other
        /// entry that may be Tether's within the message's reach, no other message of Tether's
        /// that the entry could be.
        func certain(_ index: Int) -> Bool {
            guard let candidate = owners[index] else { return false }
            if keyed.contains(index) { return true }
            let text = sent[candidate].text
            let rivalEntry = users.contains { other in
                other != index && owners[other] == nil && author(other) == nil && same(texts[other], text) && reaches(other, candidate)
            }
            let rivalMessage = sent.indices.contains { other in
                other != candidate && !matchedSent.contains(other) && same(texts[index], sent[other].text) && reaches(index, other)
            }
            return !rivalEntry && !rivalMessage
        }

        // Turns: a user entry and the entries after it, up to the next user entry; a turn with
        // any entry after its user entry has ended.
        var members: [Int: [Int]] = [:]  // a turn's user entry → the entries after it
        var current: Int?
        for index in history.indices {
            if history[index].role == "user" {
                current = index
            } else if let turn = current {
                members[turn, default: []].append(index)
            }
        }
        /// The turn before a user entry ended before it began, or was the one the gateway merged
        /// into it: nothing of another run can follow the entry.
        func alone(_ position: Int) -> Bool {
            let index = users[position]
            // The window's first: the session's first, or after the end of a turn the window cut.
            guard position > 0 else { return !cut || index > 0 }
            let previous = users[position - 1]
            if members[previous] != nil { return true }
            let merged = OpenClawProtocol.rewriteParts(of: history[index].text).dropLast()
            return merged.contains(history[previous].text)
        }

        func identity(of index: Int) -> MessageID {
            context.published(gatewayID(history[index])) ?? contentID(history[index])
        }
        var published: [(index: Int, entry: TranscriptEntry)] = []
        var publishedIDs: Set<MessageID> = []
        func publish(_ entry: TranscriptEntry, at index: Int) {
            guard !publishedIDs.contains(entry.id) else { return }
            var entry = entry
            if let existing = context.known(entry.id), existing.status.rank >= entry.status.rank {
                // The gateway shortens long entries in history: the whole text Tether has stays.
                let same = existing.content == entry.content || shortened(entry.content, of: existing.content)
                let newThinking = entry.thinking != nil && context.detail(entry.id)?.thinking != entry.thinking
                if same && !newThinking { return }
                if same { entry.content = existing.content }
                // Incomplete already, for a reason said when it ended (stopped with chat.abort):
                // the history's general words do not replace it.
                if entry.status == .incomplete, existing.status == .incomplete, let reason = context.detail(entry.id)?.incompleteBecause {
                    entry.detail = reason
                }
            }
            published.append((index, entry))
            publishedIDs.insert(entry.id)
        }
        func botEntry(_ index: Int, status: DeliveryStatus) -> TranscriptEntry {
            let message = history[index]
            return TranscriptEntry(
                id: identity(of: index), sender: .bot(name: context.botName), content: message.text, timestamp: time(message), status: status,
                detail: status == .incomplete ? abortedDetail : nil, gatewayID: gatewayID(message), thinking: message.thinking)
        }
        /// A reply published live under the message's reply id, published again when the history
        /// brings its thinking.
        func thinkingOfLiveReply(_ entry: TranscriptEntry, of owner: MessageID, at index: Int) {
            guard let thinking = entry.thinking, let live = context.known(replyID(of: owner)), context.detail(replyID(of: owner))?.thinking != thinking
            else { return }
            publish(
                TranscriptEntry(
                    id: replyID(of: owner), sender: .bot(name: context.botName), content: live.content, timestamp: entry.timestamp, status: live.status,
                    inReplyTo: owner, attribution: .gateway, gatewayID: entry.gatewayID, thinking: thinking),
                at: index)
        }

        // User entries another client sent, or that Tether's transcript lacks: by their label,
        // and an entry without one that is none of Tether's messages is another client's too.
        for index in users where owners[index] == nil {
            let message = history[index]
            // The gateway's own prompt after an approval is the gateway's, with the command's outcome.
            let prompt = ApprovalFollowUps.isPrompt(message.text)
            let sender = prompt ? ApprovalFollowUps.author : author(index) ?? (message.senderLabel == nil ? anotherClient : nil)
            publish(
                TranscriptEntry(
                    id: identity(of: index), sender: .user, content: prompt ? ApprovalFollowUps.words(ofPrompt: message.text) : texts[index] ?? message.text,
                    timestamp: time(message), status: .delivered, author: sender, gatewayID: gatewayID(message)),
                at: index)
        }

        // The entry the gateway injects for an aborted run names the run: for one of Tether's,
        // its message's reply, certain; the model's own partial entry of the run is the same reply.
        let runs = Dictionary(sent.map { ($0.id.value, $0.id) }, uniquingKeysWith: { first, _ in first })
        let injected = Set(history.indices.filter { history[$0].abortedRunID != nil || history[$0].model == ChatTranscriptMessage.gatewayInjected })
        var abortedRuns: [MessageID: Int] = [:]
        for index in injected {
            if let run = history[index].abortedRunID, let owner = runs[run] { abortedRuns[owner] = index }
        }

        // Replies, turn by turn.
        for (position, turn) in users.enumerated() {
            let owner = owners[turn].map { sent[$0].id }
            let claimed = owner.map { abortedRuns[$0] != nil || certain(turn) && alone(position) } ?? false
            let spoken = (members[turn] ?? []).filter { index in
                let message = history[index]
                return message.role == "assistant" && !message.text.isEmpty && !injected.contains(index)
            }
            if let owner, spoken.isEmpty, let index = abortedRuns[owner] {
                // Stopped before the model's own entry was written: the injected one is all there is.
                var entry = botEntry(index, status: .incomplete)
                (entry.id, entry.inReplyTo, entry.attribution) = (replyID(of: owner), owner, .history)
                result.replies[owner] = entry
                publish(entry, at: index)
            }
            for (position, index) in spoken.enumerated() {
                let message = history[index]
                let last = position == spoken.count - 1
                let stopped = message.stopReason == "aborted" || last && owner.map { abortedRuns[$0] != nil } == true
                var entry = botEntry(index, status: stopped ? .incomplete : .received)
                let ownReply = owner.map { last ? replyID(of: $0) : MessageID($0.value + ":reply-\(position + 1)") }
                let earlier = context.published(gatewayID(message))
                if owner == nil, last, let approval = ApprovalFollowUps.approval(inPrompt: history[turn].text) {
                    // The gateway's turn after an approval: its reply, as published live, answers the message that asked.
                    (entry.id, entry.inReplyTo, entry.attribution) = (ApprovalFollowUps.replyID(of: approval), context.followUpOwner(approval), .gateway)
                } else if let owner, let ownReply, claimed, earlier == nil || earlier == ownReply {
                    (entry.id, entry.inReplyTo, entry.attribution) = (ownReply, owner, .history)
                    if last { result.replies[owner] = entry }
                    // The reply shown live, by the gateway's word: only its thinking is new.
                    if last, earlier == nil, let live = context.known(ownReply), live.content == entry.content || shortened(entry.content, of: live.content) {
                        thinkingOfLiveReply(entry, of: owner, at: index)
                        continue
                    }
                } else if let owner, last {
                    // Published live under the message's reply id already: the same reply.
                    if earlier == nil, let live = context.known(replyID(of: owner)), live.content == entry.content {
                        result.replies[owner] = entry
                        thinkingOfLiveReply(entry, of: owner, at: index)
                        continue
                    }
                    if earlier == replyID(of: owner) {
                        result.replies[owner] = entry
                        thinkingOfLiveReply(entry, of: owner, at: index)
                        continue
                    }
                    result.unclaimed[owner] = entry.id
                }
                publish(entry, at: index)
            }
        }

        // Another client's aborted run: its injected entry, listed before the run's user entry,
        // unless the model's own partial entry of the run follows that user entry.
        for index in injected.sorted() where !history[index].text.isEmpty {
            if let run = history[index].abortedRunID, runs[run] != nil { continue }
            if let next = users.first(where: { $0 > index }),
                members[next]?.contains(where: { history[$0].stopReason == "aborted" }) == true
            {
                continue
            }
            publish(botEntry(index, status: .incomplete), at: index)
        }

        // What comes before the window's first user entry belongs to a turn the window cut off:
        // shown only when the window holds the session's whole transcript.
        if !cut {
            for index in history.indices.prefix(while: { history[$0].role != "user" })
            where history[index].role == "assistant" && !history[index].text.isEmpty && !injected.contains(index) {
                publish(botEntry(index, status: history[index].stopReason == "aborted" ? .incomplete : .received), at: index)
            }
        }
        // Tool calls, each with its result where the history has one.
        var results: [String: Int] = [:]
        for index in history.indices where history[index].role == "toolResult" {
            if let call = history[index].toolCallID { results[call] = index }
        }
        for index in history.indices where history[index].role == "assistant" {
            let message = history[index]
            for (position, block) in message.toolCalls.enumerated() {
                let id = ToolCall.entryID(of: block.id)
                let answer = results[block.id].map { history[$0] }
                let known = context.detail(id)
                var call = ToolCall(
                    callID: block.id, name: block.name, arguments: ToolCallText.arguments(block.arguments, limit: ToolCall.argumentsLimit),
                    state: answer.map { $0.isError == true ? .error : .ok } ?? .unfinished,
                    durationMilliseconds: answer.flatMap { answer in
                        guard let end = answer.timestamp, let start = message.timestamp, end >= start else { return nil }
                        return end - start
                    },
                    output: answer.map { ToolCall.kept($0.text) })
                if let live = known?.tool {
                    // What the live events said stays: they timed the call itself.
                    call.arguments = live.arguments
                    call.durationMilliseconds = live.durationMilliseconds ?? call.durationMilliseconds
                    if answer == nil { call.state = live.state }
                    call.output = call.output ?? live.output
                }
                let thinking = position == 0 && message.text.isEmpty ? message.thinking : nil
                guard known?.tool != call || (thinking != nil && known?.thinking != thinking) else { continue }
                // A call the transcript has not shown yet: not ended, while its run goes on.
                if known?.tool == nil, answer == nil, index == history.indices.last { call.state = .running }
                published.append(
                    (
                        index,
                        TranscriptEntry(
                            id: id, sender: .bot(name: context.botName), content: call.summary, timestamp: time(message), status: .received, tool: call,
                            thinking: thinking ?? known?.thinking)
                    ))
            }
        }
        result.entries = published.enumerated().sorted { ($0.element.index, $0.offset) < ($1.element.index, $1.offset) }.map { $0.element.entry }
        if cut, let first = history.first.flatMap(local) { result.windowStart = first }
        return result
    }

    /// The author of a message in the gateway's transcript that is none of Tether's and has no label.
    public static let anotherClient = "another client"

    /// Why a reply the history shows cut off is incomplete.
    static let abortedDetail = "the reply was stopped before it was finished"

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

    /// The gateway's own id of an entry: its `__openclaw.id`, or a digest of its role, time and
    /// text where it gives none.
    static func gatewayID(_ message: ChatTranscriptMessage) -> String {
        if let id = message.entryID, !id.isEmpty { return id }
        return "digest:" + digest("\(message.role)|\(message.timestamp.map(String.init) ?? "-")|\(message.text)")
    }

    /// The id of an entry Tether did not send: the same for the same gateway entry.
    static func contentID(_ message: ChatTranscriptMessage) -> MessageID {
        if let id = message.entryID, !id.isEmpty { return MessageID("oc:" + digest("id|" + id)) }
        return MessageID("oc:" + digest("\(message.role)|\(message.timestamp.map(String.init) ?? "-")|\(message.text)"))
    }

    private static func digest(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).prefix(10).lowercaseHex
    }
}
