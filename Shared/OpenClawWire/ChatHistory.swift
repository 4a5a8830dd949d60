import FoundationEssentials

/// The params of `chat.history`.
///
/// The gateway's schema is closed: a field it does not know refuses the request
/// (`INVALID_REQUEST`). `inputRunIds` and `cursor` are sent only to a gateway known to take them.
public struct ChatHistoryParams: Sendable, Hashable, Codable {
    public var sessionKey: String
    public var limit: Int?
    /// Today's gateways: the idempotency keys whose receipts are asked (1 to ``maximumInputRunIds``).
    public var inputRunIds: [String]?
    /// Today's gateways: the `deltaCursor` of an earlier answer; the answer is what came after it.
    public var cursor: JSONValue?
    /// Protocol 4: the most characters of each entry's text the answer carries (1 to 500,000).
    public var maxChars: Int?

    /// The most keys one request may ask receipts for.
    public static let maximumInputRunIds = 50

    public init(sessionKey: String, limit: Int?, inputRunIds: [String]? = nil, cursor: JSONValue? = nil, maxChars: Int? = nil) {
        self.sessionKey = sessionKey
        self.limit = limit
        self.inputRunIds = inputRunIds
        self.cursor = cursor
        self.maxChars = maxChars
    }
}

/// What today's gateway says of one idempotency key asked in `inputRunIds`: exact custody of
/// the accepted input, independent of the transcript's pages and texts. A key it has no row for
/// has no receipt: never accepted, forgotten, or a single input already placed in the
/// transcript (its row is deleted then; the transcript's user entry carries `<key>:user`).
public struct InputReceipt: Sendable, Hashable, Codable {
    /// The key (`runId` is the idempotency key of the `chat.send`).
    public var runId: String
    /// `pending` (accepted and held, its turn not placed yet) or `consumed` (its turn is in the transcript).
    public var state: String
    /// With `pending`: it waits in the busy session's queue behind another run.
    public var queued: Bool?
    /// With `pending`: the run it waited for was aborted, and it will not run.
    public var cancelled: Bool?
    /// With `consumed`: the transcript entry its turn became (`__openclaw.id`).
    public var consumedByEventId: String?

    public init(runId: String, state: String, queued: Bool? = nil, cancelled: Bool? = nil, consumedByEventId: String? = nil) {
        self.runId = runId
        self.state = state
        self.queued = queued
        self.cancelled = cancelled
        self.consumedByEventId = consumedByEventId
    }
}

/// The inputs the gateway accepted that await a turn, as `chat.history`'s `pendingInputs` pages them.
public struct PendingInputsPage: Sendable, Hashable, Codable {
    /// One accepted input: its key, when it was accepted, and where it stands.
    public struct Item: Sendable, Hashable, Codable {
        public var id: String
        /// The idempotency key it was sent with (left out when over 256 characters).
        public var runId: String?
        public var message: JSONValue?
        /// Milliseconds since 1970, by the gateway's clock.
        public var acceptedAt: Double?
        /// `queued` (waiting for a turn), `cancelled` (a person aborted it) or `interrupted`
        /// (a restart ended its wait: the gateway does not replay it).
        public var state: String

        public init(id: String, runId: String?, message: JSONValue?, acceptedAt: Double?, state: String) {
            self.id = id
            self.runId = runId
            self.message = message
            self.acceptedAt = acceptedAt
            self.state = state
        }
    }

    public var items: [Item]
    public var total: Int?

    public init(items: [Item], total: Int?) {
        self.items = items
        self.total = total
    }
}

/// The session as `chat.history` describes it on today's gateways.
public struct ChatSessionInfo: Sendable, Hashable, Codable {
    public var hasActiveRun: Bool?
    public var activeRunIds: [String]?

    public init(hasActiveRun: Bool?, activeRunIds: [String]?) {
        self.hasActiveRun = hasActiveRun
        self.activeRunIds = activeRunIds
    }
}

/// The run in progress in the session, with its text so far ("the run id is the recovery contract").
public struct InFlightRun: Sendable, Hashable, Codable {
    public var runId: String
    public var text: String?

    public init(runId: String, text: String?) {
        self.runId = runId
        self.text = text
    }
}

/// The result of `chat.history`.
public struct ChatHistoryResult: Sendable, Hashable, Codable {
    public var sessionKey: String?
    public var sessionId: String?
    public var messages: [ChatTranscriptMessage]
    /// With a `cursor`: `delta` (the messages are what came after it) or `reset` (the gap was
    /// too large: fetch a page instead); nil for a page.
    public var kind: String?
    /// Today's gateways: where this answer ends, for the next lookup's `cursor`.
    public var deltaCursor: JSONValue?
    /// Today's gateways: one receipt for each key asked in `inputRunIds` that the gateway has.
    public var inputReceipts: [InputReceipt]?
    /// Today's gateways: accepted inputs that await a turn.
    public var pendingInputs: PendingInputsPage?
    public var sessionInfo: ChatSessionInfo?
    public var inFlightRun: InFlightRun?

