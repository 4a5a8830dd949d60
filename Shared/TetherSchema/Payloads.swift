public import FoundationEssentials
public import TetherWire

/// The kind of network interface a path goes through.
public enum InterfaceKind: String, Codable, Sendable, CaseIterable {
    case wired
    case wifi
    case cellular
    case loopback
    case other
}

/// The network path: whether a usable default route exists, and through what.
public struct NetworkPath: Codable, Hashable, Sendable {
    /// True when a default route leads through an interface that is up.
    public var satisfied: Bool
    /// The interface of the default route, if any.
    public var interface: String?
    /// What kind of interface that is.
    public var kind: InterfaceKind?
    /// Whether traffic over it may cost money (cellular).
    public var expensive: Bool
    /// Why the path is unsatisfied, in words.
    public var reason: String?

    public init(satisfied: Bool, interface: String?, kind: InterfaceKind?, expensive: Bool, reason: String? = nil) {
        self.satisfied = satisfied
        self.interface = interface
        self.kind = kind
        self.expensive = expensive
        self.reason = reason
    }
}

/// The phases of the connection to the gateway.
public enum ConnectionPhase: String, Codable, Sendable, CaseIterable {
    case disconnected
    case connecting
    case connected
    case reconnecting
    /// Closed on purpose until the front end resumes.
    case suspended
    /// No usable network path; waiting for one before trying again.
    case waitingForNetwork
    /// Given up until a manual reconnect, a network change, a resume or a new credential.
    case failed

    /// The words a person sees for this phase.
    public var words: String {
        switch self {
        case .disconnected: "Disconnected"
        case .connecting: "Connecting…"
        case .connected: "Connected"
        case .reconnecting: "Reconnecting…"
        case .suspended: "Disconnected (app suspended)"
        case .waitingForNetwork: "No network — waiting for connection."
        case .failed: "Connection lost — press r to reconnect"
        }
    }
}

/// Why connd gave up.
public enum ConnectionFailure: String, Codable, Sendable, CaseIterable {
    /// The gateway could not be reached for any of the first attempts.
    case unreachable
    /// The gateway rejected the token (HTTP 401 or 403); no retry until it changes.
    case credentialRejected
    /// The token cannot be read here (a file missing, empty or readable by others, a
    /// variable unset): the gateway was not asked. Connects once it can be read.
    case credentialUnavailable
    /// The TLS handshake failed: the certificate is not trusted or does not match.
    case tls
    /// Every reconnect attempt after a lost connection failed.
    case retriesExhausted
    /// OpenClaw: the gateway does not know this device yet; connd asks again by itself every
    /// few seconds, and connects once a person has approved it (`lastError` names the request).
    case pairingRequired
    /// OpenClaw: the gateway speaks no protocol version Tether offers (3 and 4).
    case protocolMismatch
    /// OpenClaw: the gateway refused this client's origin.
    case originRefused
    /// OpenClaw: the gateway let Tether in without the scopes a chat client needs.
    case scopeMissing
    /// The gateway refused the connection for a reason retrying cannot change (see `lastError`).
    case gatewayRefused

    /// The way forward, in words.
    public var advice: String {
        switch self {
        case .unreachable: "check the gateway address and that the gateway is running"
        case .credentialRejected: "the token was rejected: fix the token file, then reconnect"
        case .credentialUnavailable: "the token cannot be read here (the error says why): fix it; Tether connects as soon as it can read it"
        case .tls: "the gateway's certificate is not trusted: check the address, or pass its CA with --ca-file"
        case .retriesExhausted: "the gateway is not answering: reconnect when it is back"
        case .pairingRequired: "approve this device on the gateway (openclaw devices approve ID); Tether connects by itself once approved"
        case .protocolMismatch: "the gateway speaks another protocol version: update Tether or the gateway"
        case .originRefused: "the gateway refused this client: check the gateway's allowed origins"
        case .scopeMissing: "the gateway did not grant operator.read and operator.write: grant them to this device, then reconnect"
        case .gatewayRefused: "the gateway refused the connection: see the error, fix it, then reconnect"
        }
    }
}

/// Who connd connects as: enough to reconnect the same way, never the secret.
public struct ConnectionIdentity: Codable, Hashable, Sendable {
    /// The gateway URL.
    public var url: String
    /// The user, when the URL or configuration names one.
    public var user: String?
    /// How connd authenticates: `bearer-token`.
    public var authMethod: String
    /// Which credential: the token file's path, or the environment variable's name.
    public var keyID: String?

