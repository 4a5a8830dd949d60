import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherWire

@testable import FrontEnd

@Suite struct BannerTests {
    private func status(_ phase: ConnectionPhase, epoch: Int = 1) -> ConnectionStatus {
        ConnectionStatus(phase: phase, url: "ws://gateway/ws", epoch: epoch)
    }

    @Test func theConnectionsWordsThenReconnectedBrieflyThenNothing() {
        var banner = Banner()
        let start = ContinuousClock.now
        #expect(banner.shown(at: start)?.words == "Connecting…")
        banner.update(status(.connected), at: start)
        #expect(banner.shown(at: start) == nil, "the first connection needs no banner")
        banner.update(status(.reconnecting), at: start)
        #expect(banner.shown(at: start) == .init(words: "Reconnecting…", tone: .waiting))
        banner.update(status(.connected, epoch: 2), at: start + .seconds(1))
        #expect(banner.shown(at: start + .seconds(2)) == .init(words: "Reconnected", tone: .good))
        #expect(banner.shown(at: start + .seconds(3) + .milliseconds(10)) == nil, "Reconnected stays 2 s")
        banner.update(ConnectionStatus(phase: .failed, url: "ws://gateway/ws", epoch: 2, failure: .retriesExhausted), at: start + .seconds(4))
        #expect(banner.shown(at: start + .seconds(4))?.words.hasPrefix("Connection lost — press r to reconnect") == true)
        #expect(banner.shown(at: start + .seconds(4))?.tone == .problem)
        banner.update(status(.waitingForNetwork, epoch: 2), at: start + .seconds(5))
        #expect(banner.shown(at: start + .seconds(5))?.words == "No network — waiting for connection.")
    }

    @Test func dismissedUntilTheWordsChange() {
        var banner = Banner()
        let now = ContinuousClock.now
        banner.update(status(.suspended), at: now)
        #expect(banner.shown(at: now)?.words == "Disconnected (app suspended)")
        banner.dismiss(at: now)
        #expect(banner.shown(at: now) == nil)
        banner.update(status(.reconnecting), at: now)
        #expect(banner.shown(at: now)?.words == "Reconnecting…")
    }
}

@Suite struct ComposerTests {
    @Test func editingAndHistory() {
        var composer = Composer(draft: "helo")
        composer.moveLeft()
        composer.insert("l")
        #expect(composer.draft == "hello")
        #expect(composer.submit() == "hello")
        #expect(composer.isEmpty)
        for character in "second" { composer.insert(character) }
        #expect(composer.submit() == "second")
        composer.insert("x")
        composer.recallOlder()
        #expect(composer.draft == "second")
        composer.recallOlder()
        #expect(composer.draft == "hello")
        composer.recallNewer()
        composer.recallNewer()
        #expect(composer.draft == "x", "the line being typed comes back after the newest")
        composer.deleteBackward()
        #expect(composer.submit() == nil, "a blank line is not sent")
        #expect(composer.history == ["hello", "second"])
    }
}

@Suite struct TerminalTextTests {
    @Test func wideCharactersTakeTwoColumns() {
        #expect(TerminalText.columns(of: "abc") == 3)
        #expect(TerminalText.columns(of: "你好") == 4)
        #expect(TerminalText.columns(of: "e\u{301}") == 1, "a combining accent takes no column")
        #expect(TerminalText.fit("你好世界", width: 5) == "你好")
    }

    @Test func wrapsAtSpacesWithinTheWidth() {
        let lines = TerminalText.wrap("Opta: the quick brown fox jumps over the lazy dog", width: 16)
        #expect(lines == ["Opta: the quick", "brown fox jumps", "over the lazy", "dog"])
        #expect(lines.allSatisfy { TerminalText.columns(of: $0) <= 16 })
        let wide = TerminalText.wrap("你好你好你好", width: 5)
        #expect(wide == ["你好", "你好", "你好"])
    }

