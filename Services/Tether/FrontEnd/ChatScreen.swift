public import Foundation
public import TetherBus
import TetherMarkdown
public import TetherSchema
import TetherWire

/// A key as the terminal UI reads it.
public enum Key: Sendable, Equatable {
    case character(Character)
    /// A control key: `control("c")` is Ctrl-C.
    case control(Character)
    case enter, backspace, delete, escape
    case left, right, up, down, home, end, pageUp, pageDown
    case resize
}

/// What the terminal UI must do for a key.
public enum ChatAction: Sendable, Equatable {
    /// Send the text, with the images attached to it (`/attach`).
    case send(String, images: [Attachment], whileBusy: WhileBusy? = nil)
    /// Read the image at this path and attach it to the next message (`/attach PATH`).
    case attach(String)
    case reconnect
    /// Save the display, suspend the connection, stop the process until it is continued.
    case suspend
    /// Ask the gateway to stop the reply it is writing.
    case abort
    /// List the gateway's sessions to choose from (Ctrl-P, `/sessions`).
    case listSessions
    /// Chat in this session from now on (`/session KEY`, or a choice from the list).
    case useSession(String)
    /// Show a message `/search` found in its conversation (a choice from the list of hits).
    case showHit(SearchCommand.Hit)
    /// Answer an approval the gateway waits for (a key of the approval prompt).
    case approve(id: String, decision: ApprovalDecision)
    /// A command of ``SlashCommands`` that needs the bus: a list, the agent, the model, the thinking level.
    case local(LocalCommand)
    case quit
}

/// One row of the screen as drawn.
public struct ScreenRow: Sendable, Equatable {
    public enum Style: Sendable, Equatable {
        case plain, warning, error, good, dim, title
    }

    public var text: String
    public var style: Style
    /// The row's text in runs of their own style (a rendered reply), drawn instead of `text`
    /// in `style`; nil for a row of one style.
    public var spans: [StyledSpan]?

    public init(_ text: String, _ style: Style = .plain) {
        self.text = text
        self.style = style
    }

    /// A row of styled runs; its text is theirs.
    public init(spans: [StyledSpan]) {
        text = spans.map(\.text).joined()
        style = .plain
        self.spans = spans
    }
}

/// A whole screen: its rows, top to bottom, and where the cursor goes.
public struct ScreenFrame: Sendable, Equatable {
    public var rows: [ScreenRow]
    public var cursorRow: Int
    public var cursorColumn: Int
}

/// What a front end writes to the terminal for what changed since it last drew the screen.
public enum ScreenUpdate: Sendable, Equatable {
    /// Nothing changed.
    case nothing
    /// Only the input line changed (a key that edited it): the screen's last row, and the cursor's column in it.
    case inputLine(ScreenRow, cursorColumn: Int)
    /// The whole screen, to compare with what the terminal shows.
    case frame(ScreenFrame)
}