    public init(url: String, user: String? = nil, authMethod: String, keyID: String?) {
        self.url = url
        self.user = user
        self.authMethod = authMethod
        self.keyID = keyID
    }
}

/// The connection to the gateway, as connd publishes it: enough for a front end to draw
/// its banner from this alone.
public struct ConnectionStatus: Codable, Hashable, Sendable {
    public var phase: ConnectionPhase
    /// The gateway URL (never with a secret in it).
    public var url: String
    /// Counts connections made since connd started; frames carry it so that nothing meant
    /// for a dead connection is written to a new one.
    public var epoch: Int
    /// Names the open connection uniquely, across connd restarts too; nil when not connected.
    public var connectionID: String?
    /// The attempt number while connecting or reconnecting, from 1.
    public var attempt: Int
    /// When the next attempt starts, while waiting to reconnect.
    public var nextAttemptAt: Date?
    /// The last error, in words.
    public var lastError: String?
    /// Why connd gave up, when the phase is failed.
    public var failure: ConnectionFailure?
    /// Who connd connects as.
    public var identity: ConnectionIdentity?
    /// What suspended the connection, while the phase is suspended.
    public var suspendReason: SuspendReason?
    /// What the gateway said of itself when the open connection began; nil when not connected.
    public var gateway: GatewayInfo?
    /// What a person should read: the phase's words, with the way forward when failed.
    public var words: String

    public init(
        phase: ConnectionPhase, url: String, epoch: Int, connectionID: String? = nil, attempt: Int = 0, nextAttemptAt: Date? = nil,
        lastError: String? = nil, failure: ConnectionFailure? = nil, identity: ConnectionIdentity? = nil, suspendReason: SuspendReason? = nil,
        gateway: GatewayInfo? = nil
    ) {
        self.suspendReason = suspendReason
        self.gateway = gateway
        self.phase = phase
        self.url = url
        self.epoch = epoch
        self.connectionID = connectionID
        self.attempt = attempt
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.failure = failure
        self.identity = identity
        self.words =
            if failure == .pairingRequired, let lastError {
                // The request to approve is in the error: the way forward is those words.
                "Waiting for approval: \(lastError)"
            } else {
                failure.map { "\(phase.words) (\($0.advice))" } ?? phase.words
            }
    }
}

/// The dialect a gateway speaks on the wire.
public enum WireDialect: String, Codable, Sendable, CaseIterable {
    /// The seeds' JSON envelope (docs/WIRE.md).
    case seed
    /// OpenClaw's gateway protocol, versions 3 and 4.
    case openclaw
}

/// The open connection's gateway, as its handshake showed it (never a secret).
public struct GatewayInfo: Codable, Hashable, Sendable {
    public var dialect: WireDialect
    /// OpenClaw: the protocol version in use (3 or 4).
    public var protocolVersion: Int?
    /// OpenClaw: the gateway's release.
    public var serverVersion: String?
    /// OpenClaw: the gateway's name for this connection; a restarted gateway has new ones.
    public var serverConnectionID: String?
    /// OpenClaw: how long the gateway had been running when this connection began.
    public var uptimeMilliseconds: Int?
    /// OpenClaw: when the gateway started, by connd's clock (its uptime taken from the time of
    /// the handshake): a program that joins the connection later reads it as it is.
    public var startedAt: Date?
    /// OpenClaw: the gateway's tick interval; no tick for twice this is a dead connection.
    public var tickIntervalMilliseconds: Int?
    /// OpenClaw: the largest frame the gateway reads.
    public var maximumPayload: Int?
    /// OpenClaw: the key the `main` session alias stands for.
    public var mainSessionKey: String?
    /// The gateway's clock minus connd's, in milliseconds, measured at the handshake (0 when unknown).
    public var clockOffsetMilliseconds: Int?
    /// The OpenClaw device id Tether connected as.
    public var deviceID: String?
    /// OpenClaw: connected with the token the gateway issued to this device, because it
    /// refused the shared token (the token file needs the gateway's new token).
    public var connectedWithDeviceToken: Bool?

    public init(
        dialect: WireDialect, protocolVersion: Int? = nil, serverVersion: String? = nil, serverConnectionID: String? = nil,
        uptimeMilliseconds: Int? = nil, startedAt: Date? = nil, tickIntervalMilliseconds: Int? = nil, maximumPayload: Int? = nil,
        mainSessionKey: String? = nil, clockOffsetMilliseconds: Int? = nil, deviceID: String? = nil
    ) {
        self.dialect = dialect
        self.protocolVersion = protocolVersion
        self.serverVersion = serverVersion
        self.serverConnectionID = serverConnectionID
        self.uptimeMilliseconds = uptimeMilliseconds
        self.startedAt = startedAt
        self.tickIntervalMilliseconds = tickIntervalMilliseconds
        self.maximumPayload = maximumPayload
        self.mainSessionKey = mainSessionKey
        self.clockOffsetMilliseconds = clockOffsetMilliseconds
        self.deviceID = deviceID
    }
}

