import DesktopNotifier
import Foundation
import Testing
import TetherSchema
import TetherWire

@Suite struct NotificationMachineTests {
    private let start = ContinuousClock.now
    private let began = Date(timeIntervalSince1970: 1_800_000_000)

    private func machine(attached: [FrontEndPresence] = []) -> NotificationMachine {
        var machine = NotificationMachine(notBefore: began)
        _ = machine.handle(.frontEnds(attached), now: start)
        return machine
    }

    private func reply(_ id: String, _ content: String, bot: String = "Opta", at seconds: Double = 1) -> NotificationMachine.Event {
        .message(TranscriptEntry(id: MessageID(id), sender: .bot(name: bot), content: content, timestamp: began + seconds, status: .received))
    }

    private func frontEnd(_ instance: String, _ attention: FrontEndPresence.Attention?, kind: String = "tether") -> FrontEndPresence {
        FrontEndPresence(frontEnd: kind, instance: instance, pid: 1, state: .active, renewalSeconds: 30, attention: attention)
    }

    private func approval(_ id: String, _ summary: String) -> PendingApproval {
        PendingApproval(id: id, kind: .exec, summary: summary)
    }

    @Test func aReplyWithNobodyLookingIsShownWithItsFirstLine() {
        var machine = machine()
        let actions = machine.handle(reply("r1", "\n  The build passed.  \nAll 12 tests ran."), now: start)
        #expect(
            actions == [
                .notify(DesktopNotification(notice: .replies, summary: "Opta replied", body: "The build passed.", category: "im.received"))
            ])
    }

    @Test func nothingIsShownForTheUsersOwnMessagesToolCallsOrOldReplies() {
        var machine = machine()
        let own = TranscriptEntry(id: MessageID("m1"), sender: .user, content: "hello", timestamp: began + 1, status: .delivered)
        #expect(machine.handle(.message(own), now: start) == [])
        let tool = TranscriptEntry(
            id: MessageID("tool:1"), sender: .bot(name: "Opta"), content: "read README.md", timestamp: began + 1, status: .received,
            tool: ToolCall(callID: "1", name: "read", arguments: "README.md", state: .running))
        #expect(machine.handle(.message(tool), now: start) == [])
        let streaming = TranscriptEntry(id: MessageID("r0"), sender: .bot(name: "Opta"), content: "cut", timestamp: began + 1, status: .incomplete)
        #expect(machine.handle(.message(streaming), now: start) == [], "a reply cut off is not a reply completed")
        #expect(machine.handle(reply("old", "from the history", at: -60), now: start) == [], "older than tether-notify: the history read again")
    }

    @Test func aReplyPublishedAgainIsShownOnce() {
        var machine = machine()
        #expect(machine.handle(reply("r1", "first"), now: start).count == 1)
        #expect(machine.handle(reply("r1", "first"), now: start + .seconds(20)) == [], "the history added its thinking: same reply")
    }

    @Test func repliesWithinTheWindowReplaceOneNotification() {
        var machine = machine()
        _ = machine.handle(reply("r1", "one"), now: start)
        #expect(machine.handle(.shown(.replies, id: 7), now: start) == [])
        #expect(
            machine.handle(reply("r2", "two"), now: start + .seconds(3))
                == [.notify(DesktopNotification(notice: .replies, summary: "Opta: 2 replies", body: "two", replacing: 7, category: "im.received"))])
        #expect(
            machine.handle(reply("r3", "three"), now: start + .seconds(12))
                == [
                    .notify(DesktopNotification(notice: .replies, summary: "Opta: 3 replies", body: "three", replacing: 7, category: "im.received"))
                ], "the window runs from the last reply")
        #expect(
            machine.handle(reply("r4", "four"), now: start + .seconds(23))
                == [.notify(DesktopNotification(notice: .replies, summary: "Opta replied", body: "four", category: "im.received"))],
            "more than 10 s later: a notification of its own")
    }

    @Test func noNotificationWhileAnyFrontEndMayHaveAttention() {
        var focused = machine(attached: [frontEnd("a", .away), frontEnd("b", .focused)])
        #expect(focused.handle(reply("r1", "hi"), now: start) == [])
        var unknown = machine(attached: [frontEnd("plain", nil, kind: "tether --plain")])
        #expect(unknown.handle(reply("r1", "hi"), now: start) == [], "a front end that cannot tell counts as looked at")
        var scripts = machine(attached: [frontEnd("s", .unattended, kind: "tether send"), frontEnd("w", .unattended, kind: "tether watch")])
        #expect(scripts.handle(reply("r1", "hi"), now: start).count == 1, "tether send and watch are nobody's eyes")
        var notYet = NotificationMachine(notBefore: began)
        #expect(notYet.handle(reply("r1", "hi"), now: start) == [], "the front ends are not known yet")
        #expect(notYet.handle(reply("r1", "hi"), now: start) == [])
    }

    @Test func focusLostThenRegainedClosesTheRepliesShown() {
        var machine = machine(attached: [frontEnd("a", .focused)])
        #expect(machine.handle(reply("r1", "while looking"), now: start) == [])
        #expect(machine.handle(.frontEnds([frontEnd("a", .away)]), now: start) == [])
        #expect(machine.handle(reply("r2", "while away"), now: start + .seconds(1)).count == 1)
        _ = machine.handle(.shown(.replies, id: 3), now: start + .seconds(1))
        #expect(machine.handle(.frontEnds([frontEnd("a", .focused)]), now: start + .seconds(5)) == [.close(3)], "the reply is on the screen")
        #expect(machine.handle(.frontEnds([frontEnd("a", .away)]), now: start + .seconds(6)) == [])
        #expect(
            machine.handle(reply("r3", "away again"), now: start + .seconds(7))
                == [.notify(DesktopNotification(notice: .replies, summary: "Opta replied", body: "away again", category: "im.received"))],
            "a new notification, not a replacement of the one closed")
    }

    @Test func anApprovalIsShownAndClosedOnceAnswered() {
        var machine = machine()
        let actions = machine.handle(.approvals([approval("ap1", "rm -rf build")]), now: start)
        #expect(
            actions == [
                .notify(
                    DesktopNotification(
                        notice: .approval("ap1"), summary: "Approval needed: run a command", body: "rm -rf build", urgency: .critical, category: "im"))
            ])
        _ = machine.handle(.shown(.approval("ap1"), id: 9), now: start)
        #expect(machine.handle(.approvals([approval("ap1", "rm -rf build")]), now: start + .seconds(1)) == [], "still waiting: nothing again")
        #expect(machine.handle(.approvals([]), now: start + .seconds(2)) == [.close(9)], "answered elsewhere")
        #expect(machine.handle(.approvals([]), now: start + .seconds(3)) == [])
    }

    @Test func anApprovalAnsweredBeforeItsNotificationWasShownIsClosedWhenItIs() {
        var machine = machine()
        _ = machine.handle(.approvals([approval("ap1", "ls")]), now: start)
        #expect(machine.handle(.approvals([]), now: start) == [])
        #expect(machine.handle(.shown(.approval("ap1"), id: 4), now: start) == [.close(4)])
    }

    @Test func anApprovalThatArrivedWhileSomeoneLookedIsNotShownLater() {
        var machine = machine(attached: [frontEnd("a", .focused)])
        #expect(machine.handle(.approvals([approval("ap1", "ls")]), now: start) == [])
        _ = machine.handle(.frontEnds([frontEnd("a", .away)]), now: start + .seconds(1))
        #expect(machine.handle(.approvals([approval("ap1", "ls")]), now: start + .seconds(2)) == [])
        #expect(machine.handle(.approvals([approval("ap1", "ls"), approval("ap2", "make")]), now: start + .seconds(3)).count == 1)
    }

    @Test func anApprovalNeverShowsASecret() {
        var machine = machine()
        let actions = machine.handle(
            .approvals([approval("ap1", "curl -H 'Authorization: Bearer sk-live-123' https://bot:hunter2@example.org/x?q=1 --token abc API_KEY=xyz")]),
            now: start)
        guard case .notify(let shown)? = actions.first else {
            Issue.record("no notification: \(actions)")
            return
        }
        for secret in ["sk-live-123", "hunter2", "abc", "xyz"] { #expect(!shown.body.contains(secret), "\(shown.body)") }
        #expect(shown.body.hasPrefix("curl -H 'Authorization: Bearer <redacted>"), "\(shown.body)")
        #expect(shown.body.count <= NotificationText.bodyLimit)
    }
}

