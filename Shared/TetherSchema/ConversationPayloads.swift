public import FoundationEssentials
public import TetherWire

/// Where a message stands in the conversation.
public enum DeliveryStatus: String, Codable, Sendable, CaseIterable {
    /// Committed to the outbox, not yet written to the gateway.
    case queued
    /// Written to the gateway, not yet acknowledged.
    case sent
    /// OpenClaw: the gateway answered that it has the message, but has not stored it yet: it
    /// holds it in memory, in the queue of a session busy with another reply, and runs it
    /// later (a gateway crash or its queue's cap can still lose it; Tether then says so).
    case accepted
    /// Acknowledged by the gateway; on OpenClaw, the gateway started a run for it or its
    /// transcript holds it.
    case delivered
    /// The gateway refused it, or it could not be sent (see the update's detail).
    case failed
    /// Not delivered before its expiry.
    case expired
    /// Cancelled by a front end, or superseded by a newer message of its kind.
    case cancelled
    /// A message from the bot, received whole.
    case received
    /// A streamed reply cut off before its final chunk.
    case incomplete
    /// Lost with a damaged outbox: no other store held the whole message (its images are kept
    /// in the outbox alone), so it cannot be sent again; if it was written before, the gateway
    /// may have it (the update's detail says which).
    case lost

    /// How far along a message is, so an older update never overwrites a newer one.
    public var rank: Int {
        switch self {
        case .queued: 0
        case .sent: 1
        case .accepted, .incomplete: 2
        case .delivered, .failed, .expired, .cancelled, .received, .lost: 3
        }
    }

    /// Whether nothing more will happen to the message.
    public var isFinal: Bool { rank == 3 }
}

/// How tether-protod knows which message a reply answers.
public enum ReplyAttribution: String, Codable, Sendable, CaseIterable {
    /// The gateway named it (`replyTo` on the wire): certain.
    case gateway
    /// The gateway did not say: the oldest message written and not yet answered, as a
    /// gateway that answers in order would. Likely, not certain.
    case order
    /// OpenClaw, from the gateway's history: the last assistant entry after the message there.
    /// Likely, not certain: other clients' turns and the gateway's follow-ups can come between.
    case history
}

/// One message of the conversation, as the transcript holds it.
public struct TranscriptEntry: Codable, Hashable, Sendable {
    public var id: MessageID
    public var sender: Sender
    public var content: String
    public var timestamp: Date
    public var status: DeliveryStatus
    /// For a bot's reply: the user message it answers, where known.
    public var inReplyTo: MessageID?
    /// How `inReplyTo` was found.
    public var attribution: ReplyAttribution?
    /// Why, in words, for an `incomplete` reply.
    public var detail: String?
    /// For a user message another client sent into the session: who sent it, as the gateway
    /// labels it (OpenClaw's `senderLabel`). Nil for this user's own messages.
    public var author: String?
    /// For an entry read from the gateway's transcript: the gateway's own id of it (OpenClaw's
    /// `__openclaw.id`, or a digest of its role, time and text where it gives none), so that
    /// the same entry is never added twice, whatever the window it is read in.
    public var gatewayID: String?
    /// OpenClaw: the session the entry belongs to (its canonical key); nil in the seed
    /// dialect, whose gateway has one conversation.
    public var session: String?
    /// The conversation revision tether-protod gave this change (see ``ConversationChange``);
    /// nil from a publisher that keeps no journal.
    public var revision: Int?
    /// On a user message: the images sent with it (name, type, size; never the bytes).
    public var attachments: [AttachmentNote]?
    /// OpenClaw: set when the entry is a tool the bot's agent ran while answering, not a
    /// message; its `content` then names the tool and its arguments (`read README.md`).
    public var tool: ToolCall?
    /// OpenClaw: what the model thought before it wrote this reply or called this tool, as the
    /// gateway's history keeps it (never sent live); front ends show it only when asked.
    public var thinking: String?

