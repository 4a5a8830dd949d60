public import Foundation
public import TetherSchema
import TetherService

/// The approvals the gateway waits for, as the terminal UI shows them over the input line: the
/// oldest first, whole (a command is read before it is allowed), with a key for each decision
/// it allows. While the prompt is open, letters answer it and do not go to the draft; Esc puts
/// it aside until another approval arrives or Ctrl-G opens it again.
public struct ApprovalPrompt: Sendable {
    /// Every approval waiting, oldest first.
    public private(set) var pending: [PendingApproval] = []
    /// When each one's time runs out, by this process's clock.
    private var deadlines: [String: ContinuousClock.Instant] = [:]
    /// The approval shown, by id; the first one when it is gone.
    private var shownID: String?
    /// Put aside with Esc.
    public private(set) var isSetAside = false
    /// Approvals answered whose answer protod has not confirmed yet, with the decision sent.
    private var answering: [String: ApprovalDecision] = [:]

    /// The most rows a command takes on the screen; a longer one says how to see it whole.
    static let commandRows = 6

    /// What a key did to the prompt.
    public enum KeyOutcome: Sendable, Equatable {
        /// The prompt is not open, or the key is not one it takes: the key does what it does elsewhere.
        case notTaken
        /// Taken; nothing to send.
        case taken
        /// Taken, with a problem to say (a decision this approval does not allow, a letter with no meaning here).
        case refused(String)
        /// Answer the approval.
        case answer(id: String, decision: ApprovalDecision)
    }

    public init() {}

    /// Whether the prompt takes the keys.
    public var isOpen: Bool { !pending.isEmpty && !isSetAside }

    /// The approval shown.
    public var shown: PendingApproval? {
        pending.first { $0.id == shownID } ?? pending.first
    }

    /// Applies protod's `approvals` value; `date` is the wall clock at `now`, to place the
    /// gateway's deadlines on this process's clock. Returns what to say of an approval that
    /// stopped waiting (not for a replayed value: that is old news).
    public mutating func apply(_ update: ApprovalsUpdate, replay: Bool, at now: ContinuousClock.Instant, date: Date) -> String? {
        let known = Set(pending.map(\.id))
        pending = update.pending.sorted { ($0.createdAt ?? .distantPast, $0.id) < ($1.createdAt ?? .distantPast, $1.id) }
        deadlines = [:]
        for approval in pending {
            if let expiresAt = approval.expiresAt { deadlines[approval.id] = now.advanced(by: .seconds(expiresAt.timeIntervalSince(date))) }
        }
        let ids = Set(pending.map(\.id))
        answering = answering.filter { ids.contains($0.key) }
        // Something new to answer brings the prompt back; the one shown stays shown.
        if !ids.subtracting(known).isEmpty { isSetAside = false }
        if let shownID, !ids.contains(shownID) { self.shownID = nil }
        guard let ended = update.ended, !replay else { return nil }
        return ApprovalWords.ended(ended).capitalizedFirst
    }

    /// Opens the prompt again after Esc (Ctrl-G, `/approvals`); false when nothing waits.
    public mutating func open() -> Bool {
        isSetAside = false
        return !pending.isEmpty
    }

    /// The answer sent for `id` was not taken: the approval can be answered again.
    public mutating func answerFailed(_ id: String) {
        answering[id] = nil
    }

    /// Applies a key while the prompt is open.
    public mutating func handle(_ key: Key) -> KeyOutcome {
        guard isOpen, let approval = shown else { return .notTaken }
        switch key {
        case .escape:
            isSetAside = true
            return .taken
        case .control("i"):  // Tab
            guard pending.count > 1, let index = pending.firstIndex(of: approval) else { return .taken }
            shownID = pending[(index + 1) % pending.count].id
            return .taken
        case .character(let letter):
            if answering[approval.id] != nil { return .refused("the answer to \(approval.shortID) is on its way to the gateway") }
            guard let decision = Self.decision(for: letter) else {
                return .refused("the approval waits for an answer: \(Self.keys(for: approval)), or Esc to answer later and type")
            }
            guard approval.allowedDecisions.contains(decision) else {
                return .refused("this approval cannot be answered \(decision.words): \(Self.keys(for: approval))")
            }
            answering[approval.id] = decision
            return .answer(id: approval.id, decision: decision)
        default:
            return .notTaken
        }
    }

