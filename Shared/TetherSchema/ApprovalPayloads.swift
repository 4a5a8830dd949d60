public import FoundationEssentials

/// What a person may answer to an approval.
public enum ApprovalDecision: String, Codable, Sendable, CaseIterable {
    case allowOnce = "allow-once"
    case allowAlways = "allow-always"
    case deny

    /// In words, for a key or a button.
    public var words: String {
        switch self {
        case .allowOnce: "allow once"
        case .allowAlways: "allow always"
        case .deny: "deny"
        }
    }
}

/// An approval the gateway waits for before the agent goes on (OpenClaw): to run a command
/// (`exec`), or what a plugin asks (`plugin`).
public struct PendingApproval: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Sendable {
        case exec
        case plugin
    }

    /// The gateway's id (a plugin's starts with `plugin:`).
    public var id: String
    public var kind: Kind
    /// What is asked, in a line: the command, or the plugin's title.
    public var summary: String
    /// A plugin's description.
    public var detail: String?
    /// Where the command would run (`gateway`, `node`, `sandbox`) and in which directory.
    public var host: String?
    public var workingDirectory: String?
    public var agent: String?
    public var session: String?
    /// A plugin approval's severity: `info`, `warning`, `critical`.
    public var severity: String?
    /// The decisions the gateway takes for it.
    public var allowedDecisions: [ApprovalDecision]
    /// When the gateway asked, and when it gives up waiting (by protod's clock).
    public var createdAt: Date?
    public var expiresAt: Date?

    public init(
        id: String, kind: Kind, summary: String, detail: String? = nil, host: String? = nil, workingDirectory: String? = nil, agent: String? = nil,
        session: String? = nil, severity: String? = nil, allowedDecisions: [ApprovalDecision] = ApprovalDecision.allCases, createdAt: Date? = nil,
        expiresAt: Date? = nil
    ) {
        self.id = id
        self.kind = kind
        self.summary = summary
        self.detail = detail
        self.host = host
        self.workingDirectory = workingDirectory
        self.agent = agent
        self.session = session
        self.severity = severity
        self.allowedDecisions = allowedDecisions
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    /// The id as people type it: its first 8 characters (the gateway takes a unique prefix).
    public var shortID: String {
        kind == .plugin ? String(id.prefix(15)) : String(id.prefix(8))
    }
}

/// How an approval stopped waiting.
public struct ApprovalEnded: Codable, Hashable, Sendable {
    public enum How: String, Codable, Sendable {
        /// Answered: by Tether or by another client (`by`).
        case resolved
        /// Its time ran out; the gateway applies its fallback (usually: not run).
        case expired
        /// Gone from the gateway's list (resolved elsewhere while Tether was not connected, or
        /// the gateway restarted).
        case gone
    }

    public var approval: PendingApproval
    public var how: How
    public var decision: ApprovalDecision?
    /// Who answered, as the gateway names the client.
    public var by: String?
    public var at: Date

    public init(approval: PendingApproval, how: How, decision: ApprovalDecision? = nil, by: String? = nil, at: Date) {
        self.approval = approval
        self.how = how
        self.decision = decision
        self.by = by
        self.at = at
    }

    /// In words: "allowed once by openclaw-control-ui", "expired", …
    public var words: String {
        switch how {
        case .resolved:
            let answer =
                switch decision {
                case .allowOnce?: "allowed once"
                case .allowAlways?: "allowed always"
                case .deny?: "denied"
                case nil: "answered"
                }
            return answer + (by.map { " by \($0)" } ?? "")
        case .expired: return "expired unanswered: the gateway went on without an answer, by its own policy (which usually does not run it)"
        case .gone: return "no longer waiting at the gateway (answered elsewhere, or the gateway restarted)"
        }
    }
}

/// The body of `approvals`: every approval waiting, and what changed last (nil in the value
/// protod retains at its start). A replayed value's change is old news.
public struct ApprovalsUpdate: Codable, Hashable, Sendable {
    public var pending: [PendingApproval]
    /// An approval that arrived, when one did.
    public var arrived: PendingApproval?
    /// An approval that stopped waiting, when one did.
    public var ended: ApprovalEnded?
    /// Why there can be none, when there cannot: the seed dialect, or a connection without
    /// the scope `operator.approvals`.
    public var unavailable: String?

    public init(pending: [PendingApproval], arrived: PendingApproval? = nil, ended: ApprovalEnded? = nil, unavailable: String? = nil) {
        self.pending = pending
        self.arrived = arrived
        self.ended = ended
        self.unavailable = unavailable
    }
}

/// The approvals the gateway waits for, as protod keeps them.
public enum ApprovalsCommand: BusCommand {
    public static let method = "approvals"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        public init() {}
    }

    public typealias Reply = ApprovalsUpdate
}

/// Answers an approval: protod sends `exec.approval.resolve` or `plugin.approval.resolve`.
public enum ApproveCommand: BusCommand {
    public static let method = "approve"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        /// The id, or a prefix of it that names one waiting approval.
        public var id: String
        public var decision: ApprovalDecision

        public init(id: String, decision: ApprovalDecision) {
            self.id = id
            self.decision = decision
        }
    }

    public struct Reply: Codable, Sendable {
        public var ended: ApprovalEnded

        public init(ended: ApprovalEnded) {
            self.ended = ended
        }
    }
}

extension ApproveCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        if id.allSatisfy(\.isWhitespace) { return "the approval's id is empty" }
        if id.utf8.count > 256 { return "the approval's id is longer than 256 bytes" }
        return nil
    }
}
