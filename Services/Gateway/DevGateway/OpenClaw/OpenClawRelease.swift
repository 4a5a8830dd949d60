/// Which OpenClaw release the development gateway behaves as (`--openclaw`), as far as a chat
/// client's promises see it. docs/GATEWAY.md has the table: what each does, and the source it
/// follows.
public enum OpenClawRelease: String, CaseIterable, Sendable {
    /// 2026.4.12, as run from its source: protocol 3, the idempotency cache and the busy
    /// session's queue in memory, a transcript as the only record of what it kept.
    case release2026_4 = "2026.4"
    /// An early protocol-4 release (2026.5.12): protocol 4 only, run status and error kinds,
    /// no receipts.
    case release2026_5 = "2026.5"
    /// Today's gateway (the newest source): besides 2026.5's, every input to an existing session
    /// kept before its acknowledgement, receipts by idempotency key, pending inputs,
    /// `messageSeq` in the acknowledgement, and each turn's user entry keyed with its `chat.send`.
    case current

    /// The protocol versions it speaks when `--protocols` does not say.
    public var protocols: ClosedRange<Int> {
        self == .release2026_4 ? 3...3 : 4...4
    }

    /// What its `hello-ok` names itself (`server.version`).
    public var serverVersion: String { "tether-gateway-dev (OpenClaw \(rawValue))" }

    /// It keeps accepted inputs (`session_pending_inputs`) and answers receipts for them.
    public var keepsInputs: Bool { self == .current }

    /// It takes `chat.send`'s `queueMode` (steer, interrupt, followup, collect) and has `chat.steer`.
    public var takesQueueModes: Bool { self == .current }

    /// Its history pages end with a `deltaCursor`, and it answers what came after one.
    public var givesCursors: Bool { self == .current }

    /// The fields `chat.send` takes: its schema is closed, and refuses any other.
    var sendFields: Set<String> {
        var fields: Set<String> = ["sessionKey", "message", "thinking", "deliver", "attachments", "timeoutMs", "idempotencyKey"]
        if self != .release2026_4 { fields.formUnion(["agentId", "sessionId", "mentions", "fastMode", "replyToId"]) }
        if self == .current { fields.formUnion(["queueMode", "expectedLeafEntryId", "suppressCommandInterpretation", "intent"]) }
        return fields
    }

    /// The fields `chat.history` takes: closed too.
    var historyFields: Set<String> {
        // 2026.4.12's `logs-chat.ts` takes `maxChars` already (1 to 500,000).
        var fields: Set<String> = ["sessionKey", "limit", "maxChars"]
        if self != .release2026_4 { fields.formUnion(["agentId"]) }
        if self == .current { fields.formUnion(["cursor", "maxBytes", "offset", "pendingBefore", "inputRunIds", "messageId", "sessionId"]) }
        return fields
    }
}