/// Which conversation of the gateway Tether chats in, as protod publishes it (retained).
public struct ConversationSession: Codable, Hashable, Sendable {
    /// The dialect of the connection it was decided on.
    public var dialect: WireDialect
    /// OpenClaw: the session key in use (the `main` alias resolved); nil in the seed dialect,
    /// whose gateway has one conversation per connection's token.
    public var sessionKey: String?
    /// What was asked for (`--session`, `tether session use`), when it differs from the key.
    public var requested: String?
    /// OpenClaw, after a switch: the session that messages sent before it are still in, with
    /// how many of them wait for the gateway or its reply there. Tether chats in one session
    /// at a time: it goes over to `sessionKey` once they are answered; messages sent since
    /// wait in the outbox until then. Nil when nothing is left behind.
    public var finishing: String?
    public var finishingMessages: Int?

    public init(dialect: WireDialect, sessionKey: String?, requested: String? = nil, finishing: String? = nil, finishingMessages: Int? = nil) {
        self.dialect = dialect
        self.sessionKey = sessionKey
        self.requested = requested
        self.finishing = finishing
        self.finishingMessages = finishingMessages
    }
}

/// What suspended the connection; it also says what resumes it by itself.
public enum SuspendReason: String, Codable, Sendable, CaseIterable {
    /// A front end or `tether suspend` asked; only a resume command resumes it.
    case command
    /// The last front end left and none came back within the grace period; a front end arriving resumes it.
    case idle
    /// The machine went to sleep (logind); waking resumes it.
    case sleep
}

/// A text frame of the wire protocol, carried over the bus.
public struct WireFrame: Codable, Hashable, Sendable {
    /// The connection the frame came from or is meant for; `nil` means the current one.
    public var epoch: Int?
    /// The frame, exactly as on the WebSocket.
    public var text: String

