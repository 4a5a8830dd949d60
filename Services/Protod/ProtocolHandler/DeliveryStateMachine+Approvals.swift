import Foundation
import OpenClawWire
import TetherSchema

// MARK: Approvals

extension DeliveryStateMachine {
    /// The id of the request for the gateway's list of one kind of approvals.
    static func approvalListID(_ kind: PendingApproval.Kind) -> String { "approvals:\(kind.rawValue)" }

    /// Feeds the approval book and retains what changed on `approvals`.
    mutating func approvals(_ event: ApprovalBook.Event, now: Date, into actions: inout [Action]) {
        let offset = gatewayClockOffset
        for update in approvals.handle(event, now: now, clockOffset: offset) { actions.append(.retainApprovals(update)) }
    }

    /// A connection opened: with the scope, the gateway's lists are asked for (what arrived or
    /// ended while Tether could not hear it); without, why there are none.
    mutating func approvalsConnectionUp(epoch: Int, gateway: GatewayInfo?, now: Date, into actions: inout [Action]) {
        guard let gateway, gateway.dialect == .openclaw else {
            approvals(.availability("the gateway speaks the seeds' JSON, which has no approvals"), now: now, into: &actions)
            return
        }
        guard OpenClawProtocol.grantsApprovals(gateway.scopes ?? []) else {
            if let request = gateway.scopeUpgradeRequest {
                let approve = "openclaw devices approve \(request.isEmpty ? (gateway.deviceID ?? "DEVICE") : request)"
                approvals(
                    .availability(
                        "the gateway waits for a person to approve Tether's scope operator.approvals: run `\(approve)` on the gateway, then `tether reconnect`"
                    ), now: now, into: &actions)
                return
            }
            approvals(
                .availability(
                    "Tether's connection to the gateway lacks the scope operator.approvals (start tether-connd with --approvals; the gateway then asks for the device to be approved again)"
                ), now: now, into: &actions)
            return
        }
        approvals(.availability(nil), now: now, into: &actions)
        for kind in [PendingApproval.Kind.exec, .plugin] {
            let frame = OpenClawCodec().encode(.request(id: Self.approvalListID(kind), method: "\(kind.rawValue).approval.list", params: .object([:])))
            write(Data(frame.utf8), on: epoch, into: &actions)
        }
    }

    /// An approval event or the answer to a list request; false when the frame is neither.
    mutating func receiveApprovals(_ frame: OpenClawFrame, now: Date, into actions: inout [Action]) -> Bool {
        switch frame {
        case .event(name: "exec.approval.requested", let payload?, _), .event(name: "plugin.approval.requested", let payload?, _):
            if let record = try? payload.decode(ApprovalRecord.self) {
                tieToRunInProgress(record)
                approvals(.requested(record), now: now, into: &actions)
            }
        case .event(name: "exec.approval.resolved", let payload?, _), .event(name: "plugin.approval.resolved", let payload?, _):
            if let resolved = try? payload.decode(ApprovalResolvedPayload.self) { approvals(.resolved(resolved), now: now, into: &actions) }
        case .response(id: let id, ok: true, let payload?, _) where id.hasPrefix("approvals:"):
            let kind: PendingApproval.Kind = id == Self.approvalListID(.plugin) ? .plugin : .exec
            if let records = try? payload.decode([ApprovalRecord].self) { approvals(.listed(kind, records), now: now, into: &actions) }
        case .response(id: let id, ok: false, _, _) where id.hasPrefix("approvals:"):
            break
        default:
            return false
        }
        return true
    }

    /// An approval asked for in the session while a run of Tether's goes on there was asked by
    /// that run: the gateway's follow-up turn after it answers the run's message.
    private mutating func tieToRunInProgress(_ record: ApprovalRecord) {
        guard case .openClaw(let link)? = connection?.dialect, record.request.sessionKey.map(link.names) ?? true,
            let message = runInProgress(link)
        else { return }
        followUps.tie(record.id, to: message)
    }

    /// The gateway's clock minus protod's, in milliseconds, as the open connection measured it.
    private var gatewayClockOffset: Int {
        guard case .openClaw(let link)? = connection?.dialect else { return 0 }
        return Int((link.clockOffset * 1000).rounded())
    }
}