    public init(
        id: MessageID, sender: Sender, content: String, timestamp: Date, status: DeliveryStatus, inReplyTo: MessageID? = nil,
        attribution: ReplyAttribution? = nil, detail: String? = nil, author: String? = nil, gatewayID: String? = nil, session: String? = nil,
        revision: Int? = nil, attachments: [AttachmentNote]? = nil, tool: ToolCall? = nil, thinking: String? = nil
    ) {
        self.attachments = attachments
        self.id = id
        self.sender = sender
        self.content = content
        self.timestamp = timestamp
        self.status = status
        self.inReplyTo = inReplyTo
        self.attribution = attribution
        self.detail = detail
        self.author = author
        self.gatewayID = gatewayID
        self.session = session
        self.revision = revision
        self.tool = tool
        self.thinking = thinking
    }
}

/// A tool the bot's agent ran while answering (OpenClaw's `agent` events of stream `tool`, and
/// the `toolCall` and `toolResult` entries of its history).
public struct ToolCall: Codable, Hashable, Sendable {
    /// Where the call stands.
    public enum State: String, Codable, Sendable, CaseIterable {
        /// Started; no result yet.
        case running
        /// It ended and gave its result.
        case ok
        /// It ended in an error (the result is the error).
        case error
        /// The gateway's history holds the call but no result for it: the run stopped before
        /// the tool ended, or the result was lost.
        case unfinished
    }

    /// The gateway's id of the call (`toolCallId`).
    public var callID: String
    /// The tool's name, as the gateway normalises it (`read`, `exec`, …).
    public var name: String
    /// Its arguments, short: the one value when there is one, else `key=value` pairs, cut at
    /// ``argumentsLimit`` characters.
    public var arguments: String
    public var state: State
    /// How long it ran, by the gateway's clock (from the times of its start and result events,
    /// or of its history entries); nil when not known.
    public var durationMilliseconds: Int?
    /// What it returned, as text, when the gateway sent it: live only when the session's
    /// verbose level is `full`; in its history always. Cut at ``outputLimit`` characters.
    public var output: String?

    public init(callID: String, name: String, arguments: String, state: State, durationMilliseconds: Int? = nil, output: String? = nil) {
        self.callID = callID
        self.name = name
        self.arguments = arguments
        self.state = state
        self.durationMilliseconds = durationMilliseconds
        self.output = output
    }

    /// The most characters of arguments kept.
    public static let argumentsLimit = 120
    /// The most characters of output kept; the gateway itself sends at most 8,000 of each
    /// text block live, but its history keeps a tool's whole result.
    public static let outputLimit = 16000

    /// The transcript entry id of the call `callID`: the same live and from history.
    public static func entryID(of callID: String) -> MessageID { MessageID("tool:" + callID) }

    /// `read README.md`: what an entry of the call says to a reader that knows nothing of tools.
    public var summary: String { arguments.isEmpty ? name : "\(name) \(arguments)" }

    /// What a front end's one line says of the call after its ⚙: `read README.md · ok · 0.3 s`,
    /// `exec ls · running…`, `read x.md · error · 0.1 s`, `read y.md · no result`.
    public var words: String {
        let said =
            switch state {
            case .running: "running…"
            case .ok: "ok"
            case .error: "error"
            case .unfinished: "no result"
            }
        let took = state == .running ? nil : durationMilliseconds.map(Self.duration)
        return "\(summary) · \(said)" + (took.map { " · \($0)" } ?? "")
    }

    /// `0.3 s`, `12 s`, `2 min 5 s`.
    public static func duration(_ milliseconds: Int) -> String {
        if milliseconds < 10_000 {
            let tenths = (max(0, milliseconds) + 50) / 100
            return "\(tenths / 10).\(tenths % 10) s"
        }
        let seconds = milliseconds / 1000
        return seconds < 60 ? "\(seconds) s" : "\(seconds / 60) min \(seconds % 60) s"
    }

    /// An output cut to ``outputLimit`` characters, with a mark saying so.
    public static func kept(_ output: String) -> String {
        guard output.count > outputLimit else { return output }
        return String(output.prefix(outputLimit)) + "\n…(Tether keeps the first \(outputLimit) characters)"
    }
}

