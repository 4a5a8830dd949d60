public import FoundationEssentials
public import TetherSchema

/// Approvals in words for a terminal: a line each, and what is said when one arrives or ends.
public enum ApprovalWords {
    /// `3f0c9c2e  run `rm -rf build` on gateway in /home/me (agent main), 29 min left: allow-once | allow-always | deny`
    public static func line(_ approval: PendingApproval, now: Date) -> String {
        var what: String
        switch approval.kind {
        case .exec:
            what = "run `\(approval.summary)`"
            if let host = approval.host { what += " on \(host)" }
            if let directory = approval.workingDirectory { what += " in \(directory)" }
        case .plugin:
            what = "\(approval.severity.map { "[\($0)] " } ?? "")\(approval.summary)"
            if let detail = approval.detail { what += ": \(detail)" }
        }
        if let agent = approval.agent { what += " (agent \(agent))" }
        let left = approval.expiresAt.map { ", \(timeLeft(until: $0, now: now))" } ?? ""
        return "\(approval.shortID)  \(what)\(left): \(approval.allowedDecisions.map(\.rawValue).joined(separator: " | "))"
    }

    /// Said when one arrives.
    public static func arrived(_ approval: PendingApproval, now: Date) -> String {
        "approval waiting: \(line(approval, now: now)) (tether approve \(approval.shortID) DECISION)"
    }

    /// Said when one stops waiting.
    public static func ended(_ ended: ApprovalEnded) -> String {
        "approval \(ended.approval.shortID) (\(ended.approval.summary)): \(ended.words)"
    }

    /// "29 min left", "40 s left", "expiring".
    static func timeLeft(until deadline: Date, now: Date) -> String {
        timeLeft(seconds: deadline.timeIntervalSince(now))
    }

    static func timeLeft(seconds left: Double) -> String {
        let seconds = Int(left.rounded(.down))
        if seconds <= 0 { return "expiring" }
        if seconds < 120 { return "\(seconds) s left" }
        return "\(seconds / 60) min left"
    }
}

extension String {
    /// With its first letter in capitals, to start a sentence.
    var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