    public init(epoch: Int?, text: String) {
        self.epoch = epoch
        self.text = text
    }
}

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

    /// How far along a message is, so an older update never overwrites a newer one.
    public var rank: Int {
        switch self {
        case .queued: 0
        case .sent: 1
        case .accepted, .incomplete: 2
        case .delivered, .failed, .expired, .cancelled, .received: 3
        }
    }

    /// Whether nothing more will happen to the message.
    public var isFinal: Bool { rank == 3 }

    /// The mark a front end shows beside a message the user sent: `✓✓ delivered`.
    public var mark: String {
        switch self {
        case .queued: "… queued"
        case .sent: "✓ sent"
        case .accepted: "✓ accepted, waiting in the gateway's queue"
        case .delivered: "✓✓ delivered"
        case .failed: "✗ failed"
        case .expired: "✗ expired"
        case .cancelled: "✗ cancelled"
        case .received, .incomplete: rawValue
        }
    }
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

    public init(
        id: MessageID, sender: Sender, content: String, timestamp: Date, status: DeliveryStatus, inReplyTo: MessageID? = nil,
        attribution: ReplyAttribution? = nil, detail: String? = nil, author: String? = nil, gatewayID: String? = nil, session: String? = nil,
        revision: Int? = nil
    ) {
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

    public init(id: MessageID, status: DeliveryStatus, detail: String? = nil, unclaimedReply: MessageID? = nil, revision: Int? = nil) {
        self.id = id
        self.status = status
        self.detail = detail
        self.unclaimedReply = unclaimedReply
        self.revision = revision
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

    public init(pending: Int, undelivered: [String: Int]? = nil, lastUndelivered: DeliveryUpdate? = nil) {
        self.pending = pending
        self.undelivered = undelivered
        self.lastUndelivered = lastUndelivered
    }
}

/// A program is alive.
public struct Heartbeat: Codable, Hashable, Sendable {
    public var program: String
    public var pid: Int32
    /// A word for what it is doing (`running`, `connected`, …).
    public var state: String
    public var startedAt: Date
    /// Bus traffic counters.
    public var published: UInt64
    public var received: UInt64
    /// Bus messages dropped, of every kind.
    public var dropped: UInt64
    /// Bus messages dropped, by kind: `malformed`, `oversized`, `unknownSchema`, `lagged`,
    /// `publishRefused`, `malformedCommand`, `oversizedCommand`, `commandOverflow`, and
    /// `undecodable TOPIC` for a body that is not what the schema says for its topic.
    public var droppedByKind: [String: UInt64]?
    /// The program's own counters, by name (tether-protod: `malformedFrames`, `unknownTypes`).
    public var counters: [String: Int]?

    public init(
        program: String, pid: Int32, state: String, startedAt: Date, published: UInt64, received: UInt64, dropped: UInt64,
        droppedByKind: [String: UInt64]? = nil, counters: [String: Int]? = nil
    ) {
        self.program = program
        self.pid = pid
        self.state = state
        self.startedAt = startedAt
        self.published = published
        self.received = received
        self.dropped = dropped
        self.droppedByKind = droppedByKind
        self.counters = counters
    }
}

/// How healthy delivery is, from the outcomes of the latest messages.
public enum HealthState: String, Codable, Sendable, CaseIterable {
    /// The latest messages were all acknowledged.
    case healthy
    /// One or two of the latest five were not.
    case degraded
    /// Three or more of the latest five were not.
    case unhealthy
}

/// The protocol handler's health, retained on `health`.
public struct HealthReport: Codable, Hashable, Sendable {
    public var state: HealthState
    /// Outcomes in the window the state is judged on.
    public var recentSuccesses: Int
    public var recentFailures: Int
    public var since: Date

    public init(state: HealthState, recentSuccesses: Int, recentFailures: Int, since: Date) {
        self.state = state
        self.recentSuccesses = recentSuccesses
        self.recentFailures = recentFailures
        self.since = since
    }
}

/// How serious a suggestion is.
public enum SuggestionSeverity: String, Codable, Sendable, CaseIterable, Comparable {
    case minor
    case moderate
    case major
    case critical

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Something a person can do about a problem, in words.
public struct RecoverySuggestion: Codable, Hashable, Sendable {
    public var severity: SuggestionSeverity
    public var text: String

    public init(severity: SuggestionSeverity, text: String) {
        self.severity = severity
        self.text = text
    }
}

/// What happened inside the protocol handler, for people and tools diagnosing it.
public struct DiagnosticEvent: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case messageSent
        case deliveryFailed
        /// No acknowledgement within the retry policy's timeout on a live connection; the
        /// message is kept and the connection probed.
        case acknowledgementOverdue
        /// The gateway did not answer a probe in time: the connection is replaced.
        case probeFailed
        case fallbackUsed
        case queued
        case queueFlushed
        case queueOverflow
        case healthChanged
        case recoveryAttempted
        case recoverySucceeded
        case recoveryFailed
        /// OpenClaw: events numbered between two that arrived never came. The gateway numbers
        /// events for all its clients, so most gaps lose nothing of Tether's; while a reply of
        /// Tether's is under way, the history is looked up (its text so far is kept).
        case sequenceGap
        /// OpenClaw: a history lookup settled messages written and not acknowledged: `count`
        /// were in the gateway's transcript (delivered), the rest are written again.
        case historyChecked
        /// OpenClaw: the model failed while answering `messageID`, in the gateway's words
        /// (`willRetry`: the gateway is retrying).
        case replyFailed
        /// OpenClaw: Tether went over to another session (`detail` names both): the one chosen,
        /// once nothing of Tether's was left unanswered in the one before.
        case sessionChanged
    }

    public var kind: Kind
    public var messageID: MessageID?
    /// From the first write to the acknowledgement, for `messageSent`.
    public var durationMilliseconds: Int?
    /// Whether the message will be tried again, for `deliveryFailed`.
    public var willRetry: Bool?
    /// Messages waiting, for `queued`.
    public var queueSize: Int?
    /// Messages written, for `queueFlushed`.
    public var count: Int?
    public var detail: String?

    public init(
        kind: Kind, messageID: MessageID? = nil, durationMilliseconds: Int? = nil, willRetry: Bool? = nil, queueSize: Int? = nil,
        count: Int? = nil, detail: String? = nil
    ) {
        self.kind = kind
        self.messageID = messageID
        self.durationMilliseconds = durationMilliseconds
        self.willRetry = willRetry
        self.queueSize = queueSize
        self.count = count
        self.detail = detail
    }
}

/// A front end is attached to the set. Every front end publishes one a second while it
/// runs and one with `leaving` as it exits; connd suspends the connection when the last
/// one has gone for the grace period.
public struct FrontEndPresence: Codable, Hashable, Sendable {
    public enum State: String, Codable, Sendable, CaseIterable {
        /// Running and drawing the conversation.
        case active
        /// Exiting now; do not wait for its presence to time out.
        case leaving
    }

