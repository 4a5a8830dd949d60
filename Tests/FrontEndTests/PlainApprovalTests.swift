import Foundation
import FrontEnd
import Testing
import TetherBus
import TetherSchema

/// What `--plain` says of approvals: each waiting one once, as it arrives or when the session
/// starts, and how it ended; a replayed end is old news.
@Suite struct PlainApprovalTests {
    static let approval = PendingApproval(
        id: "3f0c9c2e-8a51", kind: .exec, summary: "make deploy", host: "gateway", workingDirectory: "/srv", agent: "main",
        expiresAt: Date().addingTimeInterval(600))

    static func message(_ update: ApprovalsUpdate, replay: Bool = false) throws -> BusMessage {
        BusMessage(
            topic: .approvals, header: BusHeader(source: "tether-protod", sequence: 1, replay: replay), body: try BusSchema.makeEncoder().encode(update))
    }

    @Test func eachApprovalIsSaidOnceAndThenHowItEnded() throws {
        var announcer = PlainAnnouncer(model: TranscriptModel(snapshot: [], revision: 0))
        let first = announcer.lines(for: try Self.message(ApprovalsUpdate(pending: [Self.approval]), replay: true))
        #expect(first.count == 1)
        #expect(first[0].hasPrefix("Approval waiting: 3f0c9c2e  run `make deploy` on gateway in /srv (agent main), "), "\(first)")
        #expect(first[0].hasSuffix("allow-once | allow-always | deny (tether approve 3f0c9c2e DECISION)."), "\(first)")
        #expect(announcer.lines(for: try Self.message(ApprovalsUpdate(pending: [Self.approval], arrived: Self.approval))).isEmpty)
        let ended = ApprovalEnded(approval: Self.approval, how: .resolved, decision: .deny, by: "openclaw-control-ui", at: Date())
        #expect(
            announcer.lines(for: try Self.message(ApprovalsUpdate(pending: [], ended: ended)))
                == ["Approval 3f0c9c2e (make deploy): denied by openclaw-control-ui."])
        // The same end replayed to a new subscription: nothing more.
        #expect(announcer.lines(for: try Self.message(ApprovalsUpdate(pending: [], ended: ended), replay: true)).isEmpty)
    }
}