/// The terminal UI's state as a value: the conversation (with replies growing in place),
/// the bot's activity, the banner, the composer and the scroll position. Bus messages and
/// keys go in; actions and frames come out. Nothing here touches the terminal.
public struct ChatScreen: Sendable {
    public let frontEnd: String
    public private(set) var transcript: TranscriptModel
    public private(set) var banner = Banner()
    public private(set) var composer: Composer
    /// Lines scrolled up from the newest; 0 follows the conversation.
    public private(set) var scrollOffset: Int
    /// Replies still streaming, in the order they started.
    private var streaming: [StreamProgress] = []
    private var bot: BotActivity?
    private var pendingCount = 0
    private var connection: ConnectionStatus?
    private var session: ConversationSession?
    /// The session whose transcript is shown (nil: every entry, as the seed dialect has one).
    public private(set) var shownSession: String?
    /// Conversation changes that came while the transcript of a new session is fetched,
    /// applied once it is shown (those it already holds are dropped by revision).
    private var heldWhileLoading: [BusMessage] = []
    /// The most changes held while a transcript is fetched.
    static let heldLimit = 5000
    /// The gateway's sessions to choose from with a digit, while the list is shown.
    private var sessionChoices: [SessionsCommand.Reply.Session]?
    /// What `/search` found, newest first: a digit shows one in its conversation.
    private var searchHits: (words: String, hits: [SearchCommand.Hit], more: Bool)?
    /// Lines shown above the conversation until the next key: `/help`, `/status`, `/models`, `/agents`.
    private var panel: (title: String, lines: [String])?
    /// The session's settings and usage, as protod retains them.
    public private(set) var settings: SessionSettings?
    /// The lines a front end handles itself.
    public static let commands = SlashCommands.standard
    /// The set's storage problems: a full disk, damaged files set aside.
    private var storage = StorageNotices()
    /// The programs the supervisor holds back, each with what to fix: shown until fixed.
    private var misconfigured: [MisconfiguredPrograms.Program] = []
    /// The approvals the gateway waits for, shown over the input line.
    public private(set) var approvals = ApprovalPrompt()
    /// The last problem with something the user did, in words, until the next key.
    private var notice: String?
    /// The screen as saved when the front end last left, drawn until the transcript is known.
    private let savedScreen: [String]
    /// Whether Ctrl-Z may stop the process: only a shell with job control can continue it.
    public let canSuspend: Bool
    /// What changed since the screen was last drawn (``update(width:height:at:)``).
    private var owed = Owed.everything
    /// The images `/attach` added, sent with the next message; shown above the input line.
    public private(set) var images: [Attachment] = []
    /// Whether tool calls show their output under their line (Ctrl-O, as OpenClaw's terminal UI).
    public private(set) var showsToolOutput = false
    /// Whether the model's thinking shows above its reply or tool call (Ctrl-T, as OpenClaw's
    /// terminal UI); hidden at first.
    public private(set) var showsThinking = false
    /// The most lines of a tool's output shown under it.
    static let toolOutputLines = 40
    /// What the terminal shows beyond text: whether a reply's links are hyperlinks.
    public let capabilities: TerminalCapabilities
    /// Bot replies rendered from their Markdown, kept per entry and width.
    private let renderedReplies = RenderedReplies()
    /// Under an ended tool call the gateway sent no output for.
    static let noOutputWords = "    │ (no output: the gateway sends it only when the session's verbose level is full)"

    /// What the screen owes the terminal, least to most.
    private enum Owed: Int, Comparable {
        case nothing, inputLine, everything

        static func < (left: Owed, right: Owed) -> Bool { left.rawValue < right.rawValue }
    }

    /// Starts from snapd's first frame: the transcript, and the display as the user left it.
    /// Without `canSuspend`, Ctrl-Z says why it does nothing instead of suspending. Bot
    /// replies are rendered from their Markdown for a terminal with `capabilities`.
    public init(frontEnd: String, frame: FirstFrame, canSuspend: Bool = true, capabilities: TerminalCapabilities = TerminalCapabilities(hyperlinks: false)) {
        self.frontEnd = frontEnd
        self.canSuspend = canSuspend
        self.capabilities = capabilities
        transcript = TranscriptModel(snapshot: frame.entries, revision: frame.revision)
        session = frame.session
        shownSession = frame.session?.sessionKey
        composer = Composer(draft: frame.display?.draft ?? "", history: frame.display?.history ?? [])
        scrollOffset = frame.display?.scrollOffset ?? 0
        savedScreen = frame.display?.screen ?? []
        streaming = frame.streaming
    }

    // MARK: Input

