import FoundationEssentials

/// The params of `chat.send`.
public struct ChatSendParams: Sendable, Hashable, Codable {
    public var sessionKey: String
    public var message: String
    /// Also the run's id: a retry of the same message carries the same key.
    public var idempotencyKey: String
    /// Images sent with the message.
    public var attachments: [ChatAttachment]?
    /// Today's gateways: what a busy session does with it (`followup`, `collect`, `steer`,
    /// `interrupt`); sent only to a gateway known to take it.
    public var queueMode: String?

    public init(sessionKey: String, message: String, idempotencyKey: String, attachments: [ChatAttachment]? = nil, queueMode: String? = nil) {
        self.sessionKey = sessionKey
        self.message = message
        self.idempotencyKey = idempotencyKey
        self.attachments = attachments
        self.queueMode = queueMode
    }

    /// The bytes of a `chat.send` frame besides the message (ids, key, session, escapes
    /// aside): a message fits a gateway's `policy.maxPayload` when its UTF-8 bytes and these do.
    public static let frameOverhead = 512
    /// The bytes an attachment adds to a `chat.send` frame besides its content and file name.
    public static let attachmentOverhead = 96
}

/// An attachment of `chat.send`, as OpenClaw's Control UI sends an image:
/// `{type: "image", mimeType, fileName, content: <base64>}`.
public struct ChatAttachment: Sendable, Hashable, Codable {
    public var type: String?
    public var mimeType: String?
    public var fileName: String?
    /// Base64, or a `data:<mime>;base64,` URL.
    public var content: String?

    public init(type: String? = "image", mimeType: String?, fileName: String?, content: String?) {
        self.type = type
        self.mimeType = mimeType
        self.fileName = fileName
        self.content = content
    }

    private enum CodingKeys: String, CodingKey { case type, mimeType, fileName, content }

    /// As the gateway reads an item of `unknown[]`: a field that is not a string is absent.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        type = try? container.decodeIfPresent(String.self, forKey: .type)
        mimeType = try? container.decodeIfPresent(String.self, forKey: .mimeType)
        fileName = try? container.decodeIfPresent(String.self, forKey: .fileName)
        content = try? container.decodeIfPresent(String.self, forKey: .content)
    }
}

/// The payload of a `chat.send` response.
public struct ChatSendResult: Sendable, Hashable, Codable {
    public var runId: String?
    /// `started`, `in_flight`, `ok`, `error`; absent on an abort trigger's answer.
    public var status: String?
    public var summary: String?
    public var aborted: Bool?
    /// Today's gateways: the user turn's place in the transcript, given only once it is placed there.
    public var messageSeq: Int?
    /// Today's gateways, with `queueMode: "interrupt"`: true when the message stopped the run in progress.
    public var interruptedActiveRun: Bool?

    public init(runId: String?, status: String?, summary: String? = nil, aborted: Bool? = nil, messageSeq: Int? = nil, interruptedActiveRun: Bool? = nil) {
        self.runId = runId
        self.status = status
        self.summary = summary
        self.aborted = aborted
        self.messageSeq = messageSeq
        self.interruptedActiveRun = interruptedActiveRun
    }
}

/// The params of `chat.abort`.
public struct ChatAbortParams: Sendable, Hashable, Codable {
    public var sessionKey: String
    public var runId: String?

    public init(sessionKey: String, runId: String?) {
        self.sessionKey = sessionKey
        self.runId = runId
    }
}

/// A transcript message as `chat.history` and `chat` events carry it.
public struct ChatTranscriptMessage: Sendable, Hashable, Codable {
    public var role: String
    /// A string, or blocks such as `{type:"text", text}`.
    public var content: JSONValue?
    /// Milliseconds since 1970, by the gateway's clock.
    public var timestamp: Int?
    public var stopReason: String?
    /// Why the model's turn failed (`stopReason: "error"`), in the gateway's words.
    public var errorMessage: String?
    /// In history, on a user entry: who sent it (the sending client's label).
    public var senderLabel: String?
    /// In history: the gateway's own id of the entry (`__openclaw.id`), stable across reloads.
    public var entryID: String?
    /// In history: the entry's place in the session's transcript (`__openclaw.seq`).
    public var entrySequence: Int?
    /// Today's gateways, on the user entry of a turn: the turn's key (`__openclaw.idempotencyKey`,
    /// `<idempotency key>:user`), which ties it to the `chat.send` exactly.
    public var turnKey: String?
    /// In history, on an assistant entry: the model that wrote it; `gateway-injected` for an
    /// entry the gateway wrote itself (an aborted run's text).
    public var model: String?
    /// In history, on an entry the gateway injected for an aborted run (`openclawAbort.runId`):
    /// the run it stands for.
    public var abortedRunID: String?
    /// In history, on a `toolResult` entry: the call it is the result of (`toolCallId`), the
    /// tool (`toolName`), and whether it is an error (`isError`).
    public var toolCallID: String?
    public var toolName: String?
    public var isError: Bool?

