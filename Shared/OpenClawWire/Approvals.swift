import FoundationEssentials

/// An approval the gateway waits for, as `exec.approval.requested` and
/// `plugin.approval.requested` carry it and `exec.approval.list` / `plugin.approval.list`
/// answer it (a bare array of these). Needs the scope `operator.approvals`.
///
/// The gateway sends no event when one expires: a client keeps its own time on
/// ``expiresAtMs``. A plugin approval's id starts with `plugin:`.
public struct ApprovalRecord: Sendable, Hashable, Codable {
    public var id: String
    public var request: Request
    public var createdAtMs: Int?
    public var expiresAtMs: Int?

    /// What is asked: an exec approval's command (with where and by whom it would run) or a
    /// plugin approval's title and description. Fields the other kind has are absent.
    public struct Request: Sendable, Hashable, Codable {
        public var command: String?
        public var commandPreview: String?
        public var cwd: String?
        /// `gateway`, `node` or `sandbox`.
        public var host: String?
        public var nodeId: String?
        public var agentId: String?
        public var sessionKey: String?
        public var resolvedPath: String?
        /// `off`, `on-miss`, `always`: with `always`, `allow-always` is not offered.
        public var ask: String?
        /// The decisions the gateway takes for it; absent: all three.
        public var allowedDecisions: [String]?
        public var pluginId: String?
        public var title: String?
        public var description: String?
        /// `info`, `warning`, `critical`.
        public var severity: String?
        public var toolName: String?

        public init(
            command: String? = nil, commandPreview: String? = nil, cwd: String? = nil, host: String? = nil, nodeId: String? = nil, agentId: String? = nil,
            sessionKey: String? = nil, resolvedPath: String? = nil, ask: String? = nil, allowedDecisions: [String]? = nil, pluginId: String? = nil,
            title: String? = nil, description: String? = nil, severity: String? = nil, toolName: String? = nil
        ) {
            self.command = command
            self.commandPreview = commandPreview
            self.cwd = cwd
            self.host = host
            self.nodeId = nodeId
            self.agentId = agentId
            self.sessionKey = sessionKey
            self.resolvedPath = resolvedPath
            self.ask = ask
            self.allowedDecisions = allowedDecisions
            self.pluginId = pluginId
            self.title = title
            self.description = description
            self.severity = severity
            self.toolName = toolName
        }
    }

    public init(id: String, request: Request, createdAtMs: Int?, expiresAtMs: Int?) {
        self.id = id
        self.request = request
        self.createdAtMs = createdAtMs
        self.expiresAtMs = expiresAtMs
    }

    /// Whether it is a plugin's (resolved with `plugin.approval.resolve`), not an exec approval.
    public var isPlugin: Bool { Self.isPlugin(id) }

    public static func isPlugin(_ id: String) -> Bool { id.hasPrefix("plugin:") }
}

/// The payload of `exec.approval.resolved` and `plugin.approval.resolved`: sent when a client
/// resolved one (not when it expired).
public struct ApprovalResolvedPayload: Sendable, Hashable, Codable {
    public var id: String
    public var decision: String?
    /// The resolving client's display name or id.
    public var resolvedBy: String?
    public var ts: Int?

    public init(id: String, decision: String?, resolvedBy: String?, ts: Int?) {
        self.id = id
        self.decision = decision
        self.resolvedBy = resolvedBy
        self.ts = ts
    }
}

/// The params of `exec.approval.resolve` and `plugin.approval.resolve`.
public struct ApprovalResolveParams: Sendable, Hashable, Codable {
    public var id: String
    /// `allow-once`, `allow-always` or `deny`.
    public var decision: String

    public init(id: String, decision: String) {
        self.id = id
        self.decision = decision
    }
}

extension OpenClawProtocol {
    /// The scope a connection needs to see and answer approvals.
    public static let approvalsScope = "operator.approvals"

    /// Whether `scopes` let a connection see and answer approvals: the approvals scope, or
    /// `operator.admin`, which passes every check.
    public static func grantsApprovals(_ scopes: [String]) -> Bool {
        scopes.contains(approvalsScope) || scopes.contains("operator.admin")
    }
    /// The events that carry approvals.
    public static let approvalEvents = ["exec.approval.requested", "exec.approval.resolved", "plugin.approval.requested", "plugin.approval.resolved"]
}
