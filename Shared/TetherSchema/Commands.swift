public import FoundationEssentials
public import TetherWire

/// A command a program accepts over its request endpoint, with its request and reply bodies.
///
/// Commands travel request/reply (a DEALER to the owner's ROUTER) so they are not lost:
/// the caller retries with the same request id and the owner handles each id once.
public protocol BusCommand: Sendable {
    associatedtype Request: Codable & Sendable
    associatedtype Reply: Codable & Sendable
    /// The name of the command on the wire.
    static var method: String { get }
    /// The endpoint (a socket name in the run directory) of the program that owns it.
    static var endpoint: String { get }
}

/// The body of an `error` reply to a command: a code for programs and words for people.
public struct CommandErrorReply: Codable, Hashable, Sendable, Error {
    public enum Code: String, Codable, Sendable, CaseIterable {
        /// Not a command: the wrong number of frames, a request id or method that is not
        /// UTF-8, or a body that is not the method's request.
        case malformed
        /// The body is over the bus's 1 MiB.
        case tooLarge
        /// The owner has no such method.
        case unknownMethod
        /// A field outside its bounds (an `attempts` below 1, a `limit` outside 1–1000…).
        case outOfBounds
        /// The owner understood and said no (the outbox full, an empty message…): nothing was done.
        case refused
        /// The owner could not carry it out (its database, a gateway that did not answer).
        case failed
        /// The disk holding the owner's files is full: nothing was done; the message says
        /// which file system and what to do.
        case diskFull
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// A request with bounds on its fields, checked by the owner before it is handled.
public protocol BoundedRequest {
    /// Why a field is out of its bounds, in words; nil when all are within them.
    var outOfBounds: String? { get }
}

/// Endpoint names in the run directory.
public enum Endpoints {
    /// Publishers connect here (the proxy's XSUB side).
    public static let busIn = "bus.in"
    /// Subscribers connect here (the proxy's XPUB side).
    public static let busOut = "bus.out"
    /// tether-protod's commands.
    public static let protocolHandler = "protod.cmd"
    /// tether-snapd's commands.
    public static let snapshotStore = "snapd.cmd"
    /// tether-connd's commands.
    public static let connectionManager = "connd.cmd"
}

/// Send a chat message. The reply comes once the message is committed to the outbox.
public enum SendMessageCommand: BusCommand {
    public static let method = "send"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        /// Chosen by the front end; sending the same id again never sends the message twice.
        public var id: MessageID
        public var content: String
        /// How to deliver it; queued when absent.
        public var strategy: DeliveryStrategy?
        /// With `latestOnly`: the kind of message, of which only the newest is kept.
        public var kind: String?
        /// What to do instead when `strategy` cannot deliver now (immediate while disconnected).
        public var fallback: DeliveryStrategy?
        /// How persistently to wait for the acknowledgement; protod's default when absent.
        public var retry: RetryPolicy?

        public init(
            id: MessageID, content: String, strategy: DeliveryStrategy? = nil, kind: String? = nil, fallback: DeliveryStrategy? = nil,
            retry: RetryPolicy? = nil
        ) {
            self.id = id
            self.content = content
            self.strategy = strategy
            self.kind = kind
            self.fallback = fallback
            self.retry = retry
        }
    }

    public struct Reply: Codable, Sendable {
        public var id: MessageID
        /// Where the message stands now.
        public var status: DeliveryStatus
        /// False when the id was already in the outbox.
        public var accepted: Bool
        /// What the sender must know of its message, in words: with protod's `--when-full
        /// drop-oldest`, that it may be dropped unsent.
        public var warning: String?

        public init(id: MessageID, status: DeliveryStatus, accepted: Bool, warning: String? = nil) {
            self.id = id
            self.status = status
            self.accepted = accepted
            self.warning = warning
        }
    }
}

/// Fetch the latest transcript from the snapshot store, a page at a time, newest page first.
public enum TranscriptCommand: BusCommand {
    public static let method = "transcript"
    public static let endpoint = Endpoints.snapshotStore

    /// The most entries one reply holds, so that a reply stays well under the bus's 1 MiB.
    public static let pageLimit = 1000