    /// "Reconnected" is the only thing on the screen that changes with time alone: the
    /// screen says when, and nothing after it goes.
    @Test func reconnectedSaysWhenItGoesAndNothingElseIsDue() {
        let start = ContinuousClock.now
        var banner = Banner()
        #expect(banner.nextChange(after: start) == nil)
        banner.update(ConnectionStatus(phase: .connected, url: "ws://gateway", epoch: 1), at: start)
        banner.update(ConnectionStatus(phase: .reconnecting, url: "ws://gateway", epoch: 1), at: start)
        #expect(banner.nextChange(after: start) == nil, "reconnecting shows until the next status")
        banner.update(ConnectionStatus(phase: .connected, url: "ws://gateway", epoch: 2), at: start)
        #expect(banner.shown(at: start)?.words == "Reconnected")
        #expect(banner.nextChange(after: start) == start + Banner.reconnectedFor)
        let gone = start + Banner.reconnectedFor
        #expect(banner.shown(at: gone) == nil)
        #expect(banner.nextChange(after: gone) == nil)
    }

    @Test func theComposerWindowKeepsTheCursorVisible() {
        let text = Array("abcdefghij")
        let (shown, column) = TerminalText.window(text, widths: text.map(TerminalText.columns(of:)), cursor: 10, cursorColumns: 10, width: 5)
        #expect(shown == "ghij")
        #expect(column == 4)
    }

    /// The widths measured as characters are typed, and the columns kept before the cursor,
    /// stay those of the text, whatever the edits: inserts and deletes on either side,
    /// cursor moves, history, wide characters, emoji (a sequence too), combining marks.
    @Test func theComposersWidthsFollowEveryEdit() {
        let alphabet: [Character] = ["a", " ", "你", "😀", "👍🏽", "e\u{301}", "\u{7}"]
        var generator = SystemRandomNumberGenerator()
        var composer = Composer(draft: "你好 draft", history: ["older 😀", "old"])
        #expect(composer.cursorColumns == TerminalText.columns(of: composer.text))
        for _ in 0..<3000 {
            switch Int.random(in: 0..<12, using: &generator) {
            case 0...3: composer.insert(alphabet.randomElement(using: &generator)!)
            case 4: composer.deleteBackward()
            case 5: composer.deleteForward()
            case 6: composer.moveLeft()
            case 7: composer.moveRight()
            case 8: Bool.random(using: &generator) ? composer.moveToStart() : composer.moveToEnd()
            case 9: Bool.random(using: &generator) ? composer.recallOlder() : composer.recallNewer()
            default: if Int.random(in: 0..<20, using: &generator) == 0 { _ = composer.submit() }
            }
            #expect(composer.widths == composer.text.map(TerminalText.columns(of:)))
            #expect(composer.cursorColumns == TerminalText.columns(of: composer.text[..<composer.cursor]), "\(composer.text) cursor \(composer.cursor)")
        }
    }