    /// The key for each decision: o, a, d.
    static func decision(for letter: Character) -> ApprovalDecision? {
        switch letter {
        case "o", "O": .allowOnce
        case "a", "A": .allowAlways
        case "d", "D": .deny
        default: nil
        }
    }

    static func key(for decision: ApprovalDecision) -> Character {
        switch decision {
        case .allowOnce: "o"
        case .allowAlways: "a"
        case .deny: "d"
        }
    }

    /// `o allow once · a allow always · d deny`, for the decisions `approval` allows.
    static func keys(for approval: PendingApproval) -> String {
        approval.allowedDecisions.map { "\(key(for: $0)) \($0.words)" }.joined(separator: " · ")
    }

    /// The prompt's rows for a terminal `width` columns wide, at most `limit` of them (the
    /// keys' row is kept; the command is cut first, saying so).
    public func rows(width: Int, limit: Int, at now: ContinuousClock.Instant) -> [ScreenRow] {
        guard isOpen, let approval = shown, limit > 0 else { return [] }
        let position = pending.count > 1 ? " (\((pending.firstIndex(of: approval) ?? 0) + 1) of \(pending.count))" : ""
        let left = deadlines[approval.id].map { ", " + ApprovalWords.timeLeft(seconds: ($0 - now).inSeconds) } ?? ""
        let heading: String =
            switch approval.kind {
            case .exec: "Approval waiting\(position)\(left): the agent asks to run"
            case .plugin: "Approval waiting\(position)\(left): \(approval.severity.map { "[\($0)] " } ?? "")a plugin asks"
            }
        var what = approval.summary
        if approval.kind == .plugin, let detail = approval.detail { what += "\n" + detail }
        var context: [String] = []
        if let host = approval.host { context.append("on \(host)") }
        if let directory = approval.workingDirectory { context.append("in \(directory)") }
        if let agent = approval.agent { context.append("agent \(agent)") }
        if let session = approval.session { context.append("session \(session)") }
        let answer: String
        if let decision = answering[approval.id] {
            answer = "\(decision.words.capitalizedFirst): sent to the gateway, waiting for its answer…"
        } else {
            answer = Self.keys(for: approval) + (pending.count > 1 ? " · Tab next" : "") + " · Esc later"
        }
        var rows = [ScreenRow(" " + TerminalText.fit(heading, width: width - 1), .title)]
        let fixed = 1 + (context.isEmpty ? 0 : 1) + 1
        let room = max(1, min(Self.commandRows, limit - fixed))
        let command = TerminalText.wrap(what, width: max(1, width - 4))
        if command.count > room {
            rows += command.prefix(room - 1).map { ScreenRow("   " + $0, .warning) }
            rows.append(
                ScreenRow("   " + TerminalText.fit("… \(command.count - room + 1) more lines: tether approvals shows it whole", width: width - 3), .warning))
        } else {
            rows += command.map { ScreenRow("   " + $0, .warning) }
        }
        if !context.isEmpty { rows.append(ScreenRow("   " + TerminalText.fit(context.joined(separator: " · "), width: width - 3))) }
        rows.append(ScreenRow(" " + TerminalText.fit(answer, width: width - 1), .good))
        guard rows.count > limit else { return rows }
        // Too short a terminal: the heading and the keys, with as much between as fits.
        return Array(rows.prefix(max(0, limit - 1))) + [rows[rows.count - 1]]
    }

    /// When the time left shown changes next: each second under two minutes, each minute above.
    public func nextChange(after now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard isOpen, let approval = shown, let deadline = deadlines[approval.id] else { return nil }
        let seconds = (deadline - now).inSeconds
        guard seconds > 0 else { return nil }
        let unit: Double = seconds < 120 ? 1 : 60
        let untilNext = max(0.01, seconds.truncatingRemainder(dividingBy: unit))
        return now.advanced(by: .seconds(untilNext))
    }
}