    public struct Request: Codable, Sendable {
        /// The most recent entries to return, oldest first (at most ``TranscriptCommand/pageLimit``).
        public var limit: Int
        /// Only entries before this position (from an earlier reply's `nextBefore`); nil for the newest.
        public var before: Int?
        /// OpenClaw: only the entries of this session (its canonical key, as `conv.session`
        /// says it), and those that name none; nil: of the session `conv.session` said last.
        public var session: String?

        public init(limit: Int = 1000, before: Int? = nil, session: String? = nil) {
            self.limit = limit
            self.before = before
            self.session = session
        }
    }

    public struct Reply: Codable, Sendable {
        public var entries: [TranscriptEntry]
        /// Where the next older page starts; nil when there is none.
        public var nextBefore: Int?
        /// The store holds every conversation change up to this revision: a front end drops
        /// the live changes it receives with a revision no higher (the Clone pattern).
        public var revision: Int

        public init(entries: [TranscriptEntry], nextBefore: Int? = nil, revision: Int = 0) {
            self.entries = entries
            self.nextBefore = nextBefore
            self.revision = revision
        }
    }
}

/// What a front end needs for its first frame, in one request to snapd: its display
/// snapshot, the connection identity and the newest page of the transcript.
public enum SnapshotCommand: BusCommand {
    public static let method = "snapshot"
    public static let endpoint = Endpoints.snapshotStore

    public struct Request: Codable, Sendable {
        /// The kind of front end whose display snapshot to return.
        public var frontEnd: String
        /// The most transcript entries to return (at most ``TranscriptCommand/pageLimit``).
        public var limit: Int
        /// OpenClaw: only the transcript of this session (see ``TranscriptCommand/Request/session``).
        public var session: String?

        public init(frontEnd: String, limit: Int = TranscriptCommand.pageLimit, session: String? = nil) {
            self.frontEnd = frontEnd
            self.limit = limit
            self.session = session
        }
    }

    public struct Reply: Codable, Sendable {
        /// The front end's display as it last saved it; nil if it never did.
        public var display: DisplaySnapshot?
        /// Who connd connects as, as last published; nil before connd ever ran.
        public var identity: ConnectionIdentity?
        /// The newest page of the transcript; older pages come from ``TranscriptCommand``.
        public var transcript: TranscriptCommand.Reply
        /// Replies still streaming, as far as they came, in the order they started.
        public var streaming: [StreamProgress]
        /// The conversation as `conv.session` said it last, whose transcript this is when the
        /// request named no session; nil before protod ever said.
        public var session: ConversationSession?

        public init(
            display: DisplaySnapshot?, identity: ConnectionIdentity?, transcript: TranscriptCommand.Reply, streaming: [StreamProgress] = [],
            session: ConversationSession? = nil
        ) {
            self.display = display
            self.identity = identity
            self.transcript = transcript
            self.streaming = streaming
            self.session = session
        }
    }
}

/// Keep a front end's display snapshot; the reply comes once it is committed.
public enum SaveDisplayCommand: BusCommand {
    public static let method = "display.save"
    public static let endpoint = Endpoints.snapshotStore

    public typealias Request = DisplaySnapshot

    public struct Reply: Codable, Sendable {
        public var savedAt: Date

        public init(savedAt: Date) {
            self.savedAt = savedAt
        }
    }
}

/// The conversation changes tether-protod published after a revision, oldest first: how
/// snapd fetches what it missed while it was down (the Clone pattern's catch-up).
public enum JournalCommand: BusCommand {
    public static let method = "journal"
    public static let endpoint = Endpoints.protocolHandler

    /// The most changes one reply holds.
    public static let pageLimit = 1000

    public struct Request: Codable, Sendable {
        /// Changes with a higher revision than this.
        public var after: Int
        public var limit: Int

        public init(after: Int, limit: Int = JournalCommand.pageLimit) {
            self.after = after
            self.limit = limit
        }
    }

    public struct Reply: Codable, Sendable {
        public var changes: [ConversationChange]
        /// Names the journal; it changes when the journal is made anew (its file deleted),
        /// and a reader must then start again from revision 0.
        public var journal: String
        /// The oldest revision the journal still holds: older changes are gone.
        public var oldest: Int
        /// The newest revision.
        public var latest: Int

