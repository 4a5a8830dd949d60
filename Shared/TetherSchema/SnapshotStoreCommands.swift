public import FoundationEssentials
import TetherWire

// The commands tether-snapd serves (``Endpoints/snapshotStore``): the transcript and display snapshots.

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

// MARK: Bounds tether-snapd enforces

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

/// Finds stored messages by their words (snapd's full-text index), newest first, a page at a time.
public enum SearchCommand: BusCommand {
    public static let method = "search"
    public static let endpoint = Endpoints.snapshotStore

    /// The most hits one reply holds.
    public static let pageLimit = 200
    /// What a hit's excerpt marks the matched words with: the start and the end of each.
    public static let matchStart = "\u{2}"
    public static let matchEnd = "\u{3}"

    public struct Request: Codable, Sendable {
        /// The words to find, as a person types them: every word must be in the message, each
        /// as a word or the start of one, in any case and with or without accents.
        public var words: String
        /// The most hits to return (at most ``SearchCommand/pageLimit``).
        public var limit: Int
        /// Only hits older than this position (an earlier reply's `nextBefore`); nil for the newest.
        public var before: Int?
        /// OpenClaw: only the messages of this session (its canonical key) and those that name none; nil: every session's.
        public var session: String?

        public init(words: String, limit: Int = 20, before: Int? = nil, session: String? = nil) {
            self.words = words
            self.limit = limit
            self.before = before
            self.session = session
        }
    }

    /// A message found.
    public struct Hit: Codable, Sendable, Equatable {
        /// Its place in the store: `transcript` with `before` set just after it pages from it.
        public var position: Int
        public var entry: TranscriptEntry
        /// The part of its text around the words found, each found word between
        /// ``SearchCommand/matchStart`` and ``SearchCommand/matchEnd``; `…` where it is cut.
        public var excerpt: String

        public init(position: Int, entry: TranscriptEntry, excerpt: String) {
            self.position = position
            self.entry = entry
            self.excerpt = excerpt
        }
    }

    public struct Reply: Codable, Sendable {
        /// Newest first.
        public var hits: [Hit]
        /// Where the next older page of hits starts; nil when there is none.
        public var nextBefore: Int?

        public init(hits: [Hit], nextBefore: Int? = nil) {
            self.hits = hits
            self.nextBefore = nextBefore
        }
    }
}

extension SearchCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        if !(1...SearchCommand.pageLimit).contains(limit) { return "limit must be between 1 and \(SearchCommand.pageLimit) (it is \(limit))" }
        if words.allSatisfy(\.isWhitespace) { return "nothing to search for: the words are empty" }
        if words.utf8.count > 1024 { return "the words to search for are longer than 1,024 bytes" }
        return nil
    }
}

/// A stored message in its conversation: the entries just before and after a position (a
/// search hit's), so that a front end shows what it answered and what came of it.
public enum AroundCommand: BusCommand {
    public static let method = "transcript.around"
    public static let endpoint = Endpoints.snapshotStore

    /// The most entries asked for on either side.
    public static let sideLimit = 50
    /// How many entries on either side show a search hit in its conversation in a front end.
    public static let hitContext = 5

    public struct Request: Codable, Sendable {
        /// The entry's place in the store (a hit's `position`).
        public var position: Int
        /// How many entries to return before it, and as many after it (at most ``AroundCommand/sideLimit``).
        public var count: Int
        /// OpenClaw: only the entries of this session (the entry's own), and those naming none; nil: every session's.
        public var session: String?

        public init(position: Int, count: Int = AroundCommand.hitContext, session: String? = nil) {
            self.position = position
            self.count = count
            self.session = session
        }
    }

    public struct Reply: Codable, Sendable {
        /// Oldest first: up to `count` before the entry, the entry, up to `count` after it.
        public var entries: [TranscriptEntry]
        /// Where in `entries` the entry at the position is; nil when the store no longer holds it
        /// (removed to stay within the cap).
        public var focus: Int?

        public init(entries: [TranscriptEntry], focus: Int?) {
            self.entries = entries
            self.focus = focus
        }
    }
}

extension AroundCommand.Reply {
    /// The longest a message is shown on its one line, in characters.
    public static let lineLimit = 300

    /// What a front end heads the lines with.
    public var title: String {
        "The message found in its conversation" + (focus == nil ? " (the message itself is no longer stored)" : "")
    }

    /// The message in its conversation as plain text, a line a message, oldest first: the
    /// entry at the position marked `▶`, the others indented; `TIME  Opta: You said: …` with
    /// `time` written by `time`, a message of another session than `shown` naming it, a tool
    /// call as its ⚙ line. A message's lines are joined, and a long one cut with `…`.
    public func lines(shown: String? = nil, time: (Date) -> String) -> [String] {
        entries.enumerated().map { index, entry in
            let mark = index == focus ? "▶ " : "  "
            let session = entry.session.flatMap { $0 == shown ? nil : "[\($0)] " } ?? ""
            let said = entry.tool.map { "⚙ " + $0.words } ?? "\(entry.speaker): \(entry.contentWithAttachments)"
            var text = String(said.map { $0 == "\n" ? " " : $0 })
            if text.count > Self.lineLimit { text = text.prefix(Self.lineLimit - 1) + "…" }
            return "\(mark)\(time(entry.timestamp))  \(session)\(text)"
        }
    }
}

extension AroundCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        if !(0...AroundCommand.sideLimit).contains(count) { return "count must be between 0 and \(AroundCommand.sideLimit) (it is \(count))" }
        if position < 0 { return "position must not be negative (it is \(position))" }
        return nil
    }
}

extension TranscriptEntry {
    /// Who wrote it: "You", another client's name, or the bot's.
    public var speaker: String {
        switch sender {
        case .user: author ?? "You"
        case .bot(name: let name): name.isEmpty ? "Bot" : name
        }
    }
}

extension SearchCommand.Hit {
    /// Who wrote the message found: "You", another client's name, or the bot's.
    public var speaker: String { entry.speaker }

    /// The hit as one line of plain text, for a front end that sets it as text: when, the
    /// session, who, and the excerpt without its marks.
    public var plainLine: String {
        let marks: Set<Character> = [Character(SearchCommand.matchStart), Character(SearchCommand.matchEnd)]
        let excerpt = String(self.excerpt.filter { !marks.contains($0) }.map { $0 == "\n" ? " " : $0 })
        let session = entry.session.map { "[\($0)] " } ?? ""
        return "\(entry.timestamp.formatted(.iso8601)) \(session)\(speaker): \(excerpt)"
    }
}
