import Foundation
import OpenClawWire

/// Where protod's knowledge of each session's transcript ends, as today's OpenClaw gateway
/// marks it (`deltaCursor`), so that a lookup after a reconnect fetches only what came after
/// it (`chat.history` with `cursor`) instead of a page of the last entries.
///
/// A value: the delivery machine hands it each history answer and each run's end; it says
/// which cursor a lookup may send, and when the cursor has aged enough to be renewed by a
/// lookup of one entry cut to one character (the answer is small; its cursor is the
/// transcript's end). The gateway answers a catch-up of at most 200 events and 1 MB; past
/// that, or after its transcript was rewritten, it answers `reset` and a page is fetched.
struct CatchUp: Sendable, Equatable {
    /// Runs ended since the cursor after which it is renewed even while the session stays busy:
    /// 25 exchanges make about 50 to 100 events, well inside the gateway's 200.
    static let renewAfterRuns = 25
    /// How long a session stays quiet after a run's end before its cursor is renewed.
    static let renewWhenQuietFor: TimeInterval = 5

    private struct Mark: Sendable, Equatable {
        var cursor: JSONValue
        /// Runs that ended in the session since the cursor was given.
        var runsSince = 0
        /// When the session last had a run end with the cursor behind it.
        var lastRunEndedAt: Date?
    }

    private var marks: [String: Mark] = [:]
    /// The release whose cursors these are: another gateway's mean nothing.
    private var release: String?

    /// How lookups went since protod started: deltas, resets, and pages fetched instead (read
    /// by the tests; not published).
    private(set) var deltas = 0
    private(set) var resets = 0
    private(set) var pages = 0

    /// A connection opened to a gateway of `release`: cursors of another (or of one that did
    /// not name itself) do not hold.
    mutating func meet(release: String?) {
        guard release != self.release || release == nil else { return }
        self.release = release
        marks = [:]
    }

    /// The cursor a lookup in `session` sends, if the gateway gave one.
    func cursor(for session: String) -> JSONValue? { marks[session]?.cursor }

    /// A history answer for `session`: its cursor, where it gave one, is the one sent next.
    mutating func learn(from result: ChatHistoryResult, session: String, wasCatchUp: Bool) {
        if result.isReset {
            resets += 1
            marks[session] = nil
            return
        }
        if wasCatchUp { deltas += 1 } else { pages += 1 }
        if let cursor = result.deltaCursor {
            marks[session] = Mark(cursor: cursor)
        } else if !wasCatchUp {
            // A page without a cursor: this gateway gives none (or no longer for this session).
            marks[session] = nil
        }
    }

    /// The gateway refused the cursor of `session`: the next lookup is a page.
    mutating func forget(_ session: String) { marks[session] = nil }

    /// A run of `session` ended.
    mutating func runEnded(in session: String, now: Date) {
        guard marks[session] != nil else { return }
        marks[session]?.runsSince += 1
        marks[session]?.lastRunEndedAt = now
    }

    /// Whether the cursor of `session` is due to be renewed: runs ended since it, and the
    /// session has been quiet for a while, or so many ran that a catch-up would come near the
    /// gateway's limit. `idle`: no run of the session is under way.
    func isDueForRenewal(_ session: String, idle: Bool, now: Date) -> Bool {
        guard let mark = marks[session], mark.runsSince > 0 else { return false }
        if mark.runsSince >= Self.renewAfterRuns { return true }
        guard idle, let ended = mark.lastRunEndedAt else { return false }
        return now.timeIntervalSince(ended) >= Self.renewWhenQuietFor
    }

    /// When the cursor of `session` is due to be renewed if the session stays quiet.
    func renewalDue(_ session: String) -> Date? {
        guard let mark = marks[session], mark.runsSince > 0, let ended = mark.lastRunEndedAt else { return nil }
        return ended.addingTimeInterval(Self.renewWhenQuietFor)
    }

    /// A renewal was asked for `session`: it is not asked again until more runs end.
    mutating func renewalAsked(_ session: String) {
        marks[session]?.runsSince = 0
        marks[session]?.lastRunEndedAt = nil
    }
}
