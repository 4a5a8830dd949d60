import Foundation
import Testing
import TetherBus
import TetherSchema

@testable import FrontEnd

/// The terminal UI's approval prompt: shown whole over the input line, answered with a key for
/// each decision the approval allows, put aside and brought back, its time left kept current.
@Suite struct ApprovalPromptTests {
    private let start = ContinuousClock.now
    private let date = Date(timeIntervalSince1970: 1_800_000_000)

    private func approval(
        _ id: String, command: String = "rm -rf build", allowed: [ApprovalDecision] = ApprovalDecision.allCases, minutes: Double = 30
    )
        -> PendingApproval
    {
        PendingApproval(
            id: id, kind: .exec, summary: command, host: "gateway", workingDirectory: "/home/me", agent: "main", allowedDecisions: allowed,
            createdAt: date.addingTimeInterval(Double(id.count)), expiresAt: date.addingTimeInterval(minutes * 60))
    }

    private func message(_ update: ApprovalsUpdate, replay: Bool = false) throws -> BusMessage {
        var header = BusHeader(source: "protod", sequence: 1)
        header.replay = replay
        return BusMessage(topic: .approvals, header: header, body: try BusSchema.makeEncoder().encode(update))
    }

    private func screen() -> ChatScreen {
        ChatScreen(
            frontEnd: "tether", frame: FirstFrame(display: DisplaySnapshot(frontEnd: "tether", draft: "half typed"), identity: nil, entries: [], revision: 0))
    }

    private func texts(_ screen: ChatScreen, width: Int = 80, height: Int = 20, at now: ContinuousClock.Instant? = nil) -> [String] {
        screen.render(width: width, height: height, at: now ?? start).rows.map(\.text)
    }

    @Test func aWaitingApprovalIsShownWholeWithItsKeysAndAnswered() throws {
        var screen = screen()
        let waiting = approval("3f0c9c2e-aaaa")
        #expect(screen.apply(try message(ApprovalsUpdate(pending: [waiting], arrived: waiting)), at: start, date: date))
        let rows = texts(screen)
        let heading = try #require(rows.firstIndex { $0.contains("Approval waiting, 30 min left: the agent asks to run") })
        #expect(rows[heading + 1] == "   rm -rf build")
        #expect(rows[heading + 2] == "   on gateway · in /home/me · agent main")
        #expect(rows[heading + 3] == " o allow once · a allow always · d deny · Esc later")
        #expect(rows.last == "> half typed", "the draft stays under the prompt")
        // A letter answers, not the draft.
        #expect(screen.handle(.character("x"), at: start) == nil)
        #expect(texts(screen).contains { $0.hasPrefix("the approval waits for an answer: o allow once") })
        #expect(screen.composer.draft == "half typed")
        #expect(screen.handle(.character("o"), at: start) == .approve(id: "3f0c9c2e-aaaa", decision: .allowOnce))
        #expect(texts(screen).contains(" Allow once: sent to the gateway, waiting for its answer…"))
        #expect(screen.handle(.character("d"), at: start) == nil, "answered once")
        // protod says it ended: the prompt goes, and says how.
        let ended = ApprovalEnded(approval: waiting, how: .resolved, decision: .allowOnce, by: "tether", at: date)
        screen.apply(try message(ApprovalsUpdate(pending: [], ended: ended)), at: start, date: date)
        #expect(!texts(screen).contains { $0.contains("Approval waiting") })
        #expect(texts(screen).contains { $0.hasPrefix("Approval 3f0c9c2e (rm -rf build): allowed once by tether") })
        screen.handle(.character("!"), at: start)
        #expect(screen.composer.draft == "half typed!", "with no approval waiting, letters type again")
    }

    @Test func onlyTheDecisionsTheApprovalAllowsAreTaken() throws {
        var screen = screen()
        let waiting = approval("abc", allowed: [.allowOnce, .deny])
        screen.apply(try message(ApprovalsUpdate(pending: [waiting], arrived: waiting)), at: start, date: date)
        #expect(texts(screen).contains(" o allow once · d deny · Esc later"))
        #expect(screen.handle(.character("a"), at: start) == nil)
        #expect(texts(screen).contains { $0.hasPrefix("this approval cannot be answered allow always: o allow once · d deny") })
        #expect(screen.handle(.character("D"), at: start) == .approve(id: "abc", decision: .deny))
    }