    /// Applies a bus message; true when the screen changed. `date` is the wall clock at `now`
    /// (an approval's deadline is a date).
    @discardableResult
    public mutating func apply(_ message: BusMessage, at now: ContinuousClock.Instant, date: Date = Date()) -> Bool {
        if needsTranscript, [.conversationMessage, .conversationDelivery, .conversationStream].contains(message.topic) {
            // Bounded: beyond it the oldest go; the transcript fetched holds what snapd stored of them.
            if heldWhileLoading.count >= Self.heldLimit { heldWhileLoading.removeFirst() }
            heldWhileLoading.append(message)
            return false
        }
        switch message.topic {
        case .conversationMessage:
            guard let entry = try? message.decode(TranscriptEntry.self), isShown(entry.session), transcript.apply(entry) != nil else { return false }
            if entry.sender != .user { streaming.removeAll { $0.id == entry.id } }
        case .conversationDelivery:
            guard let update = try? message.decode(DeliveryUpdate.self) else { return false }
            let changed = transcript.apply(update) != nil
            // Said at once: a message sent to steer or interrupt waits for a reply of its own here.
            if let words = update.detail, words.hasPrefix(WhileBusy.unavailableWordsPrefix), !message.header.replay, transcript.contains(update.id) {
                notice = words
                return true
            }
            guard changed else { return false }
        case .conversationStream:
            guard let progress = try? message.decode(StreamProgress.self), isShown(progress.session) else { return false }
            if let index = streaming.firstIndex(where: { $0.id == progress.id }) {
                guard let followed = progress.following(streaming[index]) else { return false }
                streaming[index] = followed
            } else if !transcript.contains(progress.id) {
                // A reply already in the transcript is whole: a late chunk does not reopen it.
                // Joined after its start, a reply shows from its next whole text.
                guard let followed = progress.following(nil) else { return false }
                streaming.append(followed)
            }
        case .connectionState:
            guard let status = try? message.decode(ConnectionStatus.self) else { return false }
            connection = status
            banner.update(status, at: now)
        case .botState:
            guard let activity = try? message.decode(BotActivity.self) else { return false }
            bot = activity
        case .outboxSummary:
            guard let summary = try? message.decode(OutboxSummary.self) else { return false }
            pendingCount = summary.pending
        case .conversationSession:
            guard let current = try? message.decode(ConversationSession.self) else { return false }
            session = current
        case .storage:
            guard let report = try? message.decode(StorageReport.self) else { return false }
            _ = storage.apply(report)
        case .misconfigured:
            guard let held = try? message.decode(MisconfiguredPrograms.self) else { return false }
            misconfigured = held.programs
        case .approvals:
            guard let update = try? message.decode(ApprovalsUpdate.self) else { return false }
            if let ended = approvals.apply(update, replay: message.header.replay, at: now, date: date) { notice = ended }
        case .sessionSettings:
            guard let current = try? message.decode(SessionSettings.self) else { return false }
            settings = current
        default:
            return false
        }
        owe(.everything)
        return true
    }

    /// Whether an entry or reply of `session` is shown: the transcript's, or of the session
    /// where messages sent before a switch are still answered (marked with its key).
    private func isShown(_ session: String?) -> Bool {
        session == nil || shownSession == nil || session == shownSession || session == self.session?.finishing
    }

    /// Whether the conversation moved to another session whose transcript is not shown yet:
    /// the owner fetches it and hands it to ``showTranscript(_:)``.
    public var needsTranscript: Bool {
        guard let key = session?.sessionKey else { return false }
        return key != shownSession
    }

    /// The session whose transcript to fetch, while ``needsTranscript``.
    public var wantedSession: String? { needsTranscript ? session?.sessionKey : nil }

    /// Shows the transcript of the session chosen (snapd's, for `session`), then the changes
    /// held while it was fetched.
    public mutating func showTranscript(_ frame: FirstFrame, of session: String) {
        guard session == wantedSession else { return }
        transcript = TranscriptModel(snapshot: frame.entries, revision: frame.revision)
        streaming = frame.streaming
        shownSession = session
        scrollOffset = 0
        owe(.everything)
        let held = heldWhileLoading
        heldWhileLoading = []
        for message in held { apply(message, at: .now) }
    }

    /// Shows the gateway's sessions; a digit chooses one.
    public mutating func showSessions(_ reply: SessionsCommand.Reply) {
        guard !reply.sessions.isEmpty else {
            report("the gateway lists no sessions: /session KEY chats in one by its key")
            return
        }
        sessionChoices = Array(reply.sessions.prefix(9))
        owe(.everything)
    }

    /// Shows what `/search` found for `words` (the newest nine); a digit shows one in its
    /// conversation. `more` says more messages hold the words than are listed.
    public mutating func showSearchHits(_ hits: [SearchCommand.Hit], for words: String, more: Bool) {
        guard !hits.isEmpty else {
            report("no stored message holds \(words)")
            return
        }
        searchHits = (words, Array(hits.prefix(9)), more || hits.count > 9)
        owe(.everything)
    }

