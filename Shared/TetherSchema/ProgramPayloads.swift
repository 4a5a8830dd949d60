public import FoundationEssentials
public import TetherWire

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

/// A front end is attached to the set. Every front end publishes one as it starts, again
/// every `renewalSeconds` while it runs, and one with `leaving` as it exits; connd counts a
/// front end gone when it says it leaves, or when ``missedRenewals`` renewals did not come
/// (it crashed), and suspends the connection when the last one has gone for the grace period.
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
    /// Seconds until this front end renews its presence; absent, every second (the front
    /// ends written before it could be said).
    public var renewalSeconds: Int?
    /// Whether the user is looking at this front end; absent when it cannot tell (counted as
    /// ``Attention/focused`` while it is attached).
    public var attention: Attention?

    /// Whether a person is looking at a front end, as far as it can tell.
    public enum Attention: String, Codable, Sendable, CaseIterable {
        /// The user looks at it: the terminal has the focus, the page is visible and focused.
        case focused
        /// It said the user looks elsewhere: the terminal lost the focus, the page is hidden
        /// or another window has the focus.
        case away
        /// It shows nothing a person watches for replies (`tether send`, `tether watch`).
        case unattended
    }

    public init(frontEnd: String, instance: String, pid: Int32, state: State, renewalSeconds: Int? = nil, attention: Attention? = nil) {
        self.frontEnd = frontEnd
        self.instance = instance
        self.pid = pid
        self.state = state
        self.renewalSeconds = renewalSeconds
        self.attention = attention
    }

    /// Whether the user may be looking at this front end: it said so, or it cannot tell.
    public var mayHaveAttention: Bool {
        switch attention {
        case .focused?, nil: true
        case .away?, .unattended?: false
        }
    }

    /// How often Tether's own front ends renew their presence: seldom, so that an idle
    /// front end, connd and the bus sleep. A front end that exits says so at once; only one
    /// that crashed is waited for.
    public static let renewal: Duration = .seconds(30)

    /// Renewals missed before a front end counts as gone.
    public static let missedRenewals = 3

    /// The renewals said are taken between these, in seconds: a front end cannot make
    /// itself gone at once, nor present for ever.
    public static let renewalRange = 1...300

    /// How long this presence lasts unless renewed: ``missedRenewals`` of its renewals.
    public var lapsesAfter: Duration {
        let renewal = min(max(renewalSeconds ?? 1, Self.renewalRange.lowerBound), Self.renewalRange.upperBound)
        return .seconds(renewal * Self.missedRenewals)
    }
}

/// The front ends attached now: those whose presence has not lapsed
/// (``FrontEndPresence/lapsesAfter``) and that have not said they leave.
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

/// The programs a compose supervisor holds back because they cannot run as configured (a
/// variable unset, a token file others can read, a store a newer version wrote): it does not
/// restart them until the setting is fixed and they are restarted. Retained on `sys.misconfigured`.
public struct MisconfiguredPrograms: Codable, Hashable, Sendable {
    /// A program held back, and why.
    public struct Program: Codable, Hashable, Sendable {
        /// Its name in the compose file (`connd`).
        public var name: String
        /// What is wrong and how to fix it, as the program said it.
        public var problem: String

        public init(name: String, problem: String) {
            self.name = name
            self.problem = problem
        }

        /// `connd cannot run as configured: token file … run chmod 600 …`.
        public var words: String { "\(name) cannot run as configured: \(problem)" }
    }

    public var programs: [Program]

    public init(programs: [Program]) {
        self.programs = programs
    }
}
