import CNcursesw
import Foundation
import Synchronization
public import TetherBus
import TetherSchema
import TetherService
import TetherWire

/// The full-screen terminal UI. One thread owns the terminal (ncurses is not thread-safe):
/// it reads keys, hands the actions they ask for to Swift concurrency and draws the screen
/// whenever it changed. Bus messages reach the screen's state from async tasks through a lock,
/// and wake the thread. Between keys and changes the thread sleeps: no polling timeout, no
/// periodic redraw.
public final class TerminalSession: Sendable {
    private let bus: any Bus
    private let screen: Mutex<ChatScreen>
    private let dirty = Atomic<Bool>(true)
    /// Wakes the terminal's thread: a change to draw, a resize.
    private let wake: Int32
    private let actions: AsyncStream<TerminalEvent>
    private let post: AsyncStream<TerminalEvent>.Continuation
    /// Signalled by the async side when a suspend is saved and done, so the UI thread can stop the process.
    private let suspendDone = DispatchSemaphore(value: 0)
    /// Announces the session on the bus, with the terminal's focus once it reported one.
    private let presence: PresenceAnnouncer

    /// What the terminal thread hands to the async side.
    enum TerminalEvent: Sendable {
        case action(ChatAction, display: DisplaySnapshot)
        /// The process was continued after Ctrl-Z.
        case continued
    }

    public static let frontEndName = "tether"

    /// Opens the session on `frame`, snapd's first frame.
    public init(bus: any Bus, frame: FirstFrame) {
        self.bus = bus
        let capabilities = TerminalCapabilities.detect(environment: ProcessInfo.processInfo.environment)
        screen = Mutex(ChatScreen(frontEnd: Self.frontEndName, frame: frame, canSuspend: tether_tui_can_stop() != 0, capabilities: capabilities))
        (actions, post) = AsyncStream.makeStream()
        wake = tether_tui_wake_descriptor()
        // Until the terminal reports its focus, it cannot tell: counted as looked at.
        presence = PresenceAnnouncer(bus: bus, frontEnd: Self.frontEndName)
    }

    deinit {
        if wake >= 0 { close(wake) }
    }

    /// Something changed: the terminal's thread draws it.
    private func changed() {
        dirty.store(true, ordering: .relaxed)
        if wake >= 0 { tether_tui_wake(wake) }
    }

    /// Runs the UI until the user quits; `events` is the bus subscription it draws from.
    public func run(events: BusSubscription) async {
        let terminal = Thread { [self] in self.terminalLoop() }
        terminal.name = "terminal"
        terminal.start()
        await withDiscardingTaskGroup { group in
            group.addTask { await self.presence.run() }
            group.addTask {
                for await message in events {
                    let (changed, wanted) = self.screen.withLock { ($0.apply(message, at: .now), $0.wantedSession) }
                    if changed { self.changed() }
                    // Fetched beside the bus: what comes meanwhile is held and applied after it.
                    if let wanted, message.topic == .conversationSession { Task { await self.loadTranscript(of: wanted) } }
                }
            }
            for await event in actions {
                guard await perform(event) else { break }
            }
            group.cancelAll()
        }
        presence.leave()
    }