    /// Applies a key; returns what the UI must do, if anything.
    public mutating func handle(_ key: Key, at now: ContinuousClock.Instant) -> ChatAction? {
        // The notice and the lists go with the key: then more than the input line changes.
        if notice != nil || sessionChoices != nil || searchHits != nil || panel != nil { owe(.everything) }
        notice = nil
        panel = nil
        if let choices = sessionChoices {
            sessionChoices = nil
            if case .character(let digit) = key, let number = digit.wholeNumberValue, (1...choices.count).contains(number) {
                return .useSession(choices[number - 1].key)
            }
            if key == .escape { return nil }
        }
        if let found = searchHits {
            searchHits = nil
            if case .character(let digit) = key, let number = digit.wholeNumberValue, (1...found.hits.count).contains(number) {
                return .showHit(found.hits[number - 1])
            }
            if key == .escape { return nil }
        }
        switch approvals.handle(key) {
        case .notTaken: break
        case .taken:
            owe(.everything)
            return nil
        case .refused(let problem):
            report(problem)
            return nil
        case .answer(let id, let decision):
            owe(.everything)
            return .approve(id: id, decision: decision)
        }
        switch key {
        case .character(let character):
            // "Connection lost — press r to reconnect": r reconnects when nothing is being typed.
            if character == "r", composer.isEmpty, banner.isFailed { return .reconnect }
            composer.insert(character)
            owe(.inputLine)
        case .enter:
            guard let line = composer.submit() else { return nil }
            scrollOffset = 0
            owe(.everything)
            if let handled = attachmentCommand(in: line) { return handled }
            return command(for: line)
        case .backspace, .delete, .left, .right, .home, .control("a"), .end, .control("e"), .up, .down:
            edit(key)
            owe(.inputLine)
        case .pageUp:
            scrollOffset += 10
            owe(.everything)
        case .pageDown:
            scrollOffset = max(0, scrollOffset - 10)
            owe(.everything)
        case .escape:
            banner.dismiss(at: now)
            storage.hide()
            owe(.everything)
        case .control("r"): return .reconnect
        case .control("x"): return .abort
        case .control("p"): return .listSessions
        case .control("g"):
            if !approvals.open() { report("no approval is waiting") }
            owe(.everything)
        case .control("o"):
            showsToolOutput.toggle()
            owe(.everything)
        case .control("t"):
            showsThinking.toggle()
            owe(.everything)
        case .control("z"):
            guard canSuspend else {
                report("Ctrl-Z does nothing here: tether was not started from a shell, so nothing could bring it back (Ctrl-C quits)")
                return nil
            }
            return .suspend
        case .control("c"): return .quit
        case .control("d") where composer.isEmpty: return .quit
        case .resize: owe(.everything)
        case .control: break
        }
        return nil
    }

    /// Moves the cursor in the input line or edits it, for a key that does nothing else.
    private mutating func edit(_ key: Key) {
        switch key {
        case .backspace: composer.deleteBackward()
        case .delete: composer.deleteForward()
        case .left: composer.moveLeft()
        case .right: composer.moveRight()
        case .home, .control("a"): composer.moveToStart()
        case .end, .control("e"): composer.moveToEnd()
        case .up: composer.recallOlder()
        case .down: composer.recallNewer()
        default: break
        }
    }

    /// `/help`'s lines: the table's, with what only the terminal UI reads (images, approvals)
    /// before the line about everything else.
    static var help: [String] {
        let table = commands.help
        return table.dropLast() + [
            "/attach [PATH]  an image (PNG, JPEG, GIF or WebP) for the next message (without PATH, what is attached)",
            "/detach  the next message goes without the images attached",
            "Ctrl-G  the approval the gateway waits for, after Esc put it aside",
            "Keys  Enter send · ↑ ↓ history · PgUp PgDn scroll · Ctrl-X stop the reply · Ctrl-P sessions · Ctrl-O tool output · Ctrl-T thinking · Ctrl-R reconnect · Ctrl-Z suspend · Ctrl-C quit",
        ] + table.suffix(1)
    }

    /// What a line typed asks for: a command of ``commands`` (`/help` and `/status` shown at
    /// once, a misused one said in words), or a message, sent as typed.
    mutating func command(for line: String) -> ChatAction? {
        switch Self.commands.read(line) {
        case .message(let text):
            defer { images = [] }
            return .send(text, images: images)
        case .misused(let words):
            report(words)
            return nil
        case .local(.help):
            show("Tether handles these itself (any key closes):", Self.help)
            return nil
        case .local(.status):
            show("The session (any key closes)", statusLines)
            return nil
        case .local(.listSessions): return .listSessions
        case .local(.useSession(let key)): return .useSession(key)
        case .local(.restartSession(let text)):
            report("\(text) sent: the gateway starts the session anew, its history empty, and answers in the conversation")
            return .send(text, images: [])
        case .local(.sendWhileBusy(let choice, let text)):
            defer { images = [] }
            return .send(text, images: images, whileBusy: choice)
        case .local(let command): return .local(command)
        }
    }

