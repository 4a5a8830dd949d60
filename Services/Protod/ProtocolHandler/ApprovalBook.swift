public import Foundation
public import OpenClawWire
public import TetherSchema

/// The approvals an OpenClaw gateway waits for, as protod knows them: a value, events in and
/// the updates to publish on `approvals` out, time passed in.
///
/// The gateway announces an approval once (`*.approval.requested`) and its answer once
/// (`*.approval.resolved`), drops both for a client that was not connected or was slow, and
/// sends nothing when one expires. So the book keeps its own time on each approval's
/// expiry, and after every connection it is given the gateway's lists (`*.approval.list`):
/// what they hold and the book does not has arrived, what the book holds and they do not has
/// gone.
public struct ApprovalBook: Sendable, Equatable {
    /// Waiting, oldest first.
    public private(set) var pending: [PendingApproval] = []
    /// Why there can be none now, when there cannot.
    public private(set) var unavailable: String?

    public init(unavailable: String? = nil) {
        self.unavailable = unavailable
    }

    /// What happened.
    public enum Event: Sendable, Equatable {
        /// The gateway asks (`exec.approval.requested`, `plugin.approval.requested`).
        case requested(ApprovalRecord)
        /// Someone answered (`*.approval.resolved`), Tether included.
        case resolved(ApprovalResolvedPayload)
        /// The gateway's list of one kind, asked for after connecting.
        case listed(PendingApproval.Kind, [ApprovalRecord])
        /// The gateway said an approval is not waiting (it answered a resolve with
        /// `APPROVAL_NOT_FOUND`).
        case notFound(id: String)
        /// Approvals can be had on this connection (nil), or not, and why.
        case availability(String?)
        /// Time passed.
        case tick
    }

    /// Applies an event; the updates to publish, in order (none when nothing changed).
    /// - Parameter clockOffset: the gateway's clock minus protod's, in milliseconds.
    public mutating func handle(_ event: Event, now: Date, clockOffset: Int = 0) -> [ApprovalsUpdate] {
        var updates: [ApprovalsUpdate] = []
        switch event {
        case .requested(let record):
            guard !pending.contains(where: { $0.id == record.id }) else { break }
            let approval = Self.approval(record, clockOffset: clockOffset)
            if let expiresAt = approval.expiresAt, expiresAt <= now { break }
            pending.append(approval)
            updates.append(update(arrived: approval))
        case .resolved(let payload):
            guard let index = pending.firstIndex(where: { $0.id == payload.id }) else { break }
            let approval = pending.remove(at: index)
            let ended = ApprovalEnded(
                approval: approval, how: .resolved, decision: payload.decision.flatMap(ApprovalDecision.init(rawValue:)), by: payload.resolvedBy, at: now)
            updates.append(update(ended: ended))
        case .listed(let kind, let records):
            let listed = Set(records.map(\.id))
            for approval in pending where approval.kind == kind && !listed.contains(approval.id) {
                pending.removeAll { $0.id == approval.id }
                updates.append(update(ended: ApprovalEnded(approval: approval, how: .gone, at: now)))
            }
            for record in records {
                updates += handle(.requested(record), now: now, clockOffset: clockOffset)
            }
        case .notFound(let id):
            guard let index = pending.firstIndex(where: { $0.id == id }) else { break }
            let approval = pending.remove(at: index)
            updates.append(update(ended: ApprovalEnded(approval: approval, how: .gone, at: now)))
        case .availability(let why):
            guard why != unavailable else { break }
            unavailable = why
            if why != nil {
                // Without the scope the gateway sends nothing more of them: what is shown would go stale.
                let gone = pending
                pending = []
                for approval in gone { updates.append(update(ended: ApprovalEnded(approval: approval, how: .gone, at: now))) }
            }
            if updates.isEmpty { updates.append(update()) }
        case .tick:
            while let index = pending.firstIndex(where: { ($0.expiresAt ?? .distantFuture) <= now }) {
                let approval = pending.remove(at: index)
                updates.append(update(ended: ApprovalEnded(approval: approval, how: .expired, at: now)))
            }
        }
        return updates
    }

    /// When the next approval expires.
    public var nextExpiry: Date? {
        pending.compactMap(\.expiresAt).min()
    }

    /// The waiting approval `id` names: the whole id, or a prefix of one (as the gateway takes
    /// them). Words when it names none or several.
    public func approval(named id: String) -> Result<PendingApproval, ApprovalLookupError> {
        let id = id.trimmingCharacters(in: .whitespaces)
        if let exact = pending.first(where: { $0.id == id }) { return .success(exact) }
        let matches = pending.filter { $0.id.lowercased().hasPrefix(id.lowercased()) }
        switch matches.count {
        case 1: return .success(matches[0])
        case 0:
            return .failure(
                ApprovalLookupError(
                    pending.isEmpty
                        ? "no approval is waiting" + (unavailable.map { ": \($0)" } ?? "")
                        : "no waiting approval has the id \(id) (waiting: \(pending.map(\.shortID).joined(separator: ", ")))"))
        default:
            return .failure(ApprovalLookupError("\(id) names \(matches.count) waiting approvals: give more of the id"))
        }
    }

    /// The whole state, as `approvals` retains it.
    public var current: ApprovalsUpdate { update() }

    private func update(arrived: PendingApproval? = nil, ended: ApprovalEnded? = nil) -> ApprovalsUpdate {
        ApprovalsUpdate(pending: pending, arrived: arrived, ended: ended, unavailable: unavailable)
    }

    /// A gateway's record as the bus shows it.
    static func approval(_ record: ApprovalRecord, clockOffset: Int) -> PendingApproval {
        let request = record.request
        let date = { (milliseconds: Int?) in milliseconds.map { Date(timeIntervalSince1970: Double($0 - clockOffset) / 1000) } }
        if record.isPlugin {
            return PendingApproval(
                id: record.id, kind: .plugin, summary: request.title ?? request.toolName ?? "a plugin asks", detail: request.description,
                agent: request.agentId, session: request.sessionKey, severity: request.severity ?? "warning", createdAt: date(record.createdAtMs),
                expiresAt: date(record.expiresAtMs))
        }
        let allowed = request.allowedDecisions?.compactMap(ApprovalDecision.init(rawValue:)) ?? ApprovalDecision.allCases
        return PendingApproval(
            id: record.id, kind: .exec, summary: request.commandPreview ?? request.command ?? "a command", host: request.host,
            workingDirectory: request.cwd, agent: request.agentId, session: request.sessionKey,
            allowedDecisions: allowed.isEmpty ? ApprovalDecision.allCases : allowed, createdAt: date(record.createdAtMs),
            expiresAt: date(record.expiresAtMs))
    }
}

/// Why an id names no single waiting approval, in words.
public struct ApprovalLookupError: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