    /// Does what the terminal asked; false once the session is over.
    private func perform(_ event: TerminalEvent) async -> Bool {
        switch event {
        case .action(.send(let text, let images, let whileBusy), _):
            do {
                let reply = try await bus.request(
                    SendMessageCommand.self, .init(id: .random(), content: text, attachments: images.isEmpty ? nil : images, whileBusy: whileBusy))
                if reply.status == .failed { report("not sent: the message was refused") }
            } catch  where error.wentUnanswered {
                report("not confirmed: " + Conversation.unansweredSend)
            } catch {
                // Refused before it was queued: its images stay attached for the next message.
                screen.withLock { $0.keep(images) }
                report("not sent: \(error)" + (images.isEmpty ? "" : "; the images stay attached"))
            }
        case .action(.attach(let path), _):
            // The file is read here, at the edge; the screen decides what to do with it.
            let read = ImageAttachments.attachment(at: (path as NSString).expandingTildeInPath)
            screen.withLock { $0.attach(read) }
            changed()
        case .action(.reconnect, _):
            await connection(.reconnect)
        case .action(.listSessions, _):
            do {
                let reply = try await bus.request(SessionsCommand.self, .init(), timeout: .seconds(16), attempts: 1)
                screen.withLock { $0.showSessions(reply) }
                changed()
            } catch {
                report("cannot list the sessions: \(error)")
            }
        case .action(.useSession(let key), _):
            do {
                let reply = try await bus.request(SessionUseCommand.self, .init(key: key), timeout: .seconds(5), attempts: 2)
                report(reply.detail)
            } catch {
                report("the session was not changed: \(error)")
            }
        case .action(.local(let command), _):
            await carryOut(command)
        case .action(.showHit(let hit), _):
            do {
                let reply = try await bus.request(
                    AroundCommand.self, .init(position: hit.position, session: hit.entry.session), timeout: .seconds(5), attempts: 2)
                let shown = screen.withLock { $0.shownSession }
                show(reply.title + " (any key closes):", SearchResults.context(reply, shown: shown))
            } catch {
                report("cannot show the message in its conversation: \(error)")
            }
        case .action(.abort, _):
            do {
                let reply = try await bus.request(AbortCommand.self, .init(), timeout: .seconds(12), attempts: 1)
                if reply.stopped.isEmpty { report("no reply was running") }
            } catch {
                report("cannot stop the reply: \(error)")
            }
        case .action(.approve(let id, let decision), _):
            do {
                let reply = try await bus.request(ApproveCommand.self, .init(id: id, decision: decision), timeout: .seconds(12), attempts: 1)
                report(ApprovalWords.ended(reply.ended).capitalizedFirst)
            } catch {
                screen.withLock { $0.approvalNotAnswered(id, because: "the approval was not answered: \(error)") }
                changed()
            }
        case .action(.suspend, let display):
            // Save the screen, close the connection gracefully, then stop: coming back shows it as it was.
            // Stopped, the session shows nothing to anyone.
            presence.setAttention(.away)
            await save(display)
            await connection(.suspend)
            suspendDone.signal()
        case .continued:
            // Its terminal's focus is not known again until the terminal reports it.
            presence.setAttention(nil)
            await connection(.resume)
        case .action(.quit, let display):
            await save(display)
            return false
        }
        return true
    }

    /// Carries out a command typed that asks the set: what it answers is shown, or why not.
    private func carryOut(_ command: LocalCommand) async {
        switch await LocalCommandRunner.run(command, bus: bus) {
        case .list(let title, let lines)?: show(title + " (any key closes):", lines)
        case .words(let words)?: report(words)
        case .found(let reply, let words)?:
            screen.withLock { $0.showSearchHits(reply.hits, for: words, more: reply.nextBefore != nil) }
            changed()
        case nil: break
        }
    }

    private func show(_ title: String, _ lines: [String]) {
        screen.withLock { $0.show(title, lines) }
        changed()
    }

    /// Fetches the transcript of the session the conversation moved to, and shows it; a
    /// snapd that does not answer leaves the screen saying it is loading, until the next change.
    private func loadTranscript(of session: String) async {
        do {
            let frame = try await Conversation(bus: bus).firstFrame(frontEnd: Self.frontEndName, session: session)
            screen.withLock { $0.showTranscript(frame, of: session) }
        } catch {
            // What comes from now on is shown; the stored transcript is not.
            screen.withLock { $0.showTranscript(FirstFrame(display: nil, identity: nil, entries: [], revision: 0), of: session) }
            report("cannot show the earlier messages of \(session): \(error)")
        }
        changed()
    }

    /// Keeps the display in snapd so the next start draws it; a snapd that does not answer
    /// within a second is not waited for longer: the user is leaving.
    private func save(_ display: DisplaySnapshot) async {
        _ = try? await bus.request(SaveDisplayCommand.self, display, timeout: .seconds(1), attempts: 1)
    }