    /// The answer to approval `id` did not reach the gateway: it can be answered again.
    public mutating func approvalNotAnswered(_ id: String, because problem: String) {
        approvals.answerFailed(id)
        report(problem)
    }

    /// `/attach PATH` (read at the edge: ``attach(_:)`` takes what was read), `/attach` (lists
    /// what is attached) and `/detach` (removes it all); nil for anything else. A command done
    /// here returns an action of none, ``ChatAction/attach(_:)`` otherwise.
    private mutating func attachmentCommand(in line: String) -> ChatAction?? {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed == "/attach" {
            report(
                images.isEmpty
                    ? "nothing attached: /attach PATH adds an image (PNG, JPEG, GIF or WebP) to the next message"
                    : "attached to the next message: \(images.map(\.note.words).joined(separator: "; ")); /detach removes them")
            return .some(nil)
        }
        if trimmed == "/detach" {
            report(
                images.isEmpty
                    ? "nothing was attached" : "removed \(images.count == 1 ? "the image" : "the \(images.count) images"): the next message goes without")
            images = []
            return .some(nil)
        }
        guard trimmed.hasPrefix("/attach ") else { return nil }
        return .some(.attach(String(trimmed.dropFirst("/attach ".count)).trimmingCharacters(in: .whitespaces)))
    }

    /// Attaches an image read for `/attach`, or says why it cannot be, in words: a file that
    /// is not an image, too large, unreadable, or more than one message carries with the others.
    public mutating func attach(_ read: Result<Attachment, AttachmentRefusal>) {
        switch read {
        case .failure(let refusal): report("not attached: \(refusal)")
        case .success(let image):
            if let refusal = ImageAttachments.refusal(for: images + [image], text: "") {
                report("not attached: \(refusal)")
                return
            }
            images.append(image)
            report("attached \(image.note.words): it goes with the next message")
        }
    }

    /// Puts back images whose message was not sent, for the next one.
    public mutating func keep(_ unsent: [Attachment]) {
        images = unsent + images
        owe(.everything)
    }

