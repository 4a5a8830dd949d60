import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

/// An OpenClaw connection as protod knows it: the protocol in use, the session chatted in,
/// the event counter, and the history lookup under way.
struct OpenClawLink: Sendable, Equatable {
    var protocolVersion: Int
    /// The canonical session key (the `main` alias resolved with the gateway's defaults).
    var sessionKey: String
    /// The gateway's main session key, which a key as a person writes it is made canonical by.
    var mainSessionKey: String?
    /// The gateway's clock minus Tether's, in seconds.
    var clockOffset: TimeInterval
    /// When the gateway started, by Tether's clock, if it said: a run older than that died with it.
    var gatewayStartedAt: Date?
    /// The last event sequence number on this connection.
    var lastSequence: Int?
    /// The history lookup under way.
    var history: HistoryLookup?
    /// A history lookup answered since the connection began (or since frames may have been lost):
    /// messages may be written.
    var recovered = false
    /// Asked for another lookup once the one under way is answered.
    var lookupAgain = false
    /// A lookup was widened to the gateway's maximum on this connection: it is not widened again.
    var widened = false
    /// The session's history was empty when last looked up, and no run in it has ended since:
    /// the 2026.4 gateway writes a new session's first user entry only with its reply, so a run
    /// under way there does not show the message is kept.
    var sessionIsNew = false
    /// The messages of a new session said accepted while their run goes on (said once each).
    var saidAccepted: Set<String> = []
    /// The largest frame the gateway reads (`policy.maxPayload`).
    var maximumPayload: Int?
    /// When an event of a run in the session chatted in (Tether's or not) was last heard.
    var sessionHeardAt: Date?
    /// The gateway takes `queueMode` in `chat.send` (today's: it has `chat.steer`).
    var takesQueueModes = false
    private var requests = 0

    struct HistoryLookup: Sendable, Equatable {
        var id: String
        var limit: Int
        var sentAt: Date
        /// The keys whose receipts it asks (today's gateways).
        var asked: [String] = []
        /// The cursor it sent (today's gateways): its answer is what came after it, or `reset`.
        var cursor: JSONValue?
        /// It only renews the cursor (one entry, cut to one character): nothing is decided by it.
        var renewal = false
    }

    init(_ gateway: GatewayInfo, requested: String?, now: Date) {
        protocolVersion = gateway.protocolVersion ?? 3
        sessionKey = OpenClawProtocol.canonicalSessionKey(requested, mainSessionKey: gateway.mainSessionKey)
        mainSessionKey = gateway.mainSessionKey
        clockOffset = Double(gateway.clockOffsetMilliseconds ?? 0) / 1000
        // The uptime is the handshake's: a protod that joins the connection later uses the start it gives.
        gatewayStartedAt = gateway.startedAt ?? gateway.uptimeMilliseconds.map { now.addingTimeInterval(-Double($0) / 1000) }
        maximumPayload = gateway.maximumPayload
        takesQueueModes = gateway.generation?.steers == true
    }

    /// Chats in `key` (canonical) from now on: its history is looked up before anything is
    /// written there, and nothing of the session before carries over.
    mutating func chatIn(_ key: String) {
        sessionKey = key
        recovered = false
        history = nil
        lookupAgain = false
        widened = false
        sessionHeardAt = nil
        sessionIsNew = false
    }

    /// Whether `key` names the session chatted in, in either form: events carry the canonical
    /// key, `aborted` and `chat.history` the key as the client sent it.
    func names(_ key: String) -> Bool {
        key == sessionKey || OpenClawProtocol.canonicalSessionKey(key, mainSessionKey: mainSessionKey) == sessionKey
    }

    /// Whether a message's `chat.send`, with its images, fits in the gateway's largest frame.
    func fits(_ content: String, attachments: [Attachment] = []) -> Bool {
        guard let maximumPayload else { return true }
        return Self.frameSize(content, attachments: attachments) <= maximumPayload
    }

    /// About how large a message's `chat.send` frame is, with its images (escapes aside).
    static func frameSize(_ content: String, attachments: [Attachment]) -> Int {
        let images = attachments.reduce(0) { $0 + $1.content.utf8.count + ChatSendParams.attachmentOverhead + $1.name.utf8.count + $1.mimeType.utf8.count }
        return content.utf8.count + images + ChatSendParams.frameOverhead
    }

    private static let codec = OpenClawCodec()

    /// The id of the `chat.send` request of a message; its answer is matched by it.
    static func sendRequestID(_ message: String) -> String { "send:" + message }

    /// `chat.send` for a message: its id is the idempotency key, every time it is written;
    /// `queueMode` only into a run in progress, and only to a gateway that takes it.
    func sendRequest(_ message: DeliveryStateMachine.Pending, queueMode: WhileBusy? = nil) -> Data {
        Data(
            Self.codec.request(
                id: Self.sendRequestID(message.id), method: "chat.send",
                params: ChatSendParams(
                    sessionKey: sessionKey, message: message.content, idempotencyKey: message.id,
                    attachments: message.attachments.isEmpty
                        ? nil : message.attachments.map { ChatAttachment(mimeType: $0.mimeType, fileName: $0.name, content: $0.content) },
                    queueMode: takesQueueModes ? queueMode?.rawValue : nil)
            ).utf8)
    }

