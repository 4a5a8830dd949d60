import Foundation
import Logging
import OpenClawWire

/// Exec approvals as the real gateway handles them (docs/GATEWAY.md): a run whose message
/// starts with `exec:` asks for an approval to run the rest as a command, broadcast to the
/// connections with `operator.approvals`, and waits for `exec.approval.resolve` or its
/// expiry; no event says that it expired; with no such connection it expires at once (no
/// route). Pending approvals live in memory: a restart loses them.
extension OpenClawGateway {
    /// What a message asks the agent to run, when it asks that.
    static func execCommand(in message: String) -> String? {
        guard message.hasPrefix(execPrefix) else { return nil }
        let command = message.dropFirst(execPrefix.count).trimmingCharacters(in: .whitespaces)
        return command.isEmpty ? nil : command
    }

    static let execPrefix = "exec:"

    /// Asks for an approval to run `command` and waits: the decision, or nil when it expired
    /// (or nobody could be asked).
    func approval(toRun command: String, runID: String, sessionKey: String) async -> String? {
        let id = UUID().uuidString.lowercased()
        let now = OpenClawProtocol.milliseconds(Date())
        let timeout = settings.approvalTimeout
        let record = ApprovalRecord(
            id: id,
            request: ApprovalRecord.Request(
                command: command, cwd: "/home/opta/project", host: "gateway", agentId: "main", sessionKey: sessionKey, ask: "on-miss",
                allowedDecisions: ["allow-once", "allow-always", "deny"]),
            createdAtMs: now, expiresAtMs: now + Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        let approvers = links.values.contains { $0.isConnected && $0.allows(OpenClawProtocol.approvalsScope) }
        await broadcast(droppable: true, to: { $0.allows(OpenClawProtocol.approvalsScope) }) { _ in
            ("exec.approval.requested", try? JSONValue(encoding: record))
        }
        guard approvers else {
            logger.notice("approval expired at once: no client can approve", metadata: ["gateway.approval": "\(id)"])
            return nil
        }
        logger.notice("approval requested", metadata: ["gateway.approval": "\(id)", "gateway.command": "\(command)"])
        return await withCheckedContinuation { continuation in
            pendingApprovals[id] = PendingApproval(record: record, waiter: continuation)
            Task {
                try? await Task.sleep(for: timeout)
                await self.expireApproval(id)
            }
        }
    }

    /// The approval's time ran out: the run goes on without a decision, and nothing is broadcast.
    private func expireApproval(_ id: String) {
        guard let pending = pendingApprovals.removeValue(forKey: id) else { return }
        logger.notice("approval expired", metadata: ["gateway.approval": "\(id)"])
        pending.waiter.resume(returning: nil)
    }

    /// `exec.approval.list`, `exec.approval.resolve`, `plugin.approval.list`,
    /// `plugin.approval.resolve`: the answer, or nil for another method.
    func approvalRequest(
        method: String, params: JSONValue?, on link: OpenClawClientConnection
    ) async -> (
        ok: Bool, payload: JSONValue?, error: GatewayErrorShape?
    )? {
        guard ["exec.approval.list", "exec.approval.resolve", "plugin.approval.list", "plugin.approval.resolve"].contains(method) else { return nil }
        guard link.allows(OpenClawProtocol.approvalsScope) else { return (false, nil, Self.missingScope(OpenClawProtocol.approvalsScope)) }
        switch method {
        case "exec.approval.list":
            let records = pendingApprovals.values.map(\.record).sorted { ($0.createdAtMs ?? 0) < ($1.createdAtMs ?? 0) }
            return (true, try? JSONValue(encoding: records), nil)
        case "plugin.approval.list":
            return (true, .array([]), nil)
        default:
            guard let params = try? params?.decode(ApprovalResolveParams.self), !params.id.isEmpty else {
                return (false, nil, Self.invalid("invalid \(method) params: must have required property 'id'"))
            }
            guard ["allow-once", "allow-always", "deny"].contains(params.decision) else { return (false, nil, Self.invalid("invalid decision")) }
            let matches = method.hasPrefix("plugin.") ? [] : pendingApprovals.keys.filter { $0 == params.id || $0.hasPrefix(params.id.lowercased()) }
            guard matches.count <= 1 else { return (false, nil, Self.invalid("ambiguous approval id prefix; use the full id")) }
            guard let id = matches.first, let pending = pendingApprovals[id] else {
                return (
                    false, nil,
                    GatewayErrorShape(
                        code: "INVALID_REQUEST", message: "unknown or expired approval id", details: .object(["reason": .string("APPROVAL_NOT_FOUND")]))
                )
            }
            if let allowed = pending.record.request.allowedDecisions, !allowed.contains(params.decision) {
                return (
                    false, nil,
                    GatewayErrorShape(
                        code: "INVALID_REQUEST", message: "allow-always is unavailable because the effective policy requires approval every time",
                        details: .object(["reason": .string("APPROVAL_ALLOW_ALWAYS_UNAVAILABLE")]))
                )
            }
            pendingApprovals[id] = nil
            let resolved = ApprovalResolvedPayload(
                id: id, decision: params.decision, resolvedBy: link.senderLabel, ts: OpenClawProtocol.milliseconds(Date()))
            logger.notice("approval resolved", metadata: ["gateway.approval": "\(id)", "gateway.decision": "\(params.decision)"])
            // The event goes out before the answer, as the real gateway sends them.
            await broadcast(droppable: true, to: { $0.allows(OpenClawProtocol.approvalsScope) }) { _ in
                ("exec.approval.resolved", try? JSONValue(encoding: resolved))
            }
            pending.waiter.resume(returning: params.decision)
            return (true, .object(["ok": .bool(true)]), nil)
        }
    }

    /// The bot's reply to a run that asked to run `command`, by the decision.
    static func execReply(command: String, decision: String?) -> String {
        switch decision {
        case "allow-once", "allow-always": "Ran `\(command)` (\(decision == "allow-always" ? "allowed always" : "allowed once")): done."
        case "deny": "Did not run `\(command)`: the approval was denied."
        default: "Did not run `\(command)`: nobody answered the approval in time."
        }
    }

    /// An exec approval waiting for a decision, and the run waiting on it.
    struct PendingApproval {
        var record: ApprovalRecord
        var waiter: CheckedContinuation<String?, Never>
    }
}
