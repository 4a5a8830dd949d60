public import FoundationEssentials
public import TetherWire

// The commands tether-protod serves (``Endpoints/protocolHandler``): sending, the journal,
// the outbox and the gateway's sessions.

/// Send a chat message. The reply comes once the message is committed to the outbox.
/// What a message does when a reply is in progress in its session (today's OpenClaw gateways:
/// `chat.send`'s `queueMode`).
public enum WhileBusy: String, Codable, Sendable, CaseIterable {
    /// Joins the reply in progress: the gateway gives it to the run under way, whose reply
    /// answers both (`queueMode: "steer"`).
    case steer
    /// Stops the reply in progress, which ends incomplete, and is answered instead
    /// (`queueMode: "interrupt"`).
    case interrupt

    /// How protod's words begin for a message that asked to steer or interrupt where the
    /// gateway cannot: it waits for a reply of its own.
    public static let unavailableWordsPrefix = "this gateway cannot "
}

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
        /// Images sent with the message (OpenClaw only); see ``ImageAttachments`` for what is taken.
        public var attachments: [Attachment]?
        /// What it does if a reply is in progress when it goes out (OpenClaw gateways that offer
        /// it); absent: it waits, and gets a reply of its own once that one ends.
        public var whileBusy: WhileBusy?

        public init(
            id: MessageID, content: String, strategy: DeliveryStrategy? = nil, kind: String? = nil, fallback: DeliveryStrategy? = nil,
            retry: RetryPolicy? = nil, attachments: [Attachment]? = nil, whileBusy: WhileBusy? = nil
        ) {
            self.id = id
            self.content = content
            self.strategy = strategy
            self.kind = kind
            self.fallback = fallback
            self.retry = retry
            self.attachments = attachments
            self.whileBusy = whileBusy
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

extension SendMessageCommand {
    /// The most a message's text may take written as a JSON string (quotes and escapes
    /// included). A `send` body may be as large as ``BusSchema/maximumFrameBodySize`` for the
    /// images it carries, but the text also goes out alone, in `conv.message` and in replies
    /// of at most ``BusSchema/maximumBodySize``, with room for what surrounds it.
    public static let maximumTextBytes = BusSchema.maximumBodySize - ImageAttachments.busOverhead

    /// How long one attempt of a send waits for protod's answer: 2.5 s, and a second more for
    /// each 4 MiB of images it carries, which protod reads, checks and commits before answering
    /// (an attempt that gives up too soon would send the megabytes again).
    public static func attemptTimeout(for request: Request) -> Duration {
        let images = (request.attachments ?? []).reduce(0) { $0 + $1.content.utf8.count }
        return .milliseconds(2500) + .seconds(images / (4 << 20))
    }

    /// Why a message's text is too long to send, in words; nil when it is not.
    public static func textRefusal(_ text: String) -> String? {
        let bytes = text.utf8.count
        // Written as JSON, a byte takes at most six (`\u0001`): shorter text needs no measuring.
        guard bytes > maximumTextBytes / 6 else { return nil }
        // Encoding a string cannot fail.
        guard let written = try? BusSchema.encoder.encode(text).count, written > maximumTextBytes else { return nil }
        let escapes = written - 2 > bytes ? " (\((written - 2).grouped) with its escapes)" : ""
        return
            "the text is \(bytes.grouped) bytes\(escapes); a message's text is at most \((maximumTextBytes - 2).grouped) bytes: shorten it or send it in parts"
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

// MARK: Bounds tether-protod enforces

extension SendMessageCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        guard let retry else { return nil }
        if retry.attempts < 1 { return "retry.attempts must be at least 1 (it is \(retry.attempts))" }
        if retry.delayMilliseconds < 0 { return "retry.delayMilliseconds cannot be negative (it is \(retry.delayMilliseconds))" }
        if retry.timeoutMilliseconds < 1 { return "retry.timeoutMilliseconds must be at least 1 (it is \(retry.timeoutMilliseconds))" }
        return nil
    }
}

extension JournalCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        if after < 0 { return "after cannot be negative (it is \(after))" }
        return (1...JournalCommand.pageLimit).contains(limit) ? nil : "limit must be between 1 and \(JournalCommand.pageLimit) (it is \(limit))"
    }
}