    /// The window starts at the line's start while the cursor fits there, else at the first
    /// character from the last multiple of half the width that leaves the cursor within the
    /// width, whatever the characters (wide, combining, control).
    @Test func theComposerWindowMovesByHalfTheWidth() {
        let alphabet: [Character] = ["a", "b", " ", "你", "好", "😀", "e\u{301}", "\u{7}", "é"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let text = (0..<Int.random(in: 0...60, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            let cursor = Int.random(in: 0...text.count, using: &generator)
            let width = Int.random(in: 1...12, using: &generator)
            let before = TerminalText.columns(of: text[..<cursor])
            let step = max(1, width / 2)
            let first = before < width ? 0 : stride(from: 0, through: before, by: step).first { before - $0 < width }!
            var start = 0
            while start < cursor && TerminalText.columns(of: text[..<start]) < first { start += 1 }
            let (shown, column) = TerminalText.window(text, widths: text.map(TerminalText.columns(of:)), cursor: cursor, cursorColumns: before, width: width)
            #expect(column == TerminalText.columns(of: text[start..<cursor]), "\(text) cursor \(cursor) width \(width)")
            #expect(column < width || cursor == start)
            #expect(shown.hasPrefix(String(text[start..<cursor])), "\(text) cursor \(cursor) width \(width)")
            #expect(TerminalText.columns(of: shown) <= width)
        }
    }
}

@Suite struct ChatScreenTests {
    private func message(_ topic: Topic, _ body: some Encodable) throws -> BusMessage {
        BusMessage(topic: topic, header: BusHeader(source: "test", sequence: 1), body: try BusSchema.makeEncoder().encode(body))
    }

    private let start = ContinuousClock.now

    @Test func firstFrameIsTheSnapshotAndARepliesGrowsInPlace() throws {
        let stored = TranscriptEntry(
            id: MessageID("a"), sender: .user, content: "hello", timestamp: Date(), status: .delivered, revision: 1)
        var screen = ChatScreen(
            frontEnd: "tether",
            frame: FirstFrame(display: DisplaySnapshot(frontEnd: "tether", draft: "unsent", history: ["hello"]), identity: nil, entries: [stored], revision: 1))
        var frame = screen.render(width: 40, height: 8, at: start)
        #expect(frame.rows.count == 8)
        #expect(frame.rows.contains(ScreenRow("You: hello  ✓✓ delivered")))
        #expect(frame.rows.last?.text == "> unsent")
        #expect(frame.cursorColumn == 8)

        screen.apply(
            try message(.conversationStream, StreamProgress(id: MessageID("r"), chunkIndex: 0, chunk: "You ", content: "You ", isFinal: false)), at: start)
        frame = screen.render(width: 40, height: 8, at: start)
        // A reply is Markdown: the space at the end of its paragraph is not shown.
        #expect(frame.rows.map(\.text).contains("Bot: You▍"))
        screen.apply(
            try message(.conversationStream, StreamProgress(id: MessageID("r"), chunkIndex: 1, chunk: "said", content: "You said", isFinal: false)), at: start)
        screen.apply(
            try message(
                .conversationMessage,
                TranscriptEntry(id: MessageID("r"), sender: .bot(name: "Opta"), content: "You said", timestamp: Date(), status: .received, revision: 2)),
            at: start)
        frame = screen.render(width: 40, height: 8, at: start)
        #expect(frame.rows.map(\.text).contains("Opta: You said"))
        #expect(!frame.rows.contains { $0.text.contains("▍") }, "the finished reply replaced the growing one")
    }

    @Test func aSteerTheGatewayCannotTakeIsSaidAtOnceAndSlashSteerSendsIt() throws {
        let sent = TranscriptEntry(id: MessageID("a"), sender: .user, content: "also this", timestamp: Date(), status: .queued, revision: 1)
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [sent], revision: 1))
        for character in "/steer also this" { _ = screen.handle(.character(character), at: start) }
        #expect(screen.handle(.enter, at: start) == .send("also this", images: [], whileBusy: .steer))
        let words = "this gateway cannot steer a reply in progress (it takes no queue modes): it waits"
        // The same status, with the words: shown in the status line though the mark stays.
        screen.apply(try message(.conversationDelivery, DeliveryUpdate(id: MessageID("a"), status: .queued, detail: words, revision: 2)), at: start)
        let rows = screen.render(width: 200, height: 6, at: start).rows.map(\.text)
        #expect(rows.contains { $0.hasPrefix(words) }, "\(rows)")
        #expect(rows.contains("You: also this  … queued"), "\(rows)")
    }