    private func connection(_ action: ConnectionCommand.Action) async {
        do {
            _ = try await bus.request(ConnectionCommand.self, .init(action: action), timeout: .seconds(1), attempts: 2)
        } catch {
            report("\(action.rawValue) failed: \(error)")
        }
    }

    private func report(_ problem: String) {
        screen.withLock { $0.report(problem) }
        changed()
    }

    // MARK: The terminal thread

    private func terminalLoop() {
        // Keys are read without waiting; the thread waits in poll(2) on the terminal and the
        // wake-up descriptor together, so it sleeps until a key, a resize, a change or the
        // screen's next change by itself (the end of "Reconnected").
        tether_tui_start(wake >= 0 ? 0 : 250)
        if wake >= 0 { tether_tui_announce_resizes(wake) }
        var nextChange: ContinuousClock.Instant?
        var drawn = DrawnScreen()
        while true {
            var function: Int32 = 0
            let code = tether_tui_key(&function)
            guard Int(code) != TETHER_KEY_NONE else {
                // Nothing more to read (a paste is read whole before it is drawn once).
                let now = ContinuousClock.now
                let due = nextChange.map { now >= $0 } == true
                if dirty.exchange(false, ordering: .relaxed) || due {
                    if due { screen.withLock { $0.invalidate() } }
                    draw(at: now, over: &drawn)
                    nextChange = screen.withLock { $0.nextChange(after: now) }
                }
                if wake >= 0 { tether_tui_wait(wake, Self.milliseconds(until: nextChange)) }
                continue
            }
            if let attention = Self.attention(code, function: function != 0) {
                presence.setAttention(attention)
                continue
            }
            guard let key = Self.key(code, function: function != 0) else { continue }
            let (action, display) = screen.withLock { screen in
                let action = screen.handle(key, at: .now)
                return (action, action == nil ? nil : screen.displaySnapshot(width: Int(tether_tui_columns()), height: Int(tether_tui_rows())))
            }
            dirty.store(true, ordering: .relaxed)
            guard let action, let display else { continue }
            post.yield(.action(action, display: display))
            switch action {
            case .quit:
                tether_tui_stop()
                return
            case .suspend:
                _ = suspendDone.wait(timeout: .now() + 3)
                tether_tui_stop()
                tether_tui_stop_process()
                // Continued (fg): take the terminal back, draw the snapshot at once, reconnect.
                tether_tui_resume()
                drawn.forget()
                screen.withLock { $0.invalidate() }
                dirty.store(true, ordering: .relaxed)
                post.yield(.continued)
            case .send, .attach, .reconnect, .abort, .listSessions, .useSession, .showHit, .approve, .local:
                break
            }
        }
    }