    /// The key a turn's user entry carries for the `chat.send` of `idempotencyKey`.
    public static func userTurnKey(of idempotencyKey: String) -> String { idempotencyKey + ":user" }

    /// The `model` of an entry the gateway wrote itself rather than the model.
    public static let gatewayInjected = "gateway-injected"

    public init(
        role: String, text: String, timestamp: Int?, stopReason: String? = nil, errorMessage: String? = nil, senderLabel: String? = nil,
        entryID: String? = nil, entrySequence: Int? = nil, model: String? = nil, abortedRunID: String? = nil
    ) {
        self.role = role
        self.content = .array(text.isEmpty && errorMessage != nil ? [] : [.object(["type": .string("text"), "text": .string(text)])])
        self.timestamp = timestamp
        self.stopReason = stopReason
        self.errorMessage = errorMessage
        self.senderLabel = senderLabel
        self.entryID = entryID
        self.entrySequence = entrySequence
        self.model = model
        self.abortedRunID = abortedRunID
    }

    /// The text it holds: the string, or its text blocks joined; other blocks (thinking,
    /// tool calls, images) are not text.
    public var text: String {
        switch content {
        case .string(let text)?: return text
        case .array(let blocks)?:
            return blocks.compactMap { block in block["type"]?.stringValue == "text" ? block["text"]?.stringValue : nil }.joined(separator: "\n")
        default: return ""
        }
    }

    /// The model's thinking in it (its `thinking` blocks, a redacted one as the gateway words
    /// it), blocks apart by a blank line; nil when it has none.
    public var thinking: String? {
        guard case .array(let blocks)? = content else { return nil }
        let thoughts = blocks.compactMap { block in
            block["type"]?.stringValue == "thinking" ? block["thinking"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } : nil
        }
        return thoughts.isEmpty ? nil : thoughts.joined(separator: "\n\n")
    }

    /// A `toolCall` block of an assistant entry: a tool the model called.
    public struct ToolCallBlock: Sendable, Hashable {
        public var id: String
        public var name: String
        public var arguments: JSONValue?

        public init(id: String, name: String, arguments: JSONValue?) {
            self.id = id
            self.name = name
            self.arguments = arguments
        }
    }

    /// The tools the model called in it (its `toolCall` blocks), in order.
    public var toolCalls: [ToolCallBlock] {
        guard case .array(let blocks)? = content else { return [] }
        return blocks.compactMap { block in
            guard block["type"]?.stringValue == "toolCall", let id = block["id"]?.stringValue, !id.isEmpty else { return nil }
            return ToolCallBlock(id: id, name: block["name"]?.stringValue ?? "tool", arguments: block["arguments"])
        }
    }

    private enum CodingKeys: String, CodingKey {
        case role, content, timestamp, stopReason, errorMessage, senderLabel, model, idempotencyKey
        case toolCallId, toolName, isError
        case openclaw = "__openclaw"
        case openclawAbort
    }

    private enum EntryKeys: String, CodingKey {
        case id, seq, idempotencyKey
    }

    private enum AbortKeys: String, CodingKey {
        case aborted, origin, runId
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        role = try container.decode(String.self, forKey: .role)
        content = try container.decodeIfPresent(JSONValue.self, forKey: .content)
        // Some releases write fractional or string times; a time that cannot be read is left out.
        timestamp = (try? container.decodeIfPresent(JSONValue.self, forKey: .timestamp))??.intValue
        stopReason = try? container.decodeIfPresent(String.self, forKey: .stopReason)
        errorMessage = try? container.decodeIfPresent(String.self, forKey: .errorMessage)
        senderLabel = try? container.decodeIfPresent(String.self, forKey: .senderLabel)
        model = try? container.decodeIfPresent(String.self, forKey: .model)
        toolCallID = try? container.decodeIfPresent(String.self, forKey: .toolCallId)
        toolName = try? container.decodeIfPresent(String.self, forKey: .toolName)
        isError = try? container.decodeIfPresent(Bool.self, forKey: .isError)
        // What only history adds is read when it is there and readable, never required.
        let entry = try? container.nestedContainer(keyedBy: EntryKeys.self, forKey: .openclaw)
        entryID = try? entry?.decodeIfPresent(String.self, forKey: .id)
        entrySequence = (try? entry?.decodeIfPresent(JSONValue.self, forKey: .seq))??.intValue
        turnKey = try? entry?.decodeIfPresent(String.self, forKey: .idempotencyKey)
        let abort = try? container.nestedContainer(keyedBy: AbortKeys.self, forKey: .openclawAbort)
        abortedRunID = try? abort?.decodeIfPresent(String.self, forKey: .runId)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(role, forKey: .role)
        try container.encodeIfPresent(content, forKey: .content)
        try container.encodeIfPresent(timestamp, forKey: .timestamp)
        try container.encodeIfPresent(stopReason, forKey: .stopReason)
        try container.encodeIfPresent(errorMessage, forKey: .errorMessage)
        try container.encodeIfPresent(senderLabel, forKey: .senderLabel)
        try container.encodeIfPresent(model, forKey: .model)
        try container.encodeIfPresent(toolCallID, forKey: .toolCallId)
        try container.encodeIfPresent(toolName, forKey: .toolName)
        try container.encodeIfPresent(isError, forKey: .isError)
        if entryID != nil || entrySequence != nil || turnKey != nil {
            var entry = container.nestedContainer(keyedBy: EntryKeys.self, forKey: .openclaw)
            try entry.encodeIfPresent(entryID, forKey: .id)
            try entry.encodeIfPresent(entrySequence, forKey: .seq)
            try entry.encodeIfPresent(turnKey, forKey: .idempotencyKey)
        }
        if let abortedRunID {
            try container.encode(abortedRunID + ":assistant", forKey: .idempotencyKey)
            var abort = container.nestedContainer(keyedBy: AbortKeys.self, forKey: .openclawAbort)
            try abort.encode(true, forKey: .aborted)
            try abort.encode("rpc", forKey: .origin)
            try abort.encode(abortedRunID, forKey: .runId)
        }
    }
}

