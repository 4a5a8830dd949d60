import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherWire

@testable import FrontEnd

/// What the terminal UI writes for a change: the input line alone for a key that edited it,
/// the rows that differ for anything else, and never a frame whose cost grows with the transcript.
@Suite struct ScreenUpdateTests {
    private let start = ContinuousClock.now

    private func entries(_ count: Int) -> [TranscriptEntry] {
        (0..<count).map { index in
            TranscriptEntry(
                id: MessageID("e\(index)"), sender: index % 2 == 0 ? .user : .bot(name: "Opta"),
                content: "entry \(index) " + String(repeating: "word ", count: index % 7),
                timestamp: Date(), status: index % 2 == 0 ? .delivered : .received, revision: index + 1)
        }
    }

    private func screen(entries count: Int) -> ChatScreen {
        ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: entries(count), revision: count))
    }

    private func message(_ topic: Topic, _ body: some Encodable) throws -> BusMessage {
        BusMessage(topic: topic, header: BusHeader(source: "test", sequence: 1), body: try BusSchema.makeEncoder().encode(body))
    }

    @Test func aKeyThatEditsTheInputLineOwesThatLineAlone() throws {
        var screen = screen(entries: 20)
        guard case .frame(let first) = screen.update(width: 40, height: 10, at: start) else {
            Issue.record("the first update is a whole frame")
            return
        }
        #expect(screen.update(width: 40, height: 10, at: start) == .nothing, "drawn: nothing is owed")
        for character in "hello" { #expect(screen.handle(.character(character), at: start) == nil) }
        #expect(screen.update(width: 40, height: 10, at: start) == .inputLine(ScreenRow("> hello"), cursorColumn: 7))
        _ = screen.handle(.left, at: start)
        _ = screen.handle(.backspace, at: start)
        #expect(screen.update(width: 40, height: 10, at: start) == .inputLine(ScreenRow("> helo"), cursorColumn: 5))
        #expect(screen.render(width: 40, height: 10, at: start).rows.dropLast() == first.rows.dropLast(), "nothing else changed")
    }

    /// Typing past the width moves the input line's window once every half width: each key
    /// in between changes the line by the character it adds, so the terminal is written that
    /// character, not the line again. A resize shows the cursor within the new width.
    @Test func typingAtTheEndAddsOneCharacterToTheLine() throws {
        var screen = screen(entries: 3)
        _ = screen.update(width: 22, height: 10, at: start)
        var previous = "> "
        var moves = 0
        for (index, character) in "abcdefghij你klmnop😀qrstuvwxyzabcdefghijklmnopqrstuvwxyz".enumerated() {
            _ = screen.handle(.character(character), at: start)
            guard case .inputLine(let row, let column) = screen.update(width: 22, height: 10, at: start) else {
                Issue.record("key \(index): not the input line alone")
                return
            }
            #expect(column == 2 + TerminalText.columns(of: row.text.dropFirst(2)), "the cursor follows the last character")
            #expect(column < 22)
            if row.text == previous + String(character) {
                previous = row.text
                continue
            }
            moves += 1
            #expect(row.text.hasSuffix(String(character)) && TerminalText.columns(of: row.text) >= 22 / 2, "moved by half the width: \(row.text)")
            previous = row.text
        }
        #expect(moves == 4, "\(moves) moves for 56 columns typed into 20")
        _ = screen.handle(.resize, at: start)
        guard case .frame(let narrower) = screen.update(width: 14, height: 10, at: start) else {
            Issue.record("a resize draws the whole frame")
            return
        }
        let input = narrower.rows[narrower.rows.count - 1]
        #expect(input.text.hasSuffix("xyz") && TerminalText.columns(of: input.text) <= 14 && narrower.cursorColumn < 14, "resized: \(input.text)")
    }

    @Test func anythingElseOwesTheWholeFrame() throws {
        var screen = screen(entries: 3)
        _ = screen.update(width: 40, height: 10, at: start)
        screen.apply(try message(.connectionState, ConnectionStatus(phase: .connected, url: "ws://g", epoch: 1)), at: start)
        _ = screen.handle(.character("x"), at: start)
        #expect(screen.update(width: 40, height: 10, at: start) == .frame(screen.render(width: 40, height: 10, at: start)), "a message and a key: whole")
        _ = screen.handle(.pageUp, at: start)
        #expect(screen.update(width: 40, height: 10, at: start) == .frame(screen.render(width: 40, height: 10, at: start)))
        screen.report("not sent")
        _ = screen.update(width: 40, height: 10, at: start)
        _ = screen.handle(.character("y"), at: start)
        guard case .frame(let frame) = screen.update(width: 40, height: 10, at: start) else {
            Issue.record("the key took the notice away: the status line changed too")
            return
        }
        #expect(!frame.rows.contains { $0.text.contains("not sent") })
        screen.invalidate()
        #expect(screen.update(width: 40, height: 10, at: start) == .frame(frame), "stopped and continued: whole again")
        _ = screen.handle(.resize, at: start)
        #expect(screen.update(width: 40, height: 10, at: start) == .frame(frame))
    }

    @Test func aFrameWrapsOnlyWhatItShowsAndScrollsAsBefore() throws {
        let all = entries(10_000)
        let screen = screen(entries: 10_000)
        // Every entry wrapped, as the whole conversation: the newest 8 lines are what the frame shows.
        // A bot's reply is Markdown: the spaces at the end of its paragraph are not shown.
        let wrapped = all.flatMap { entry in
            let text = ChatScreen.text(of: entry)
            return TerminalText.wrap(entry.sender == .user ? text : String(text.reversed().drop { $0 == " " }.reversed()), width: 40)
        }
        #expect(screen.conversationLines(width: 40, last: 8).map(\.text) == Array(wrapped.suffix(8)))
        #expect(screen.conversationLines(width: 40, last: 25).map(\.text) == Array(wrapped.suffix(25)))
        #expect(screen.conversationLines(width: 40, last: 1_000_000).count == wrapped.count, "all of it when fewer")
        var scrolled = screen
        // Connected: no banner above the conversation.
        scrolled.apply(try message(.connectionState, ConnectionStatus(phase: .connected, url: "ws://g", epoch: 1)), at: start)
        _ = scrolled.handle(.pageUp, at: start)
        let rows = scrolled.render(width: 40, height: 10, at: start).rows.map(\.text)
        #expect(Array(rows[0..<8]) == Array(wrapped[(wrapped.count - 18)..<(wrapped.count - 10)]), "ten lines up")
        #expect(rows[8].contains("scrolled up 10"))
    }

    @Test func aGrowingReplyRewritesItsOwnLines() throws {
        var screen = screen(entries: 30)
        var drawn = DrawnScreen()
        guard case .frame(let first) = screen.update(width: 40, height: 12, at: start) else { return }
        #expect(drawn.writes(for: first, width: 40, height: 12).count == 12, "the first frame writes every row")
        screen.apply(
            try message(.conversationStream, StreamProgress(id: MessageID("r"), chunkIndex: 0, chunk: "You ", content: "You ", isFinal: false)), at: start)
        guard case .frame(let growing) = screen.update(width: 40, height: 12, at: start) else { return }
        // The conversation scrolls up a line for the reply: every conversation row moves.
        _ = drawn.writes(for: growing, width: 40, height: 12)
        screen.apply(
            try message(.conversationStream, StreamProgress(id: MessageID("r"), chunkIndex: 1, chunk: "said", content: "You said", isFinal: false)), at: start)
        guard case .frame(let grown) = screen.update(width: 40, height: 12, at: start) else { return }
        let writes = drawn.writes(for: grown, width: 40, height: 12)
        #expect(writes == [DrawnScreen.Write(index: 9, row: ScreenRow(spans: [StyledSpan("Bot: You said"), StyledSpan("▍")]))], "the reply's line only")
        #expect(drawn.writes(for: grown, width: 40, height: 12).isEmpty, "nothing changed: nothing written")
        #expect(drawn.writes(for: grown, width: 41, height: 12).count == 12, "another size: every row again")
    }

    @Test func theInputLineIsWrittenWhereTheLastFrameEnded() {
        var drawn = DrawnScreen()
        #expect(drawn.inputLine(ScreenRow("> a"), width: 40, height: 5) == nil, "nothing drawn yet: the whole frame first")
        let frame = ScreenFrame(rows: (0..<5).map { ScreenRow("row \($0)") }, cursorRow: 4, cursorColumn: 2)
        _ = drawn.writes(for: frame, width: 40, height: 5)
        #expect(drawn.inputLine(ScreenRow("> a"), width: 40, height: 5) == DrawnScreen.Write(index: 4, row: ScreenRow("> a")))
        #expect(drawn.inputLine(ScreenRow("> ab"), width: 30, height: 5) == nil, "resized: the whole frame first")
        #expect(drawn.writes(for: frame, width: 40, height: 5) == [DrawnScreen.Write(index: 4, row: ScreenRow("row 4"))], "it knows the input line it wrote")
        drawn.forget()
        #expect(drawn.writes(for: frame, width: 40, height: 5).count == 5)
    }
}