    /// What kind of front end: `tether`, `tether watch`, `example-python`, …
    public var frontEnd: String
    /// Names this run of the front end; unique across processes and machines.
    public var instance: String
    public var pid: Int32
    public var state: State

    public init(frontEnd: String, instance: String, pid: Int32, state: State) {
        self.frontEnd = frontEnd
        self.instance = instance
        self.pid = pid
        self.state = state
    }

    /// A presence not renewed for this long means the front end is gone.
    public static let timeout: Duration = .seconds(3)
}

/// The front ends attached now: those whose presence was renewed within
/// ``FrontEndPresence/timeout`` and that have not said they leave.
public struct AttachedFrontEnds: Codable, Hashable, Sendable {
    /// By kind, then pid; each as its latest presence said.
    public var frontEnds: [FrontEndPresence]

    public init(frontEnds: [FrontEndPresence]) {
        self.frontEnds = frontEnds
    }
}

/// What a front end needs to draw its screen again as the user left it: kept by snapd,
/// one for each kind of front end.
public struct DisplaySnapshot: Codable, Hashable, Sendable {
    /// The kind of front end it belongs to.
    public var frontEnd: String
    /// The lines that were on screen, top to bottom, as drawn.
    public var screen: [String]
    /// How many lines the view was scrolled up from the newest; 0 at the bottom.
    public var scrollOffset: Int
    /// What was typed and not sent.
    public var draft: String
    /// Messages sent from the composer, oldest first, for recalling them.
    public var history: [String]
    public var savedAt: Date

    public init(frontEnd: String, screen: [String] = [], scrollOffset: Int = 0, draft: String = "", history: [String] = [], savedAt: Date = Date()) {
        self.frontEnd = frontEnd
        self.screen = screen
        self.scrollOffset = max(0, scrollOffset)
        self.draft = draft
        self.history = history
        self.savedAt = savedAt
    }
}

/// snapd committed something a front end or connd will need after a restart.
public struct SnapshotSaved: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// A front end's display snapshot.
        case display
        /// The connection identity.
        case identity
        /// The transcript caught up with protod's journal after a gap.
        case transcript
        /// The transcript's oldest entries were removed to stay within its cap.
        case compaction
    }

    public var kind: Kind
    /// For a display snapshot: whose.
    public var frontEnd: String?
    /// For the transcript: the revision it holds every change up to.
    public var revision: Int?
    /// For a compaction or a catch-up: how many entries.
    public var count: Int?

    public init(kind: Kind, frontEnd: String? = nil, revision: Int? = nil, count: Int? = nil) {
        self.kind = kind
        self.frontEnd = frontEnd
        self.revision = revision
        self.count = count
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

/// The state of a program's files: a full disk now, databases found damaged at start and
/// set aside. Retained on `storage` by each program that keeps a database.
public struct StorageReport: Codable, Hashable, Sendable {
    public enum State: String, Codable, Sendable {
        /// Writes succeed.
        case ok
        /// The disk holding the program's files is full: what needs writing is refused or waits.
        case full
    }

    public var program: String
    public var state: State
    /// When full: the file system, the room left and what to do, in words.
    public var words: String?
    /// Databases found damaged as the program started, set aside and replaced, with what could be recovered.
    public var replaced: [ReplacedDatabase]
    /// Since when the state holds.
    public var since: Date

    public init(program: String, state: State, words: String? = nil, replaced: [ReplacedDatabase] = [], since: Date) {
        self.program = program
        self.state = state
        self.words = words
        self.replaced = replaced
        self.since = since
    }

    /// Whether there is anything to tell a person.
    public var hasProblem: Bool { state != .ok || !replaced.isEmpty }
}

/// A database found damaged at start: set aside, a new one started in its place.
public struct ReplacedDatabase: Codable, Hashable, Sendable {
    /// The file that was damaged.
    public var file: String
    /// Where it was moved, still readable by hand.
    public var movedTo: String?
    /// What was wrong, in SQLite's words or ours ("file is not a database").
    public var problem: String
    /// The whole story for a person: what was damaged, where it went, what was recovered.
    public var words: String
    public var at: Date

    public init(file: String, movedTo: String?, problem: String, words: String, at: Date) {
        self.file = file
        self.movedTo = movedTo
        self.problem = problem
        self.words = words
        self.at = at
    }
}