/// A sent message's delivery status changed.
public struct DeliveryUpdate: Codable, Hashable, Sendable {
    public var id: MessageID
    public var status: DeliveryStatus
    /// Why, in words, when it failed.
    public var detail: String?
    /// A reply that may answer this message but is shown without a claim: the gateway's
    /// history holds it after the message, and which message it answers is not certain.
    /// The message's run is over; no reply will be attached to it.
    public var unclaimedReply: MessageID?
    /// The conversation revision tether-protod gave this change; nil from a publisher that keeps no journal.
    public var revision: Int?
    /// Steered into the reply in progress: the message whose reply answers this one too.
    public var answeredWith: MessageID?

    public init(
        id: MessageID, status: DeliveryStatus, detail: String? = nil, unclaimedReply: MessageID? = nil, revision: Int? = nil, answeredWith: MessageID? = nil
    ) {
        self.id = id
        self.status = status
        self.detail = detail
        self.unclaimedReply = unclaimedReply
        self.revision = revision
        self.answeredWith = answeredWith
    }
}

/// A streamed reply grew: what was added (`chunk`) and where (`offset`), and now and then
/// the whole reply so far (`content`), so that the bytes a reply puts on the bus grow with
/// its length, not with its square. A reader follows a reply with ``following(_:)``.
/// protod publishes the first chunk at once, then at most one progress each 50 ms, and the end at once.
public struct StreamProgress: Codable, Hashable, Sendable {
    public var id: MessageID
    /// The gateway's index of the last chunk in the reply so far.
    public var chunkIndex: Int
    /// What the reply gained since the last progress of this reply: one chunk or several.
    public var chunk: String
    /// Where `chunk` goes: the UTF-8 length of the reply before it.
    public var offset: Int
    /// The whole reply so far, `chunk` included: sent with the first progress of a reply and
    /// whenever the reply has doubled since it was last sent whole; nil otherwise.
    public var content: String?
    public var isFinal: Bool
    /// The user message it answers, where known, and how that is known.
    public var inReplyTo: MessageID?
    public var attribution: ReplyAttribution?
    /// OpenClaw: the session of the reply (its canonical key); nil in the seed dialect.
    public var session: String?

    /// A progress carrying `chunk` at `offset`, with the whole reply when `content` is given.
    public init(
        id: MessageID, chunkIndex: Int, chunk: String, offset: Int, content: String?, isFinal: Bool, inReplyTo: MessageID? = nil,
        attribution: ReplyAttribution? = nil, session: String? = nil
    ) {
        self.id = id
        self.chunkIndex = chunkIndex
        self.chunk = chunk
        self.offset = offset
        self.content = content
        self.isFinal = isFinal
        self.inReplyTo = inReplyTo
        self.attribution = attribution
        self.session = session
    }

    /// A progress carrying the whole reply so far, `chunk` being its end.
    public init(
        id: MessageID, chunkIndex: Int, chunk: String, content: String, isFinal: Bool, inReplyTo: MessageID? = nil,
        attribution: ReplyAttribution? = nil, session: String? = nil
    ) {
        self.init(
            id: id, chunkIndex: chunkIndex, chunk: chunk, offset: Self.offset(of: chunk, endingWhole: content), content: content, isFinal: isFinal,
            inReplyTo: inReplyTo, attribution: attribution, session: session)
    }

    /// Where `chunk` goes when it is the end of `content`.
    private static func offset(of chunk: String, endingWhole content: String) -> Int {
        max(0, content.utf8.count - chunk.utf8.count)
    }

    /// This progress applied to what a reader has of the reply (`previous`, as this returned
    /// it the last time; nil for a reply not seen before): the reply so far, with `content`
    /// whole. Nil when it cannot be applied and the reader keeps what it has: a chunk whose
    /// offset is not the end of what the reader has (one was missed, or this one came
    /// twice), or a progress older than the reader's. The next progress carrying the whole
    /// reply, or the reply's `conv.message`, repairs a gap.
    public func following(_ previous: StreamProgress?) -> StreamProgress? {
        if let previous, previous.chunkIndex > chunkIndex { return nil }
        if content != nil { return self }
        guard let text = previous?.content, text.utf8.count == offset else { return nil }
        var followed = self
        followed.content = text + chunk
        return followed
    }

    /// The reply so far as far as this progress carries it: `content`, else only the chunk.
    public var text: String { content ?? chunk }

    /// The UTF-8 length of the reply so far: where the next chunk goes.
    public var length: Int { offset + chunk.utf8.count }

