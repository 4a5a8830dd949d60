import Foundation
import Logging
import OpenClawWire

/// Exec approvals as the real gateway handles them (docs/GATEWAY.md): a run whose message
/// starts with `exec:` calls the `exec` tool, which asks for an approval to run the rest as a
/// command, broadcast to the connections with `operator.approvals`, and is answered at once
/// "Approval required"; the run ends. `exec.approval.resolve` or the approval's expiry (no
/// event says that it expired; with no such connection it expires at once, no route) starts
/// the gateway's own turn with the outcome. Pending approvals live in memory: a restart
/// loses them.
extension OpenClawGateway {
    /// What a message asks the agent to run, when it asks that.
    static func execCommand(in message: String) -> String? {
        guard message.hasPrefix(execPrefix) else { return nil }
        let command = message.dropFirst(execPrefix.count).trimmingCharacters(in: .whitespaces)
        return command.isEmpty ? nil : command
    }

    static let execPrefix = "exec:"

    /// The `exec` tool call of a run that asks to run `command`, as the real gateway makes it:
    /// the approval requested (broadcast to the connections with `operator.approvals`) and the
    /// call answered at once, "Approval required"; the run goes on. The decision, or the
    /// approval's expiry (at once when nobody can approve), starts the gateway's own turn.
    /// False when the run was aborted meanwhile.
    func askApproval(toRun command: String, runID: String, sessionKey: String) async -> Bool {
        let id = UUID().uuidString.lowercased()
        let callID = "call_" + String(UUID().uuidString.lowercased().filter(\.isHexDigit).prefix(12))
        let arguments: JSONValue = .object(["command": .string(command)])
        let startedAt = OpenClawProtocol.milliseconds(Date())
        await toolEvent(
            runID, sessionKey: sessionKey, data: ["phase": .string("start"), "name": .string("exec"), "toolCallId": .string(callID), "args": arguments])
        let timeout = settings.approvalTimeout
        let record = ApprovalRecord(
            id: id,
            request: ApprovalRecord.Request(
                command: command, cwd: "/home/opta/project", host: "gateway", agentId: "main", sessionKey: sessionKey, ask: "on-miss",
                allowedDecisions: ["allow-once", "allow-always", "deny"]),
            createdAtMs: startedAt,
            expiresAtMs: startedAt + Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        let approvers = links.values.contains { $0.isConnected && $0.allows(OpenClawProtocol.approvalsScope) }
        await broadcast(droppable: true, to: { $0.allows(OpenClawProtocol.approvalsScope) }) { _ in
            ("exec.approval.requested", try? JSONValue(encoding: record))
        }
        let output = "Approval required (id \(id.prefix(8))). The command runs once it is approved; its result follows."
        await toolEvent(
            runID, sessionKey: sessionKey,
            data: [
                "phase": .string("result"), "name": .string("exec"), "toolCallId": .string(callID), "meta": .string(command), "isError": .bool(false),
                "result": .object(["content": .array([.object(["type": .string("text"), "text": .string(output)])])]),
            ])
        var call = ChatTranscriptMessage(role: "assistant", text: "", timestamp: startedAt, stopReason: "toolUse", model: Self.model)
        call.content = .array([.object(["type": .string("toolCall"), "id": .string(callID), "name": .string("exec"), "arguments": arguments])])
        var answer = ChatTranscriptMessage(role: "toolResult", text: output, timestamp: OpenClawProtocol.milliseconds(Date()))
        answer.toolCallID = callID
        answer.toolName = "exec"
        answer.isError = false
        activeRuns[runID]?.toolEntries = [call, answer]
        if approvers {
            logger.notice("approval requested", metadata: ["gateway.approval": "\(id)", "gateway.command": "\(command)"])
            pendingApprovals[id] = PendingApproval(record: record, command: command, sessionKey: sessionKey)
            Task {
                try? await Task.sleep(for: timeout)
                await self.expireApproval(id)
            }
        } else {
            logger.notice("approval expired at once: no client can approve", metadata: ["gateway.approval": "\(id)"])
            followUp(approval: id, command: command, sessionKey: sessionKey, decision: nil)
        }
        return activeRuns[runID]?.aborted == false
    }

    /// The approval's time ran out: nothing is broadcast, and the gateway's turn says so.
    private func expireApproval(_ id: String) {
        guard let pending = pendingApprovals.removeValue(forKey: id) else { return }
        logger.notice("approval expired", metadata: ["gateway.approval": "\(id)"])
        followUp(approval: id, command: pending.command, sessionKey: pending.sessionKey, decision: nil)
    }

    /// The gateway's own turn after an approval (`exec-approval-followup:<id>`, as
    /// `bash-tools.exec-approval-followup.ts` starts it): the command run (allowed) or not,
    /// once the session's run in progress has ended; its user entry is the gateway's prompt
    /// with the outcome, time-prefixed, and the bot says what happened.
    private func followUp(approval id: String, command: String, sessionKey: String, decision: String?) {
        let allowed = decision == "allow-once" || decision == "allow-always"
        let details =
            allowed
            ? "Exec finished (gateway id=\(id), session=\(id.prefix(8)), code 0)\n" + Self.toolOutput(ToolRequest(name: "exec", argument: command)).0
            : "Exec denied (gateway id=\(id), \(decision == "deny" ? "user-denied" : "approval-timeout")): \(command)"
        let prompt = "[\(Self.stamp(Date()))] " + Self.followUpPrompt(details, allowed: allowed)
        let runID = "exec-approval-followup:\(id)"
        Task {
            if allowed { try? await Task.sleep(for: Self.toolDuration) }
            await self.startOwnTurn(runID, prompt: prompt, answer: Self.execReply(command: command, decision: decision), in: sessionKey)
        }
    }

    /// The model's words after its `exec` call waits for an approval: in the transcript only.
    static func awaitingApprovalReply(command: String) -> String {
        "Running `\(command)` needs an approval: it runs once the approval is answered."
    }

    /// The gateway's prompt for its turn after an approval, in its words.
    static func followUpPrompt(_ details: String, allowed: Bool) -> String {
        allowed
            ? [
                "An async command the user already approved has completed.", "Do not run the command again.", "", "Exact completion details:", details, "",
                "Reply to the user in a helpful way.", "If it succeeded, share the relevant output.", "If it failed, explain what went wrong.",
            ].joined(separator: "\n")
            : [
                "An async command did not run.", "Do not run the command again.", "There is no new command output.",
                "Do not mention, summarize, or reuse output from any earlier run in this session.", "", "Exact completion details:", details, "",
                "Reply to the user in a helpful way.", "Explain that the command did not run and why.", "Do not claim there is new command output.",
            ].joined(separator: "\n")
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
            followUp(approval: id, command: pending.command, sessionKey: pending.sessionKey, decision: params.decision)
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

    /// An exec approval waiting for a decision: what the gateway's turn after it needs.
    struct PendingApproval {
        var record: ApprovalRecord
        var command: String
        var sessionKey: String
    }
}