/// The result of `sessions.list`, as far as Tether shows it.
public struct SessionsListResult: Sendable, Hashable, Codable {
    /// A row (`GatewaySessionRow`): the session, its settings and its usage. Settings are the
    /// stored overrides (absent when default); `model` and `modelProvider` are always filled.
    public struct Session: Sendable, Hashable, Codable {
        public var key: String
        public var displayName: String?
        public var updatedAt: Int?
        public var sessionId: String?
        public var thinkingLevel: String?
        public var modelProvider: String?
        public var model: String?
        public var inputTokens: Int?
        public var outputTokens: Int?
        /// The tokens the session's context holds, when known.
        public var totalTokens: Int?
        public var totalTokensFresh: Bool?
        /// The context window.
        public var contextTokens: Int?
        public var estimatedCostUsd: Double?
        /// Today's gateways: what became of the last message sent while a run was in progress.
        public var lastBusyMessageOutcome: BusyMessageOutcome?

        public init(
            key: String, displayName: String?, updatedAt: Int?, sessionId: String? = nil, thinkingLevel: String? = nil, modelProvider: String? = nil,
            model: String? = nil, inputTokens: Int? = nil, outputTokens: Int? = nil, totalTokens: Int? = nil, totalTokensFresh: Bool? = nil,
            contextTokens: Int? = nil, estimatedCostUsd: Double? = nil, lastBusyMessageOutcome: BusyMessageOutcome? = nil
        ) {
            self.lastBusyMessageOutcome = lastBusyMessageOutcome
            self.key = key
            self.displayName = displayName
            self.updatedAt = updatedAt
            self.sessionId = sessionId
            self.thinkingLevel = thinkingLevel
            self.modelProvider = modelProvider
            self.model = model
            self.inputTokens = inputTokens
            self.outputTokens = outputTokens
            self.totalTokens = totalTokens
            self.totalTokensFresh = totalTokensFresh
            self.contextTokens = contextTokens
            self.estimatedCostUsd = estimatedCostUsd
        }
    }

    /// What a session without its own settings uses.
    public struct Defaults: Sendable, Hashable, Codable {
        public var modelProvider: String?
        public var model: String?
        public var contextTokens: Int?

        public init(modelProvider: String?, model: String?, contextTokens: Int?) {
            self.modelProvider = modelProvider
            self.model = model
            self.contextTokens = contextTokens
        }
    }

    public var sessions: [Session]
    public var defaults: Defaults?

    public init(sessions: [Session], defaults: Defaults? = nil) {
        self.sessions = sessions
        self.defaults = defaults
    }
}

/// The answer to `models.list`: the models a session may use (the allowlist, else the catalog).
public struct ModelsListResult: Sendable, Hashable, Codable {
    /// A catalog entry (`ModelCatalogEntry`).
    public struct Model: Sendable, Hashable, Codable {
        public var id: String
        public var name: String?
        public var provider: String
        public var alias: String?
        public var contextWindow: Int?
        public var reasoning: Bool?

        public init(id: String, name: String?, provider: String, alias: String? = nil, contextWindow: Int? = nil, reasoning: Bool? = nil) {
            self.id = id
            self.name = name
            self.provider = provider
            self.alias = alias
            self.contextWindow = contextWindow
            self.reasoning = reasoning
        }
    }