    private enum CodingKeys: String, CodingKey {
        case id, chunkIndex, chunk, offset, content, isFinal, inReplyTo, attribution, session
    }

    /// Reads a progress; one written before `offset` existed carries the whole reply, so its
    /// chunk is at the reply's end.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(MessageID.self, forKey: .id)
        chunkIndex = try container.decode(Int.self, forKey: .chunkIndex)
        let chunk = try container.decode(String.self, forKey: .chunk)
        let content = try container.decodeIfPresent(String.self, forKey: .content)
        self.chunk = chunk
        self.content = content
        guard let offset = try container.decodeIfPresent(Int.self, forKey: .offset) ?? content.map({ Self.offset(of: chunk, endingWhole: $0) }) else {
            throw DecodingError.keyNotFound(
                CodingKeys.offset, .init(codingPath: container.codingPath, debugDescription: "a progress without its content needs its offset"))
        }
        guard offset >= 0 else {
            throw DecodingError.dataCorruptedError(forKey: .offset, in: container, debugDescription: "offset \(offset) is below 0")
        }
        self.offset = offset
        isFinal = try container.decode(Bool.self, forKey: .isFinal)
        inReplyTo = try container.decodeIfPresent(MessageID.self, forKey: .inReplyTo)
        attribution = try container.decodeIfPresent(ReplyAttribution.self, forKey: .attribution)
        session = try container.decodeIfPresent(String.self, forKey: .session)
    }
}

/// What the bot is doing, as the gateway last said.
public typealias BotActivity = BotStateUpdate

/// The outbox at a glance.
public struct OutboxSummary: Codable, Hashable, Sendable {
    /// Messages not yet acknowledged by the gateway.
    public var pending: Int
    /// Messages that left the outbox without being delivered since protod started, by how
    /// they ended (`failed`, `expired`, `cancelled`).
    public var undelivered: [String: Int]?
    /// The latest of them, with its reason in words.
    public var lastUndelivered: DeliveryUpdate?
    /// OpenClaw: how what the gateway kept of Tether's messages was learned since protod started.
    public var confirmations: Confirmations?

    /// How protod learned what the gateway kept of messages whose fate a connection left unknown.
    public struct Confirmations: Codable, Hashable, Sendable {
        /// The gateway answers receipts by idempotency key (today's OpenClaw).
        public var receipts: Bool
        /// Messages decided by the gateway's receipts, pending inputs or the keys of its turns.
        public var byReceipt: Int
        /// Messages decided by matching their text in the gateway's history (gateways without receipts).
        public var byText: Int

        public init(receipts: Bool, byReceipt: Int, byText: Int) {
            self.receipts = receipts
            self.byReceipt = byReceipt
            self.byText = byText
        }
    }

    public init(pending: Int, undelivered: [String: Int]? = nil, lastUndelivered: DeliveryUpdate? = nil, confirmations: Confirmations? = nil) {
        self.pending = pending
        self.undelivered = undelivered
        self.lastUndelivered = lastUndelivered
        self.confirmations = confirmations
    }
}

/// A change of the conversation tether-protod journals and publishes with a revision:
/// a transcript entry or a delivery update.
public protocol ConversationChangeBody: Codable, Sendable {
    /// The topic it is published on.
    static var topic: Topic { get }
    var revision: Int? { get set }
    /// The journal's record of it.
    var change: ConversationChange { get }
}

extension TranscriptEntry: ConversationChangeBody {
    public static var topic: Topic { .conversationMessage }
    public var change: ConversationChange { ConversationChange(revision: revision ?? 0, entry: self) }
}

extension DeliveryUpdate: ConversationChangeBody {
    public static var topic: Topic { .conversationDelivery }
    public var change: ConversationChange { ConversationChange(revision: revision ?? 0, delivery: self) }
}

/// One change of the conversation as tether-protod's journal keeps it: an entry or a
/// delivery update, with its revision.
public struct ConversationChange: Codable, Hashable, Sendable {
    public var revision: Int
    public var entry: TranscriptEntry?
    public var delivery: DeliveryUpdate?

    public init(revision: Int, entry: TranscriptEntry? = nil, delivery: DeliveryUpdate? = nil) {
        self.revision = revision
        self.entry = entry
        self.delivery = delivery
    }
}