    /// What `/status` shows: the session, its settings and usage, or why there are none.
    var statusLines: [String] {
        var lines: [String] = []
        if let key = session?.sessionKey { lines.append("session \(key)") }
        guard let settings else { return lines + ["no settings known yet: tether-protod has not said them"] }
        if let unavailable = settings.unavailable { return lines + ["settings: \(unavailable)"] }
        if let model = settings.modelName { lines.append("model \(model)") }
        lines.append("thinking \(settings.thinkingLevel ?? "the model's default")")
        if let context = settings.contextWords {
            lines.append("context \(context)")
        } else if let window = settings.contextTokens {
            lines.append("context window \(window.grouped) tokens; the gateway has counted none yet")
        }
        if let input = settings.inputTokens, let output = settings.outputTokens {
            lines.append("tokens \(input.grouped) in, \(output.grouped) out")
        }
        if let cost = settings.estimatedCostUsd { lines.append("estimated cost \(SessionSettings.dollars(cost))") }
        return lines
    }

    /// Shows lines above the conversation until the next key.
    public mutating func show(_ title: String, _ lines: [String]) {
        panel = (title, lines)
        owe(.everything)
    }

    /// Says something went wrong with what the user asked, until the next key.
    public mutating func report(_ problem: String) {
        notice = problem
        owe(.everything)
    }

    /// The terminal no longer shows what was drawn (the process was stopped and continued),
    /// or the screen changed by itself (``nextChange(after:)``): the next update is whole.
    public mutating func invalidate() {
        owe(.everything)
    }

    private mutating func owe(_ part: Owed) {
        owed = max(owed, part)
    }

    // MARK: Output

    /// When the screen changes by itself, with no message or key: a front end that drew it at
    /// `now` draws it again then, and need not wake before. Nil: not until something happens.
    public func nextChange(after now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        [banner.nextChange(after: now), approvals.nextChange(after: now)].compactMap { $0 }.min()
    }

    /// What to write for what changed since the last update, on a terminal of `width`
    /// columns and `height` rows; the screen counts as drawn after it. A key that only edited
    /// the input line costs that line, whatever the conversation holds.
    public mutating func update(width: Int, height: Int, at now: ContinuousClock.Instant) -> ScreenUpdate {
        defer { owed = .nothing }
        switch owed {
        case .nothing: return .nothing
        case .inputLine:
            let (row, column) = inputLine(width: max(10, width))
            return .inputLine(row, cursorColumn: column)
        case .everything: return .frame(render(width: width, height: height, at: now))
        }
    }

    /// The screen for a terminal of `width` columns and `height` rows.
    public func render(width: Int, height: Int, at now: ContinuousClock.Instant) -> ScreenFrame {
        let width = max(10, width)
        let height = max(4, height)
        var rows: [ScreenRow] = []
        if let shown = banner.shown(at: now) {
            let style: ScreenRow.Style =
                switch shown.tone {
                case .waiting: .warning
                case .problem: .error
                case .good: .good
                }
            rows.append(ScreenRow(" " + TerminalText.fit(shown.words + (shown.tone == .good ? "" : "   (Esc hides)"), width: width - 1), style))
        }
        // Wrapped, not cut: the end of the words is the fix.
        for program in misconfigured {
            for line in TerminalText.wrap(program.words, width: width - 1).prefix(6) where rows.count < height - 3 {
                rows.append(ScreenRow(" " + line, .error))
            }
        }
        for problem in storage.current where rows.count < height - 3 {
            rows.append(ScreenRow(" " + TerminalText.fit("Storage: " + problem + "   (Esc hides)", width: width - 1), .error))
        }
        let composerRows = images.isEmpty ? 1 : 2
        let statusRows = 1
        var area = height - rows.count - composerRows - statusRows
        if let choices = sessionChoices {
            let current = session?.sessionKey
            var list = [ScreenRow(" Sessions: press 1–\(choices.count) to chat in one, Esc to close", .title)]
            for (number, choice) in choices.enumerated() {
                let name = choice.displayName.map { " (\($0))" } ?? ""
                list.append(ScreenRow(TerminalText.fit(" \(number + 1)  \(choice.key)\(name)\(choice.key == current ? "  ← current" : "")", width: width)))
            }
            rows.append(contentsOf: list.prefix(max(0, area - 1)))
            area -= min(list.count, max(0, area - 1))
        }
        if let found = searchHits {
            // What matters first comes first: a narrow terminal cuts the end.
            let more = found.more ? " (the newest \(found.hits.count): tether search lists more)" : ""
            let title = "Found, newest first: 1–\(found.hits.count) shows one in its conversation, Esc closes\(more)"
            var list = [ScreenRow(" " + TerminalText.fit(title, width: width - 1), .title)]
            for (number, hit) in found.hits.enumerated() {
                list.append(ScreenRow(TerminalText.fit(" \(number + 1)  " + SearchResults.line(hit, shown: shownSession, highlight: false), width: width)))
            }
            rows.append(contentsOf: list.prefix(max(0, area - 1)))
            area -= min(list.count, max(0, area - 1))
        }
        if let panel {
            let list =
                [ScreenRow(" " + TerminalText.fit(panel.title, width: width - 1), .title)]
                + panel.lines.map { ScreenRow(" " + TerminalText.fit($0, width: width - 1)) }
            rows.append(contentsOf: list.prefix(max(0, area - 1)))
            area -= min(list.count, max(0, area - 1))
        }
        // The approval prompt leaves the conversation at least a row.
        let prompt = approvals.rows(width: width, limit: max(0, area - 1), at: now)
        area -= prompt.count
        let (visible, offset) = visibleConversation(width: width, rows: area)
        rows.append(contentsOf: Array(repeating: ScreenRow(""), count: area - visible.count))
        rows.append(contentsOf: visible)
        rows.append(contentsOf: prompt)
        rows.append(ScreenRow(TerminalText.fit(statusLine(scrolled: offset), width: width), .dim))
        if !images.isEmpty {
            let words = "Attached: \(images.map(\.note.words).joined(separator: "; ")) (/detach removes)"
            rows.append(ScreenRow(TerminalText.fit(words, width: width), .title))
        }
        let (input, cursorColumn) = inputLine(width: width)
        rows.append(input)
        return ScreenFrame(rows: rows, cursorRow: rows.count - 1, cursorColumn: cursorColumn)
    }

    /// The input line, the prompt and as much of the composer as shows the cursor, and the
    /// cursor's column: it costs the width, not the text's length.
    private func inputLine(width: Int) -> (ScreenRow, Int) {
        let prompt = "> "
        let (shown, cursorColumn) = TerminalText.window(
            composer.text, widths: composer.widths, cursor: composer.cursor, cursorColumns: composer.cursorColumns, width: width - prompt.count)
        return (ScreenRow(prompt + shown), prompt.count + cursorColumn)
    }

    /// The conversation rows that fit in `rows` at the scroll position, and the offset used.
    private func visibleConversation(width: Int, rows: Int) -> ([ScreenRow], Int) {
        let lines = conversationLines(width: width, last: rows + scrollOffset)
        let offset = min(scrollOffset, max(0, lines.count - rows))
        let end = lines.count - offset
        return (Array(lines[max(0, end - rows)..<end]), offset)
    }

    /// The last `count` lines of the conversation wrapped to `width` (all of them when it
    /// has fewer): messages with their delivery marks, then replies still streaming, growing
    /// in place. Wrapped from the newest back to the first line needed, so that a frame costs
    /// what it shows, not the length of the transcript.
    func conversationLines(width: Int, last count: Int) -> [ScreenRow] {
        if transcript.entries.isEmpty && streaming.isEmpty {
            let lines = savedScreen.isEmpty ? [ScreenRow("No messages yet. Type one and press Enter.", .dim)] : savedScreen.map { ScreenRow($0) }
            return Array(lines.suffix(count))
        }
        // Each entry's lines, newest entry first.
        var blocks: [[ScreenRow]] = []
        var gathered = 0
        let name = bot?.botName ?? "Bot"
        for progress in streaming.reversed() {
            guard gathered < count else { break }
            let from = progress.session.flatMap { $0 == shownSession || shownSession == nil ? nil : "[\($0)] " } ?? ""
            let reply = RenderedReplies.Reply(label: "\(from)\(name): ", content: progress.text, ending: nil, streaming: true, width: width)
            blocks.append(renderedReplies.rows(of: progress.id, reply, capabilities: capabilities))
            gathered += blocks[blocks.count - 1].count
        }
        for entry in transcript.entries.reversed() {
            guard gathered < count else { break }
            let style: ScreenRow.Style =
                switch entry.status {
                case .failed, .expired, .cancelled, .incomplete, .lost: .error
                default: .plain
                }
            var block: [ScreenRow] = []
            if showsThinking, let thinking = entry.thinking {
                block += TerminalText.wrap("[thinking] " + thinking, width: width).map { ScreenRow($0, .dim) }
            }
            if let tool = entry.tool {
                block += toolLines(of: entry, tool, width: width)
            } else if case .bot(let botName) = entry.sender {
                let from = entry.session.flatMap { $0 == shownSession || shownSession == nil ? nil : "[\($0)] " } ?? ""
                let ending = entry.status == .incomplete ? "✗ incomplete" + (entry.detail.map { ": \($0)" } ?? "") : nil
                let reply = RenderedReplies.Reply(
                    label: "\(from)\(botName.isEmpty ? "Bot" : botName): ", content: entry.content, ending: ending, streaming: false, width: width)
                block += renderedReplies.rows(of: entry.id, reply, capabilities: capabilities)
            } else {
                block += TerminalText.wrap(Self.text(of: entry, shown: shownSession), width: width).map { ScreenRow($0, style) }
            }
            blocks.append(block)
            gathered += block.count
        }
        return Array(blocks.reversed().joined().suffix(count))
    }

    /// A tool call's line (`⚙ read README.md · ok · 0.3 s`), and under it, while Ctrl-O shows
    /// them, the first ``toolOutputLines`` lines of its output.
    private func toolLines(of entry: TranscriptEntry, _ tool: ToolCall, width: Int) -> [ScreenRow] {
        let from = entry.session.flatMap { $0 == shownSession || shownSession == nil ? nil : "[\($0)] " } ?? ""
        let style: ScreenRow.Style =
            switch tool.state {
            case .error, .unfinished: .error
            case .running: .dim
            case .ok: .plain
            }
        var rows = TerminalText.wrap(from + TranscriptFormatter.line(for: tool), width: width).map { ScreenRow($0, style) }
        guard showsToolOutput else { return rows }
        guard let output = tool.output, !output.isEmpty else {
            // Only an ended call's missing output has that reason; a running one has none yet.
            if tool.state != .running { rows.append(ScreenRow(tool.output == nil ? Self.noOutputWords : "    │ (no output)", .dim)) }
            return rows
        }
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        for line in lines.prefix(Self.toolOutputLines) {
            rows += TerminalText.wrap("    │ " + line, width: width).map { ScreenRow($0, .dim) }
        }
        if lines.count > Self.toolOutputLines { rows.append(ScreenRow("    │ … \(lines.count - Self.toolOutputLines) more lines", .dim)) }
        return rows
    }

    /// `You: hello  ✓✓ delivered`, `Opta: You said: hello`, `openclaw-tui: hi` (another client's);
    /// an entry of another session than `shown` starts with its key: `[agent:main:main] Opta: …`.
    static func text(of entry: TranscriptEntry, shown: String? = nil) -> String {
        if let session = entry.session, let shown, session != shown { return "[\(session)] " + text(of: entry) }
        switch entry.sender {
        case .user:
            let content = entry.contentWithAttachments
            if let author = entry.author { return "\(author): \(content)" }
            return "You: \(content)  \(entry.deliveryMark)"
        case .bot(let name):
            return "\(name.isEmpty ? "Bot" : name): \(entry.content)"
                + (entry.status == .incomplete ? "  ✗ incomplete" + (entry.detail.map { ": \($0)" } ?? "") : "")
        }
    }

    private func statusLine(scrolled offset: Int) -> String {
        if let notice { return notice }
        var parts: [String] = []
        // First: a decision waits, and the line is cut on the right on a narrow terminal.
        if !approvals.pending.isEmpty && !approvals.isOpen {
            parts.append("\(approvals.pending.count) approval\(approvals.pending.count == 1 ? "" : "s") waiting (Ctrl-G)")
        }
        if let bot, bot.state != .idle { parts.append("\(bot.botName) is \(bot.state.rawValue)…" + (bot.detail.map { " (\($0))" } ?? "")) }
        if let connection { parts.append(connection.phase == .connected ? "Connected" : connection.phase.words) }
        if let key = session?.sessionKey {
            parts.append("session \(key)" + (needsTranscript ? " (loading)" : ""))
            if let finishing = session?.finishing, let waiting = session?.finishingMessages {
                parts.append("\(waiting) still finishing in \(finishing)")
            }
        }
        if let settings, settings.unavailable == nil {
            var words: [String] = []
            if let model = settings.modelName { words.append(model) }
            if let level = settings.thinkingLevel { words.append("think \(level)") }
            if let context = settings.contextWords { words.append(context) }
            if !words.isEmpty { parts.append(words.joined(separator: " ")) }
        }
        if pendingCount > 0 { parts.append("\(pendingCount) waiting to send") }
        if offset > 0 { parts.append("scrolled up \(offset) (PgDn)") }
        let stop = bot.map { $0.state != .idle } == true && session?.dialect == .openclaw ? " · Ctrl-X stop reply" : ""
        let sessions =
            session?.dialect == .openclaw
            ? " · Ctrl-P sessions · Ctrl-O \(showsToolOutput ? "hide" : "show") output · Ctrl-T \(showsThinking ? "hide" : "show") thinking" : ""
        parts.append("Enter send · ↑ history · PgUp scroll\(stop)\(sessions) · Ctrl-R reconnect\(canSuspend ? " · Ctrl-Z suspend" : "") · Ctrl-C quit · /help")
        return parts.joined(separator: " · ")
    }

    /// What to save so the next start draws this screen again.
    public func displaySnapshot(width: Int, height: Int) -> DisplaySnapshot {
        let (conversation, _) = visibleConversation(width: max(10, width), rows: max(1, height - 2))
        return DisplaySnapshot(
            frontEnd: frontEnd, screen: conversation.map(\.text), scrollOffset: scrollOffset, draft: composer.draft, history: composer.history)
    }
}