    /// The time until `deadline` in whole milliseconds, rounded up; -1 for none.
    static func milliseconds(until deadline: ContinuousClock.Instant?) -> Int32 {
        guard let deadline else { return -1 }
        let (seconds, attoseconds) = (deadline - .now).components
        guard seconds >= 0 else { return 0 }
        return Int32(min(Int64(Int32.max), seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
    }

    /// Writes what changed since the last draw: the input line alone after keys that only
    /// edited it, else the rows of the frame that differ from those `drawn`.
    private func draw(at now: ContinuousClock.Instant, over drawn: inout DrawnScreen) {
        let rows = Int(tether_tui_rows())
        let columns = Int(tether_tui_columns())
        let update = screen.withLock { $0.update(width: columns, height: rows, at: now) }
        let writes: [DrawnScreen.Write]
        let cursor: (row: Int, column: Int)
        switch update {
        case .nothing:
            return
        case .inputLine(let row, let column):
            if let write = drawn.inputLine(row, width: columns, height: rows) {
                writes = [write]
                cursor = (write.index, column)
            } else {
                let frame = screen.withLock { $0.render(width: columns, height: rows, at: now) }
                writes = drawn.writes(for: frame, width: columns, height: rows)
                cursor = (frame.cursorRow, frame.cursorColumn)
            }
        case .frame(let frame):
            writes = drawn.writes(for: frame, width: columns, height: rows)
            cursor = (frame.cursorRow, frame.cursorColumn)
        }
        for write in writes {
            guard let spans = write.row.spans else {
                tether_tui_row(Int32(write.index), write.row.text, Self.style(write.row.style))
                continue
            }
            tether_tui_row_start(Int32(write.index))
            for span in spans { tether_tui_span(span.text, Self.attributes(span.style), Self.tone(span.style.tone)) }
        }
        tether_tui_cursor(Int32(cursor.row), Int32(cursor.column))
        tether_tui_show()
        // Links become hyperlinks once ncurses has drawn their text.
        for write in writes {
            guard let spans = write.row.spans, spans.contains(where: { $0.style.link != nil }) else { continue }
            var column = 0
            for span in spans {
                if let link = span.style.link { tether_tui_hyperlink(Int32(write.index), Int32(column), link, span.text) }
                column += TerminalText.columns(of: span.text)
            }
        }
    }

    private static func attributes(_ style: SpanStyle) -> Int32 {
        var attributes = 0
        if style.bold { attributes |= TETHER_ATTRIBUTE_BOLD }
        if style.italic { attributes |= TETHER_ATTRIBUTE_ITALIC }
        if style.underline { attributes |= TETHER_ATTRIBUTE_UNDERLINE }
        // ncurses has no strikethrough: struck text is dim.
        if style.struck { attributes |= TETHER_ATTRIBUTE_DIM }
        return Int32(attributes)
    }

    private static func tone(_ tone: SpanStyle.Tone) -> Int32 {
        let value =
            switch tone {
            case .plain: TETHER_TONE_PLAIN
            case .dim: TETHER_TONE_DIM
            case .code: TETHER_TONE_CODE
            case .keyword: TETHER_TONE_KEYWORD
            case .string: TETHER_TONE_STRING
            case .comment: TETHER_TONE_COMMENT
            case .number: TETHER_TONE_NUMBER
            case .link: TETHER_TONE_LINK
            }
        return Int32(value)
    }

    private static func style(_ style: ScreenRow.Style) -> Int32 {
        let value =
            switch style {
            case .plain: TETHER_STYLE_PLAIN
            case .warning: TETHER_STYLE_WARNING
            case .error: TETHER_STYLE_ERROR
            case .good: TETHER_STYLE_GOOD
            case .dim: TETHER_STYLE_DIM
            case .title: TETHER_STYLE_TITLE
            }
        return Int32(value)
    }

    /// The attention a code from the terminal reports: its focus gained or lost (focus
    /// reporting, CSI ?1004h, asked for as the terminal is taken); nil for a key.
    static func attention(_ code: Int32, function: Bool) -> FrontEndPresence.Attention? {
        guard function else { return nil }
        switch Int(code) {
        case TETHER_KEY_FOCUS_IN: return .focused
        case TETHER_KEY_FOCUS_OUT: return .away
        default: return nil
        }
    }

    /// The key a code from the terminal stands for.
    static func key(_ code: Int32, function: Bool) -> Key? {
        if function {
            switch Int(code) {
            case TETHER_KEY_RESIZE: return .resize
            case TETHER_KEY_UP: return .up
            case TETHER_KEY_DOWN: return .down
            case TETHER_KEY_LEFT: return .left
            case TETHER_KEY_RIGHT: return .right
            case TETHER_KEY_HOME: return .home
            case TETHER_KEY_END: return .end
            case TETHER_KEY_PAGE_UP: return .pageUp
            case TETHER_KEY_PAGE_DOWN: return .pageDown
            case TETHER_KEY_BACKSPACE: return .backspace
            case TETHER_KEY_DELETE: return .delete
            case TETHER_KEY_ENTER: return .enter
            default: return nil
            }
        }
        switch code {
        case 10, 13: return .enter
        case 8, 127: return .backspace
        case 27: return .escape
        case 1...26: return .control(Character(UnicodeScalar(UInt8(code) + 96)))
        default:
            guard let scalar = UnicodeScalar(UInt32(code)) else { return nil }
            return .character(Character(scalar))
        }
    }
}