    @Test func aProgramHeldBackAsMisconfiguredIsNamedWithItsFixUntilFixedAndEscDoesNotHideIt() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        let problem =
            "token file /home/ada/.config/tether/openclaw.token has permissions 644: it must not be readable by others; run chmod 600 /home/ada/.config/tether/openclaw.token"
        screen.apply(try message(.misconfigured, MisconfiguredPrograms(programs: [.init(name: "connd", problem: problem)])), at: start)
        _ = screen.handle(.escape, at: start)
        let rows = screen.render(width: 60, height: 12, at: start).rows
        let shown = rows.filter { $0.style == .error }.map(\.text).joined(separator: " ").split(separator: " ").joined(separator: " ")
        #expect(shown.contains("connd cannot run as configured: token file"), "\(rows.map(\.text))")
        #expect(shown.hasSuffix("run chmod 600 /home/ada/.config/tether/openclaw.token"), "wrapped, so the fix is not cut: \(rows.map(\.text))")
        screen.apply(try message(.misconfigured, MisconfiguredPrograms(programs: [])), at: start)
        #expect(!screen.render(width: 60, height: 12, at: start).rows.contains { $0.text.contains("cannot run as configured") })
    }

    @Test func plainLinesSayAProgramHeldBackOnceAndWhenItIsNoLonger() throws {
        var announcer = PlainAnnouncer(model: TranscriptModel(snapshot: [], revision: 0))
        let held = MisconfiguredPrograms(programs: [.init(name: "connd", problem: "variable TETHER_OPENCLAW_URL is not set")])
        #expect(announcer.lines(for: try message(.misconfigured, held)) == ["connd cannot run as configured: variable TETHER_OPENCLAW_URL is not set."])
        #expect(announcer.lines(for: try message(.misconfigured, held)).isEmpty)
        #expect(announcer.lines(for: try message(.misconfigured, MisconfiguredPrograms(programs: []))) == ["connd is no longer held back."])
    }

    @Test func keysBecomeActionsAndTheBannerSitsOnTop() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        for character in "hi" { _ = screen.handle(.character(character), at: start) }
        #expect(screen.handle(.enter, at: start) == .send("hi", images: []))
        screen.apply(try message(.connectionState, ConnectionStatus(phase: .failed, url: "ws://g/ws", epoch: 1, failure: .unreachable)), at: start)
        let frame = screen.render(width: 60, height: 6, at: start)
        #expect(frame.rows.first?.style == .error)
        #expect(frame.rows.first?.text.contains("Connection lost — press r to reconnect") == true)
        #expect(screen.handle(.character("r"), at: start) == .reconnect, "r reconnects when nothing is typed")
        #expect(screen.handle(.control("z"), at: start) == .suspend)
        #expect(screen.handle(.escape, at: start) == nil)
        #expect(screen.render(width: 60, height: 6, at: start).rows.first?.style != .error, "Esc hides the banner")
        #expect(screen.handle(.control("c"), at: start) == .quit)
    }

    @Test func ctrlZWithoutAShellSaysWhyAndSuspendsNothing() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0), canSuspend: false)
        #expect(!screen.render(width: 200, height: 6, at: start).rows[4].text.contains("Ctrl-Z"), "not offered")
        #expect(screen.handle(.control("z"), at: start) == nil)
        #expect(screen.render(width: 200, height: 6, at: start).rows[4].text.contains("Ctrl-Z does nothing here: tether was not started from a shell"))
        _ = screen.handle(.character("a"), at: start)
        #expect(!screen.render(width: 200, height: 6, at: start).rows[4].text.contains("does nothing"), "the words go with the next key")
    }

    @Test func theSessionIsInTheStatusLineAndCtrlXStopsAReply() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        screen.apply(try message(.connectionState, ConnectionStatus(phase: .connected, url: "ws://g", epoch: 1)), at: start)
        screen.apply(try message(.conversationSession, ConversationSession(dialect: .openclaw, sessionKey: "agent:main:work")), at: start)
        var status = screen.render(width: 200, height: 6, at: start).rows[4].text
        #expect(status.contains("Connected · session agent:main:work"), "\(status)")
        #expect(!status.contains("Ctrl-X"), "offered only while a reply is being written")
        screen.apply(try message(.botState, BotStateUpdate(state: .typing, botName: "Bot")), at: start)
        status = screen.render(width: 200, height: 6, at: start).rows[4].text
        #expect(status.contains("Ctrl-X stop reply"), "\(status)")
        #expect(screen.handle(.control("x"), at: start) == .abort)
    }

    @Test func slashSessionAndCtrlPChooseASessionAndOtherSlashesAreMessages() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        #expect(screen.command(for: "/session side") == .useSession("side"))
        #expect(screen.command(for: "  /session   agent:main:side ") == .useSession("agent:main:side"))
        #expect(screen.command(for: "/sessions") == .listSessions)
        #expect(screen.command(for: "/session") == .listSessions)
        #expect(screen.command(for: "/session two words") == nil, "said in words, nothing sent")
        #expect(screen.command(for: "/compact") == .send("/compact", images: []), "the gateway's own commands go to it as messages")
        #expect(screen.command(for: "/new") == .send("/new", images: []), "sent as a message, the gateway answers")
        #expect(screen.command(for: "/model large") == .local(.setModel("large")))
        for character in "/session side" { _ = screen.handle(.character(character), at: start) }
        #expect(screen.handle(.enter, at: start) == .useSession("side"))
        #expect(screen.handle(.control("p"), at: start) == .listSessions)
        screen.apply(try message(.conversationSession, ConversationSession(dialect: .openclaw, sessionKey: "agent:main:main")), at: start)
        screen.showSessions(
            SessionsCommand.Reply(sessions: [.init(key: "agent:main:main"), .init(key: "agent:main:side", displayName: "Side")], current: "agent:main:main"))
        let rows = screen.render(width: 80, height: 10, at: start).rows.map(\.text)
        #expect(rows.contains { $0.contains("1  agent:main:main  ← current") })
        #expect(rows.contains { $0.contains("2  agent:main:side (Side)") })
        #expect(screen.handle(.character("2"), at: start) == .useSession("agent:main:side"))
        #expect(!screen.render(width: 80, height: 10, at: start).rows.contains { $0.text.contains("agent:main:side (Side)") }, "the list closes")
        screen.showSessions(SessionsCommand.Reply(sessions: [.init(key: "agent:main:main")], current: nil))
        #expect(screen.handle(.character("7"), at: start) == nil, "no seventh session: the list closes, the key is typed")
    }

    @Test func slashSearchListsTheHitsAndADigitShowsOneInItsConversation() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        #expect(screen.command(for: "/search deploy") == .local(.search("deploy")))
        let hits = (1...12).map { index in
            SearchCommand.Hit(
                position: 100 - index,
                entry: TranscriptEntry(
                    id: MessageID("m\(index)"), sender: .user, content: "deploy \(index)", timestamp: Date(timeIntervalSince1970: 1_800_000_000),
                    status: .delivered), excerpt: "\u{2}deploy\u{3} \(index)")
        }
        screen.showSearchHits(hits, for: "deploy", more: false)
        let rows = screen.render(width: 120, height: 16, at: start).rows.map(\.text)
        #expect(rows.contains { $0.contains("Found, newest first: 1–9 shows one in its conversation, Esc closes (the newest 9: tether search lists more)") })
        #expect(rows.contains { $0.hasPrefix(" 1  ") && $0.hasSuffix("You: deploy 1") }, "\(rows)")
        #expect(rows.contains { $0.hasPrefix(" 9  ") && $0.hasSuffix("You: deploy 9") } && !rows.contains { $0.contains("deploy 10") })
        #expect(screen.handle(.character("3"), at: start) == .showHit(hits[2]))
        #expect(!screen.render(width: 100, height: 16, at: start).rows.contains { $0.text.contains("Found, newest first") }, "the list closes")
        screen.showSearchHits(Array(hits.prefix(2)), for: "deploy", more: false)
        #expect(screen.handle(.escape, at: start) == nil)
        #expect(!screen.render(width: 100, height: 16, at: start).rows.contains { $0.text.contains("Found") })
        screen.showSearchHits([], for: "kubernetes", more: false)
        #expect(screen.render(width: 100, height: 16, at: start).rows.contains { $0.text.contains("no stored message holds kubernetes") })
    }

    @Test func anotherSessionsTranscriptReplacesTheOneShownAndWhatCameMeanwhileIsKept() throws {
        let mainEntry = TranscriptEntry(
            id: MessageID("a"), sender: .user, content: "in main", timestamp: Date(), status: .delivered, session: "agent:main:main", revision: 1)
        var screen = ChatScreen(
            frontEnd: "tether",
            frame: FirstFrame(
                display: nil, identity: nil, entries: [mainEntry], revision: 1, session: ConversationSession(dialect: .openclaw, sessionKey: "agent:main:main"))
        )
        #expect(!screen.needsTranscript)
        screen.apply(try message(.conversationSession, ConversationSession(dialect: .openclaw, sessionKey: "agent:main:main")), at: start)
        #expect(!screen.needsTranscript, "the same session needs no other transcript")
        screen.apply(
            try message(
                .conversationSession,
                ConversationSession(dialect: .openclaw, sessionKey: "agent:main:side", finishing: "agent:main:main", finishingMessages: 1)),
            at: start)
        #expect(screen.wantedSession == "agent:main:side")
        #expect(
            screen.render(width: 200, height: 8, at: start).rows[6].text.contains("session agent:main:side (loading) · 1 still finishing in agent:main:main"))
        // While it is fetched: a reply in the session before, and a message in the new one.
        let late = TranscriptEntry(
            id: MessageID("a:reply"), sender: .bot(name: "Opta"), content: "late main reply", timestamp: Date(), status: .received,
            session: "agent:main:main", revision: 3)
        let fresh = TranscriptEntry(
            id: MessageID("b"), sender: .user, content: "in side", timestamp: Date(), status: .queued, session: "agent:main:side", revision: 4)
        screen.apply(try message(.conversationMessage, late), at: start)
        screen.apply(try message(.conversationMessage, fresh), at: start)
        let stored = TranscriptEntry(
            id: MessageID("s"), sender: .bot(name: "Opta"), content: "earlier in side", timestamp: Date(), status: .received,
            session: "agent:main:side", revision: 2)
        screen.showTranscript(FirstFrame(display: nil, identity: nil, entries: [stored], revision: 2), of: "agent:main:side")
        #expect(!screen.needsTranscript)
        // The reply to the message sent before the switch is shown too, marked with its session.
        #expect(screen.transcript.entries.map(\.content) == ["earlier in side", "late main reply", "in side"])
        let rows = screen.render(width: 200, height: 8, at: start).rows.map(\.text)
        #expect(rows.contains("[agent:main:main] Opta: late main reply"), "\(rows)")
        let elsewhere = TranscriptEntry(
            id: MessageID("x"), sender: .user, content: "in a third", timestamp: Date(), status: .delivered, author: "Phone (cli)",
            session: "agent:main:third", revision: 5)
        screen.apply(try message(.conversationMessage, elsewhere), at: start)
        #expect(screen.transcript.entries.count == 3, "an entry of a session neither shown nor finishing was shown")
        screen.showTranscript(FirstFrame(display: nil, identity: nil, entries: [], revision: 9), of: "agent:main:other")
        #expect(screen.transcript.entries.count == 3, "a transcript nobody waits for was shown")
    }

    @Test func waitingForApprovalSaysWhatToRun() throws {
        let status = ConnectionStatus(
            phase: .failed, url: "ws://g", epoch: 0, lastError: "approve it on the gateway with `openclaw devices approve r-1`", failure: .pairingRequired)
        #expect(status.words == "Waiting for approval: approve it on the gateway with `openclaw devices approve r-1`")
    }
}