    /// The id of the question whether a message's run goes on; its answer is matched by it.
    static func askRequestID(_ message: String) -> String { "ask:" + message }

    /// `chat.send` again, with the same key, for a message whose run is under way: a question,
    /// not a copy. The gateway answers `in_flight` while the run goes on and `ok` once it
    /// ended, and starts nothing.
    func askRequest(id: String, content: String) -> Data {
        Data(
            Self.codec.request(
                id: Self.askRequestID(id), method: "chat.send", params: ChatSendParams(sessionKey: sessionKey, message: content, idempotencyKey: id)
            ).utf8)
    }

    /// A request any live gateway answers at once: the probe of a quiet connection.
    mutating func probeRequest() -> Data {
        requests += 1
        return Data(Self.codec.request(id: "probe:\(requests)", method: "health", params: [String: String]()).utf8)
    }

    /// `chat.history` for the session, asking the receipts of `asking` (only to a gateway that
    /// showed it has them); with `cursor`, what came after it instead of the last `limit` entries.
    mutating func historyRequest(limit: Int, now: Date, asking: [String]? = nil, cursor: JSONValue? = nil) -> Data {
        requests += 1
        let id = "history:\(requests)"
        history = HistoryLookup(id: id, limit: limit, sentAt: now, asked: asking ?? [], cursor: cursor)
        let params = ChatHistoryParams(sessionKey: sessionKey, limit: cursor == nil ? limit : nil, inputRunIds: asking, cursor: cursor)
        return Data(Self.codec.request(id: id, method: "chat.history", params: params).utf8)
    }

    /// `chat.history` for one entry cut to one character: its answer is small, and its
    /// `deltaCursor` marks the transcript's end.
    mutating func cursorRenewalRequest(now: Date) -> Data {
        requests += 1
        let id = "history:\(requests)"
        history = HistoryLookup(id: id, limit: 1, sentAt: now, renewal: true)
        return Data(
            Self.codec.request(id: id, method: "chat.history", params: ChatHistoryParams(sessionKey: sessionKey, limit: 1, maxChars: 1)).utf8)
    }

    /// The id prefix of the requests for the session's settings and usage.
    static let settingsRequestPrefix = "settings:"

    /// `sessions.list`, for the row of the session chatted in: its settings and usage.
    mutating func settingsRequest() -> Data {
        requests += 1
        return Data(Self.codec.request(id: "\(Self.settingsRequestPrefix)\(requests)", method: "sessions.list", params: [String: String]()).utf8)
    }

    /// A request made for a command; its answer is handed back as ``DeliveryStateMachine/Action/commandAnswered(id:ok:payload:error:)``.
    mutating func commandRequest(method: String, params: JSONValue?) -> (id: String, frame: Data) {
        requests += 1
        let id = "cmd:\(requests)"
        return (id, Data(Self.codec.encode(.request(id: id, method: method, params: params)).utf8))
    }
}

/// A reply being streamed on OpenClaw: one run.
struct OpenClawRun: Sendable, Equatable {
    /// The message it answers (the run id is that message's id), when it is Tether's.
    var inReplyTo: MessageID?
    var startedAt: Date
    /// The reply so far.
    var text = ""
    /// False after frames may have been missed (a gap, a reconnect): a protocol-4 increment
    /// cannot be appended until a delta with the whole text so far comes.
    var synced = true
    var grewAt: Date
    /// When an event of the run was last heard (a delta, or an `agent` event): a run heard of
    /// for the reply stall deadline is incomplete.
    var heardAt: Date
    /// The model's failure the gateway last reported for the run, in its words, while it retries.
    var failure: String?
    /// The message's text, to ask the gateway with its key whether a failing run still goes on.
    var messageText: String?
    /// When the gateway was last asked whether the failing run goes on.
    var askedAt: Date?
    /// The session it runs in (canonical): its events and history are that session's.
    var session: String?
    var publishedAt: Date?
    /// The reply as last published: the next progress carries what was added to it.
    var publishedText = ""
    /// Its length when it was last published whole (0: not yet): it goes whole again once doubled.
    var wholeLength = 0
    var publicationDue = false
    var updates = 0
    /// Whether the run called a tool: its end looks the history up for what the live events
    /// leave out (the tools' output unless verbose is full, the model's thinking).
    var calledTools = false
    /// Whether it called `exec`, which may need an approval the gateway follows up on.
    var calledExec = false
    /// The approval whose follow-up turn this is (the gateway's own run after an exec approval).
    var followUpOf: String?

    /// The id its reply is published under: the message's reply, or the follow-up's.
    var replyID: MessageID? { followUpOf.map(ApprovalFollowUps.replyID(of:)) ?? inReplyTo.map(HistoryMerge.replyID(of:)) }
}

/// A tool call started live and not yet ended.
struct LiveToolCall: Sendable, Equatable {
    var call: ToolCall
    /// The run that called it.
    var runID: String
    /// When it started, by the gateway's clock (the event's `ts`, in milliseconds).
    var startedAtMilliseconds: Int?
    /// When it started, by protod's clock: its entry's time.
    var startedAt: Date
}
