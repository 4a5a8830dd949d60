import Foundation
import TetherSchema
import TetherWire

/// The gateway's own turns after an exec approval (OpenClaw, 2026.4.12 and today's): the tool
/// call that needs an approval is answered at once ("Approval required"), the run goes on to
/// its end, and once the approval is decided (or expires) the gateway runs the command itself
/// and starts a turn of its own under the run id `exec-approval-followup:<approval id>`, whose
/// user entry is the gateway's prompt with the command's outcome. That turn answers the
/// message whose run asked for the approval: it is nobody's message, never another client's.
///
/// This value remembers which message's run asked for which approval, in memory: after a
/// restart of protod a follow-up's reply is still shown as the gateway's, with no claim to
/// the message it answers.
struct ApprovalFollowUps: Sendable {
    /// The message whose run asked for each approval, by approval id; the latest few.
    private(set) var owners: [String: MessageID] = [:]
    /// The order approvals were tied in, oldest first, to forget the oldest.
    private var order: [String] = []

    /// Messages whose run called `exec` and ended with no words while no approval of it was
    /// heard (a connection without `operator.approvals` is not told of approvals), with when:
    /// the gateway's follow-up turn that starts soon after, naming an approval nobody tied,
    /// answers the oldest.
    private(set) var untied: [(message: MessageID, at: Date)] = []

    /// Follow-up replies that ended live, held until the history lookup their end asked for is
    /// answered: the gateway's prompt, in the history only, is shown before them.
    private(set) var heldReplies: [TranscriptEntry] = []

    /// How many ties are kept.
    static let limit = 64
    /// The run id prefix of the gateway's follow-up turns.
    static let runPrefix = "exec-approval-followup:"

    /// The approval a run id is the follow-up of, when it is one.
    static func approval(ofRun runID: String) -> String? {
        guard runID.hasPrefix(runPrefix) else { return nil }
        let id = String(runID.dropFirst(runPrefix.count))
        return id.isEmpty ? nil : id
    }

    /// The id of a follow-up turn's reply: the same live and from the history.
    static func replyID(of approval: String) -> MessageID { MessageID(runPrefix + approval + ":reply") }

    /// The run of `message` asked for `approval`.
    mutating func tie(_ approval: String, to message: MessageID) {
        guard owners[approval] == nil else { return }
        owners[approval] = message
        order.append(approval)
        while order.count > Self.limit { owners[order.removeFirst()] = nil }
    }

    /// The message whose run asked for `approval`, when known.
    func owner(of approval: String) -> MessageID? { owners[approval] }

    /// The message a follow-up of `approval` answers: the one tied to it, else the oldest run
    /// that called `exec` and ended with no words within `window` before `now` (then tied).
    mutating func owner(forFollowUpOf approval: String, now: Date, window: TimeInterval) -> MessageID? {
        if let owner = owners[approval] { return owner }
        untied.removeAll { $0.at.addingTimeInterval(window) < now }
        guard !untied.isEmpty else { return nil }
        let message = untied.removeFirst().message
        tie(approval, to: message)
        return message
    }

    /// A follow-up's reply ended: published once the history was read.
    mutating func hold(_ reply: TranscriptEntry) { heldReplies.append(reply) }

    /// The replies held for the history lookup that was just answered.
    mutating func releaseHeld() -> [TranscriptEntry] {
        defer { heldReplies = [] }
        return heldReplies
    }

    /// The run of `message` called `exec` and ended with no words, no approval heard.
    mutating func awaitUntied(_ message: MessageID, at time: Date) {
        untied.append((message, time))
        if untied.count > Self.limit { untied.removeFirst() }
    }

    /// Whether the run of `message` asked for an approval (one of the ties kept).
    func asked(by message: MessageID) -> Bool { owners.values.contains(message) }

    // MARK: The gateway's prompt, as the history holds it

    /// The openings of the gateway's follow-up prompts (`bash-tools.exec-approval-followup.ts`).
    static let promptOpenings = ["An async command the user already approved has completed.", "An async command did not run."]

    /// Whether a user entry is the gateway's follow-up prompt (after its time prefix, if any).
    static func isPrompt(_ text: String) -> Bool {
        let body = withoutTimePrefix(text)
        return promptOpenings.contains { body.hasPrefix($0) }
    }

    /// The approval a follow-up prompt names (`gateway id=<id>` in its completion details).
    static func approval(inPrompt text: String) -> String? {
        guard isPrompt(text), let start = text.range(of: "gateway id=") else { return nil }
        let id = text[start.upperBound...].prefix { $0 != "," && $0 != ")" && !$0.isWhitespace }
        return id.isEmpty ? nil : String(id)
    }

    /// What a follow-up prompt says happened: its completion details (`Exec finished (…)` and
    /// the output, or `Exec denied (…)`), without the instructions to the model around them.
    static func outcome(inPrompt text: String) -> String {
        let lines = withoutTimePrefix(text).split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "Exact completion details:") else { return String(withoutTimePrefix(text)) }
        // The instructions to the model follow ("Reply to the user in a helpful way.", or in
        // 2026.4.12 "Continue the task if needed, then reply to the user in a helpful way.").
        let details = lines[(start + 1)...].prefix { !$0.lowercased().contains("reply to the user") }
        return details.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The words a front end shows for the gateway's prompt: what became of the command.
    static func words(ofPrompt text: String) -> String {
        let ran = withoutTimePrefix(text).hasPrefix(promptOpenings[0])
        return (ran ? "the approved command ran: " : "the command did not run: ") + outcome(inPrompt: text)
    }

    /// The sender a front end shows for the gateway's prompt.
    static let author = "gateway"

    /// A text without the gateway's `[Thu 2026-12-03 06:30 UTC] ` time prefix.
    private static func withoutTimePrefix(_ text: String) -> Substring {
        guard text.hasPrefix("["), let end = text.firstIndex(of: "]"), text.distance(from: text.startIndex, to: end) < 48 else {
            return Substring(text)
        }
        return text[text.index(after: end)...].drop { $0 == " " }
    }
}