    public init(
        sessionKey: String?, sessionId: String?, messages: [ChatTranscriptMessage], kind: String? = nil, deltaCursor: JSONValue? = nil,
        inputReceipts: [InputReceipt]? = nil, pendingInputs: PendingInputsPage? = nil, sessionInfo: ChatSessionInfo? = nil, inFlightRun: InFlightRun? = nil
    ) {
        self.sessionKey = sessionKey
        self.sessionId = sessionId
        self.messages = messages
        self.kind = kind
        self.deltaCursor = deltaCursor
        self.inputReceipts = inputReceipts
        self.pendingInputs = pendingInputs
        self.sessionInfo = sessionInfo
        self.inFlightRun = inFlightRun
    }

    private enum CodingKeys: String, CodingKey {
        case sessionKey, sessionId, messages, kind, deltaCursor, inputReceipts, pendingInputs, sessionInfo, inFlightRun
    }

    /// A `reset` answer has no messages; what today's gateways add is read when readable, never required.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sessionKey = try? container.decodeIfPresent(String.self, forKey: .sessionKey)
        sessionId = try? container.decodeIfPresent(String.self, forKey: .sessionId)
        kind = try? container.decodeIfPresent(String.self, forKey: .kind)
        if kind == "reset" {
            messages = (try? container.decodeIfPresent([ChatTranscriptMessage].self, forKey: .messages)) ?? []
        } else if kind == "delta" {
            // A catch-up's messages come as `session.message` payloads: the entry is their `message`.
            messages = try container.decode([SessionMessageEnvelope].self, forKey: .messages).map(\.message)
        } else {
            messages = try container.decode([ChatTranscriptMessage].self, forKey: .messages)
        }
        deltaCursor = try? container.decodeIfPresent(JSONValue.self, forKey: .deltaCursor)
        inputReceipts = try container.decodeIfPresent([InputReceipt].self, forKey: .inputReceipts)
        pendingInputs = try container.decodeIfPresent(PendingInputsPage.self, forKey: .pendingInputs)
        sessionInfo = try? container.decodeIfPresent(ChatSessionInfo.self, forKey: .sessionInfo)
        inFlightRun = try? container.decodeIfPresent(InFlightRun.self, forKey: .inFlightRun)
    }

    /// A `reset` is exactly `{"kind":"reset"}`; a catch-up's messages go as `session.message` payloads.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(kind, forKey: .kind)
        if isReset { return }
        if isDelta {
            try container.encode(
                messages.map { SessionMessageEnvelope(sessionKey: sessionKey, message: $0, messageId: $0.entryID, messageSeq: $0.entrySequence) },
                forKey: .messages)
        } else {
            try container.encodeIfPresent(sessionKey, forKey: .sessionKey)
            try container.encodeIfPresent(sessionId, forKey: .sessionId)
            try container.encode(messages, forKey: .messages)
        }
        try container.encodeIfPresent(deltaCursor, forKey: .deltaCursor)
        try container.encodeIfPresent(inputReceipts, forKey: .inputReceipts)
        try container.encodeIfPresent(pendingInputs, forKey: .pendingInputs)
        try container.encodeIfPresent(sessionInfo, forKey: .sessionInfo)
        try container.encodeIfPresent(inFlightRun, forKey: .inFlightRun)
    }

    /// A catch-up (`kind: "delta"`): its messages are what came after the cursor, no more.
    public var isDelta: Bool { kind == "delta" }

    /// The gateway could not give what came after the cursor (more than 200 events, 1 MB, or a
    /// transcript rewritten since): a page is fetched instead.
    public var isReset: Bool { kind == "reset" }

    /// Whether the answer shows a gateway that keeps accepted inputs and answers their
    /// receipts: it pages its pending inputs (older protocol-4 gateways do not).
    public var showsReceipts: Bool { inputReceipts != nil || pendingInputs != nil }
}

/// One transcript entry as a `session.message` event carries it, as a catch-up lists them.
public struct SessionMessageEnvelope: Sendable, Hashable, Codable {
    public var sessionKey: String?
    public var message: ChatTranscriptMessage
    public var messageId: String?
    public var messageSeq: Int?

    public init(sessionKey: String?, message: ChatTranscriptMessage, messageId: String? = nil, messageSeq: Int? = nil) {
        self.sessionKey = sessionKey
        self.message = message
        self.messageId = messageId
        self.messageSeq = messageSeq
    }
}