@Suite struct NotificationTextTests {
    @Test func aLongLineIsCutWithAnEllipsis() {
        let line = NotificationText.firstLine(of: String(repeating: "word ", count: 60))
        #expect(line.count == NotificationText.bodyLimit)
        #expect(line.hasSuffix("word…"))
    }

    @Test func controlCharactersAndSecretsAreLeftOut() {
        #expect(NotificationText.firstLine(of: "\u{1B}[31mred\u{07}") == "[31mred")
        #expect(NotificationText.hidingSecrets("export GITHUB_TOKEN=ghp_1 PATH=/bin") == "export GITHUB_TOKEN=<redacted> PATH=/bin")
        #expect(NotificationText.hidingSecrets("login --password s3cret --user me") == "login --password <redacted> --user me")
        #expect(NotificationText.hidingSecrets("git clone https://me:pw@host/repo.git") == "git clone https://me:<redacted>@host/repo.git")
        // Markdown code and quotes keep their marks around the hidden value.
        #expect(NotificationText.hidingSecrets("Running `make deploy TOKEN=s3cret` needs") == "Running `make deploy TOKEN=<redacted>` needs")
        #expect(NotificationText.hidingSecrets("run 'API_KEY=abc'") == "run 'API_KEY=<redacted>'")
        #expect(NotificationText.hidingSecrets("`PASSWORD=x`") == "`PASSWORD=<redacted>`")
    }

    @Test func markupIsEscapedForServicesThatReadIt() {
        #expect(NotificationText.escapingMarkup("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y")
    }
}