        public init(changes: [ConversationChange], journal: String, oldest: Int, latest: Int) {
            self.changes = changes
            self.journal = journal
            self.oldest = oldest
            self.latest = latest
        }
    }
}

/// Tell connd to change what it is doing with the connection.
public enum ConnectionCommand: BusCommand {
    public static let method = "connection"
    public static let endpoint = Endpoints.connectionManager

    public enum Action: String, Codable, Sendable, CaseIterable {
        /// Try to connect now, whatever the backoff or a failure says.
        case reconnect
        /// Close the connection gracefully and stay closed until resume.
        case suspend
        /// Connect again after a suspend, with the same identity and credential.
        case resume
    }

    public struct Request: Codable, Sendable {
        public var action: Action
        /// Why, in words, for the log (tether-protod asks for a new connection when the
        /// open one failed a probe).
        public var reason: String?

        public init(action: Action, reason: String? = nil) {
            self.action = action
            self.reason = reason
        }
    }

    public struct Reply: Codable, Sendable {
        /// False when the action does not apply now (resume while not suspended, …).
        public var accepted: Bool
        /// The phase after the action.
        public var phase: ConnectionPhase

        public init(accepted: Bool, phase: ConnectionPhase) {
            self.accepted = accepted
            self.phase = phase
        }
    }
}

/// How a message is delivered.
public enum DeliveryStrategy: String, Codable, Sendable, CaseIterable {
    /// Now or not at all: failed at once when there is no connection.
    case immediate
    /// Kept in order until delivered, across disconnects and restarts.
    case queued
    /// Queued, but only the newest message of its kind is kept: older ones not yet sent are cancelled.
    case latestOnly
}

/// How persistently a message waits for the gateway's acknowledgement on an open connection:
/// up to `attempts` writes, each given `timeout` to be acknowledged, `delay` apart. Writes
/// made again after a reconnect do not count.
public struct RetryPolicy: Codable, Hashable, Sendable {
    public var attempts: Int
    public var delayMilliseconds: Int
    public var timeoutMilliseconds: Int

    public init(attempts: Int, delayMilliseconds: Int, timeoutMilliseconds: Int) {
        self.attempts = max(1, attempts)
        self.delayMilliseconds = max(0, delayMilliseconds)
        self.timeoutMilliseconds = max(1, timeoutMilliseconds)
    }

    /// 3 attempts, 200 ms apart, 10 s each.
    public static let `default` = RetryPolicy(attempts: 3, delayMilliseconds: 200, timeoutMilliseconds: 10_000)
    /// 5 attempts, 1 s apart, 30 s each.
    public static let patient = RetryPolicy(attempts: 5, delayMilliseconds: 1000, timeoutMilliseconds: 30_000)
    /// One attempt, 10 s.
    public static let none = RetryPolicy(attempts: 1, delayMilliseconds: 0, timeoutMilliseconds: 10_000)

    /// The policies with a name, by name.
    public static let byName: KeyValuePairs<String, RetryPolicy> = ["default": .default, "patient": .patient, "none": RetryPolicy.none]

    /// A policy by name: default, patient or none.
    public static func named(_ name: String) -> RetryPolicy? {
        byName.first { $0.key == name }?.value
    }

    /// The name of this policy, when it has one.
    public var name: String? {
        Self.byName.first { $0.value == self }?.key
    }
}

/// Cancel one message not yet delivered, or all of them.
public enum CancelCommand: BusCommand {
    public static let method = "cancel"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        /// The message to cancel; every pending one when nil.
        public var id: MessageID?

        public init(id: MessageID?) {
            self.id = id
        }
    }

    public struct Reply: Codable, Sendable {
        /// The messages cancelled.
        public var cancelled: [MessageID]

        public init(cancelled: [MessageID]) {
            self.cancelled = cancelled
        }
    }
}