    public var models: [Model]

    public init(models: [Model]) {
        self.models = models
    }
}

/// The answer to `agents.list`.
public struct AgentsListResult: Sendable, Hashable, Codable {
    public struct Agent: Sendable, Hashable, Codable {
        /// The agent's model choice: `{primary, fallbacks}`.
        public struct ModelChoice: Sendable, Hashable, Codable {
            public var primary: String?

            public init(primary: String?) {
                self.primary = primary
            }
        }

        public var id: String
        public var name: String?
        public var model: ModelChoice?

        public init(id: String, name: String?, model: ModelChoice?) {
            self.id = id
            self.name = name
            self.model = model
        }
    }

    public var defaultId: String
    public var mainKey: String
    public var scope: String?
    public var agents: [Agent]

    public init(defaultId: String, mainKey: String, scope: String?, agents: [Agent]) {
        self.defaultId = defaultId
        self.mainKey = mainKey
        self.scope = scope
        self.agents = agents
    }
}

/// The payload of an `agent` event: one step of a run as the agent runs it, beside the `chat`
/// events (`lifecycle` start, end and error; `assistant` text; `tool` calls).
public struct AgentEventPayload: Sendable, Hashable, Codable {
    /// The run: for `chat.send` runs, the message's idempotency key.
    public var runId: String
    public var seq: Int?
    /// `lifecycle`, `assistant`, `tool`, `compaction`, `error`.
    public var stream: String
    public var ts: Int?
    /// For `lifecycle`: `phase` (`start`, `end`, `error`), and `error` in the gateway's words.
    public var data: JSONValue?
    public var sessionKey: String?

    public init(runId: String, seq: Int?, stream: String, ts: Int?, data: JSONValue?, sessionKey: String?) {
        self.runId = runId
        self.seq = seq
        self.stream = stream
        self.ts = ts
        self.data = data
        self.sessionKey = sessionKey
    }
}

/// How a chat client words a tool call's parts (the `agent` events of stream `tool`, and the
/// `toolCall` and `toolResult` entries of the history).
public enum ToolCallText {
    /// A call's arguments, short: the one value when there is one (`README.md` for
    /// `{"path":"README.md"}`), else `key=value` pairs in key order; at most `limit` characters.
    public static func arguments(_ arguments: JSONValue?, limit: Int) -> String {
        let text: String
        switch arguments {
        case .object(let object)? where object.count == 1: text = scalar(object.values.first!)
        case .object(let object)?: text = object.keys.sorted().map { "\($0)=\(scalar(object[$0]!))" }.joined(separator: " ")
        case let value?: text = scalar(value)
        case nil: text = ""
        }
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return line.count > limit ? String(line.prefix(max(0, limit - 1))) + "…" : line
    }

    /// A result's text: its `content`'s text blocks (an image block as `[image]`), or a string;
    /// nil when it has none.
    public static func output(_ result: JSONValue?) -> String? {
        let content = result?["content"] ?? result
        switch content {
        case .string(let text)?: return text
        case .array(let blocks)?:
            let parts = blocks.compactMap { block -> String? in
                switch block["type"]?.stringValue {
                case "text": block["text"]?.stringValue
                case "image": "[image]"
                default: nil
                }
            }
            return parts.isEmpty ? nil : parts.joined(separator: "\n")
        default: return nil
        }
    }

    private static func scalar(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): text
        case .number: value.intValue.map { String($0) } ?? (try? String(decoding: JSONEncoder().encode(value), as: UTF8.self)) ?? ""
        case .bool(let flag): String(flag)
        case .null: "null"
        case .array, .object: (try? String(decoding: JSONEncoder().encode(value), as: UTF8.self)) ?? ""
        }
    }
}

/// What today's gateway did with the last message a session received while a run was in
/// progress (`lastBusyMessageOutcome` of a `sessions.list` row). Kept in the gateway's memory,
/// the last one of each session: a hint, not a receipt.
public struct BusyMessageOutcome: Sendable, Hashable, Codable {
    /// `active_run_steer_accepted`, `active_run_steer_rejected`, `followup_enqueued`,
    /// `collect_enqueued`, `interrupt_started` or `dropped`.
    public var kind: String
    public var label: String?
    public var recordedAtMs: Double?
    /// `inbound`, `slash_steer` or `talk`.
    public var source: String?
    public var reason: String?

    public init(kind: String, label: String? = nil, recordedAtMs: Double? = nil, source: String? = nil, reason: String? = nil) {
        self.kind = kind
        self.label = label
        self.recordedAtMs = recordedAtMs
        self.source = source
        self.reason = reason
    }

    /// The gateway gave it to the run in progress.
    public var steered: Bool { kind == "active_run_steer_accepted" }
}