    @Test func escPutsItAsideCtrlGBringsItBackAndANewOneShowsItself() throws {
        var screen = screen()
        let first = approval("first")
        screen.apply(try message(ApprovalsUpdate(pending: [first], arrived: first)), at: start, date: date)
        #expect(screen.handle(.escape, at: start) == nil)
        #expect(!texts(screen).contains { $0.contains("Approval waiting") })
        #expect(texts(screen).contains { $0.contains("1 approval waiting (Ctrl-G)") })
        screen.handle(.character("o"), at: start)
        #expect(screen.composer.draft == "half typedo", "aside, keys type")
        screen.handle(.control("g"), at: start)
        #expect(texts(screen).contains { $0.contains("Approval waiting") })
        screen.handle(.escape, at: start)
        let second = approval("second-one", command: "make deploy")
        screen.apply(try message(ApprovalsUpdate(pending: [first, second], arrived: second)), at: start, date: date)
        let rows = texts(screen)
        #expect(rows.contains { $0.contains("Approval waiting (1 of 2), 30 min left") }, "\(rows)")
        #expect(rows.contains(" o allow once · a allow always · d deny · Tab next · Esc later"))
        screen.handle(.control("i"), at: start)
        #expect(texts(screen).contains("   make deploy"))
        #expect(screen.handle(.character("a"), at: start) == .approve(id: "second-one", decision: .allowAlways))
    }

    @Test func ctrlGWithNothingWaitingSaysSo() {
        var screen = screen()
        screen.handle(.control("g"), at: start)
        #expect(texts(screen).contains("no approval is waiting"))
    }

    @Test func aReplayedValueShowsWhatWaitsButNotOldNews() throws {
        var screen = screen()
        let waiting = approval("kept")
        let ended = ApprovalEnded(approval: approval("old"), how: .expired, at: date)
        screen.apply(try message(ApprovalsUpdate(pending: [waiting], ended: ended), replay: true), at: start, date: date)
        let rows = texts(screen)
        #expect(rows.contains { $0.contains("Approval waiting") })
        #expect(!rows.contains { $0.contains("expired") })
    }

    @Test func anAnswerThatFailsCanBeGivenAgain() throws {
        var screen = screen()
        let waiting = approval("again")
        screen.apply(try message(ApprovalsUpdate(pending: [waiting], arrived: waiting)), at: start, date: date)
        #expect(screen.handle(.character("o"), at: start) != nil)
        screen.approvalNotAnswered("again", because: "the approval was not answered: protod did not answer")
        #expect(texts(screen).contains("the approval was not answered: protod did not answer"))
        #expect(screen.handle(.character("o"), at: start) == .approve(id: "again", decision: .allowOnce))
    }

    @Test func aLongCommandIsCutSayingWhereItIsWholeAndTheKeysStay() throws {
        var screen = screen()
        let long = approval("long", command: (1...40).map { "word\($0)" }.joined(separator: " "))
        screen.apply(try message(ApprovalsUpdate(pending: [long], arrived: long)), at: start, date: date)
        let rows = texts(screen, width: 40, height: 20)
        #expect(rows.contains("   … 3 more lines: tether approvals show"), "\(rows)")
        #expect(rows.contains { $0.hasPrefix(" o allow once · a allow always · d deny") })
        #expect(rows.filter { $0.hasPrefix("   word") }.count == ApprovalPrompt.commandRows - 1)
        // A tiny terminal keeps the heading, the keys and a conversation row.
        let tiny = texts(screen, width: 40, height: 6)
        #expect(tiny.count == 6)
        #expect(tiny.contains { $0.hasPrefix(" o allow once · a allow always · d deny") })
        #expect(tiny.contains("No messages yet. Type one and press Enter."))
    }

    @Test func theTimeLeftIsRedrawnEachMinuteThenEachSecond() throws {
        var screen = screen()
        let waiting = approval("clock", minutes: 3)
        screen.apply(try message(ApprovalsUpdate(pending: [waiting], arrived: waiting)), at: start, date: date)
        #expect(texts(screen).contains { $0.contains("3 min left") })
        let next = try #require(screen.nextChange(after: start + .seconds(30)))
        #expect(next - start == .seconds(60), "from 150 s left to 119 s left… the minute changes at 120 s")
        #expect(texts(screen, at: start + .seconds(61)).contains { $0.contains("119 s left") })
        let second = try #require(screen.nextChange(after: start + .seconds(61) + .milliseconds(250)))
        #expect(second - start == .seconds(62))
        #expect(texts(screen, at: start + .seconds(181)).contains { $0.contains("expiring") })
        #expect(screen.nextChange(after: start + .seconds(181)) == nil)
        screen.handle(.escape, at: start)
        #expect(screen.nextChange(after: start) == nil, "aside, nothing on screen changes by itself")
    }
}