/// Stop the reply the gateway is writing (OpenClaw: `chat.abort` for the session). The
/// reply ends `incomplete`, saying it was stopped.
public enum AbortCommand: BusCommand {
    public static let method = "abort"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        /// The message whose reply to stop; every reply of the session when nil.
        public var id: MessageID?

        public init(id: MessageID? = nil) {
            self.id = id
        }
    }

    public struct Reply: Codable, Sendable {
        /// The messages whose replies the gateway stopped (none: nothing was running).
        public var stopped: [MessageID]

        public init(stopped: [MessageID]) {
            self.stopped = stopped
        }
    }
}

/// The gateway's sessions (OpenClaw: `sessions.list`).
public enum SessionsCommand: BusCommand {
    public static let method = "sessions"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        public init() {}
    }

    public struct Reply: Codable, Sendable {
        public struct Session: Codable, Hashable, Sendable {
            public var key: String
            public var displayName: String?
            /// When it last changed, by the gateway's clock.
            public var updatedAt: Date?

            public init(key: String, displayName: String? = nil, updatedAt: Date? = nil) {
                self.key = key
                self.displayName = displayName
                self.updatedAt = updatedAt
            }
        }

        public var sessions: [Session]
        /// The session Tether chats in.
        public var current: String?

        public init(sessions: [Session], current: String?) {
            self.sessions = sessions
            self.current = current
        }
    }
}

/// Chat in another session of the gateway (OpenClaw), without restarting anything. The
/// choice is kept across restarts of protod (until its `--session` changes). Messages sent
/// before it still go to the session they were sent in: Tether goes over once they are
/// answered, and what is sent meanwhile waits in the outbox.
public enum SessionUseCommand: BusCommand {
    public static let method = "session.use"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        /// The session as a person writes it (`side`, `main`) or its canonical key (`agent:main:side`).
        public var key: String

        public init(key: String) {
            self.key = key
        }
    }

    public struct Reply: Codable, Sendable {
        /// The conversation as protod publishes it now on `conv.session`; nil before any
        /// OpenClaw gateway was connected (the key is made canonical once one is).
        public var session: ConversationSession?
        /// What happens next, in words.
        public var detail: String

        public init(session: ConversationSession?, detail: String) {
            self.session = session
            self.detail = detail
        }
    }
}

extension SessionUseCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        if key.allSatisfy(\.isWhitespace) { return "the session key is empty" }
        if key.utf8.count > 512 { return "the session key is longer than 512 bytes (it is \(key.utf8.count))" }
        if key.contains(where: { $0.isNewline }) { return "the session key contains a line break" }
        return nil
    }
}

/// Ask protod to try to recover: reconnect through connd and send what is waiting.
public enum RecoverCommand: BusCommand {
    public static let method = "recover"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        public init() {}
    }

    public struct Reply: Codable, Sendable {
        /// Whether connd took the reconnect.
        public var reconnecting: Bool
        public var health: HealthState

        public init(reconnecting: Bool, health: HealthState) {
            self.reconnecting = reconnecting
            self.health = health
        }
    }
}

// MARK: Bounds the owners enforce

extension SendMessageCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        guard let retry else { return nil }
        if retry.attempts < 1 { return "retry.attempts must be at least 1 (it is \(retry.attempts))" }
        if retry.delayMilliseconds < 0 { return "retry.delayMilliseconds cannot be negative (it is \(retry.delayMilliseconds))" }
        if retry.timeoutMilliseconds < 1 { return "retry.timeoutMilliseconds must be at least 1 (it is \(retry.timeoutMilliseconds))" }
        return nil
    }
}

extension TranscriptCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        (1...TranscriptCommand.pageLimit).contains(limit) ? nil : "limit must be between 1 and \(TranscriptCommand.pageLimit) (it is \(limit))"
    }
}

extension SnapshotCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        (1...TranscriptCommand.pageLimit).contains(limit) ? nil : "limit must be between 1 and \(TranscriptCommand.pageLimit) (it is \(limit))"
    }
}

extension JournalCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        if after < 0 { return "after cannot be negative (it is \(after))" }
        return (1...JournalCommand.pageLimit).contains(limit) ? nil : "limit must be between 1 and \(JournalCommand.pageLimit) (it is \(limit))"
    }
}
