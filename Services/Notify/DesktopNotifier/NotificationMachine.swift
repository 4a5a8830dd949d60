public import FoundationEssentials
public import TetherSchema
public import TetherService
import TetherWire

/// A desktop notification to show.
public struct DesktopNotification: Equatable, Sendable {
    /// How pressing the service should show it (the specification's `urgency` hint).
    public enum Urgency: UInt8, Sendable {
        case low = 0
        case normal = 1
        case critical = 2
    }

    /// What it is about: the replies, or one approval.
    public var notice: NotificationMachine.Notice
    /// Its title line.
    public var summary: String
    /// Its one line of text.
    public var body: String
    /// The service's id of the notification this one replaces, if any.
    public var replacing: UInt32?
    public var urgency: Urgency
    /// The specification's category hint: `im.received` for replies, `im` for an approval.
    public var category: String

    public init(
        notice: NotificationMachine.Notice, summary: String, body: String, replacing: UInt32? = nil, urgency: Urgency = .normal,
        category: String
    ) {
        self.notice = notice
        self.summary = summary
        self.body = body
        self.replacing = replacing
        self.urgency = urgency
        self.category = category
    }
}

/// Decides when Tether shows a desktop notification: a bot's reply completed, or an approval
/// started waiting, while no front end has the user's attention. Events in, actions out,
/// time passed in; tether-notify carries the actions out on the session bus.
///
/// - Nothing is shown until the front ends attached are known (connd's retained
///   `frontend.attached`), nor while any of them may have the user's attention: one that
///   said `focused`, or one that cannot tell (no `attention`), counted as looking while it
///   is attached. `away` and `unattended` (`tether send`, `tether watch`) do not count.
/// - Replies: a bot's `conv.message` that is `received` (not a tool call, not the user's,
///   not a message older than the machine: the history read again after a reconnection),
///   once per id. Replies that follow within ``coalescing`` of the last one shown replace
///   its notification ("Opta: 3 replies", the newest reply's first line) instead of
///   piling up. When a front end has the user's attention again, that notification is
///   closed: the replies are on the screen.
/// - Approvals: each one that starts waiting (new in `approvals`' `pending`) is shown on
///   its own, with what it asks; once it stops waiting (answered here or elsewhere,
///   expired), its notification is closed.
public struct NotificationMachine: DrivenMachine {
    public typealias Instant = ContinuousClock.Instant

    /// What a notification is about.
    public enum Notice: Hashable, Sendable {
        /// The bot's replies.
        case replies
        /// The approval with this id.
        case approval(String)
    }

    public enum Event: Sendable {
        /// The front ends attached, as `frontend.attached` says.
        case frontEnds([FrontEndPresence])
        /// An entry of the conversation (`conv.message`).
        case message(TranscriptEntry)
        /// The approvals waiting (`approvals`' `pending`).
        case approvals([PendingApproval])
        /// The service showed a notification under this id.
        case shown(Notice, id: UInt32)
        case timePassed
    }

    public enum Action: Equatable, Sendable {
        /// Show it (replacing the one it names).
        case notify(DesktopNotification)
        /// Close the notification with this id.
        case close(UInt32)
    }

    /// How soon after the last reply shown another replaces it rather than standing beside it.
    public static let coalescing: Duration = .seconds(10)
    /// How many reply ids are remembered as seen (a reply is published again as the history adds to it).
    static let rememberedReplies = 1000

    private struct ReplyNotification {
        /// The service's id, once it answered.
        var id: UInt32?
        var count: Int
        var lastAt: Instant
    }

    private let notBefore: Date
    private var frontEnds: [FrontEndPresence]?
    private var seenReplies: Set<String> = []
    private var seenOrder: [String] = []
    private var replies: ReplyNotification?
    /// The approvals waiting, and the id of each one's notification once shown.
    private var approvals: [String: UInt32?] = [:]
    /// The approvals known waiting, for telling the new ones.
    private var knownApprovals: Set<String> = []

    /// - Parameter notBefore: replies older than this are not news (the machine's start).
    public init(notBefore: Date) {
        self.notBefore = notBefore
    }

    public static var timePassed: Event { .timePassed }

    /// Nothing waits for a moment: a coalescing window is measured when the next reply comes.
    public var nextDeadline: Instant? { nil }

    /// Whether a front end may have the user's attention now (unknown counts as yes).
    public var someoneLooks: Bool {
        frontEnds?.contains { $0.mayHaveAttention } ?? true
    }

    public mutating func handle(_ event: Event, now: Instant) -> [Action] {
        switch event {
        case .frontEnds(let attached):
            let looked = someoneLooks
            frontEnds = attached
            guard !looked, someoneLooks, let shown = replies else { return [] }
            // Back at a front end: the replies are on the screen.
            replies = nil
            return shown.id.map { [.close($0)] } ?? []
        case .message(let entry):
            return reply(entry, now: now)
        case .approvals(let pending):
            return approvalsChanged(pending)
        case .shown(.replies, let id):
            replies?.id = id
            return []
        case .shown(.approval(let approval), let id):
            guard approvals[approval] != nil else { return [.close(id)] }  // it stopped waiting meanwhile
            approvals[approval] = id
            return []
        case .timePassed:
            return []
        }
    }

    private mutating func reply(_ entry: TranscriptEntry, now: Instant) -> [Action] {
        guard case .bot(let name) = entry.sender, entry.tool == nil, entry.status == .received, entry.timestamp >= notBefore else { return [] }
        guard seenReplies.insert(entry.id.value).inserted else { return [] }
        seenOrder.append(entry.id.value)
        if seenOrder.count > Self.rememberedReplies { seenReplies.remove(seenOrder.removeFirst()) }
        guard !someoneLooks else { return [] }
        let body = NotificationText.firstLine(of: entry.content)
        let bot = NotificationText.firstLine(of: name, limit: 40)
        if var shown = replies, now - shown.lastAt < Self.coalescing {
            shown.count += 1
            shown.lastAt = now
            replies = shown
            return [
                .notify(
                    DesktopNotification(
                        notice: .replies, summary: "\(bot): \(shown.count) replies", body: body, replacing: shown.id, category: "im.received"))
            ]
        }
        replies = ReplyNotification(id: nil, count: 1, lastAt: now)
        return [.notify(DesktopNotification(notice: .replies, summary: "\(bot) replied", body: body, category: "im.received"))]
    }

    private mutating func approvalsChanged(_ pending: [PendingApproval]) -> [Action] {
        var actions: [Action] = []
        let waiting = Set(pending.map(\.id))
        for (id, shown) in approvals where !waiting.contains(id) {
            approvals[id] = nil
            if let shown { actions.append(.close(shown)) }
        }
        let arrived = pending.filter { !knownApprovals.contains($0.id) }
        knownApprovals = waiting
        // An approval that arrives while someone looks is on their screen: it is not shown later.
        guard !someoneLooks else { return actions }
        for approval in arrived {
            approvals[approval.id] = .some(nil)
            let summary =
                switch approval.kind {
                case .exec: "Approval needed: run a command"
                case .plugin: "Approval needed"
                }
            actions.append(
                .notify(
                    DesktopNotification(
                        notice: .approval(approval.id), summary: summary, body: NotificationText.firstLine(of: approval.summary), urgency: .critical,
                        category: "im")))
        }
        return actions
    }
}
