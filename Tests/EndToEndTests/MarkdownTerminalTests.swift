import Foundation
import Testing
import TetherTesting

/// Bot replies rendered from their Markdown in the terminal UI, in a real terminal (tmux),
/// against the whole set: the development gateway's `markdown: sample` and `markdown: long`.
@Suite(.serialized) struct MarkdownTerminalTests {
    private func startUI(_ set: ComposedSet, columns: Int, rows: Int) throws -> Tmux {
        try Tmux([Programs.path("tether"), "--run-dir", set.run.path], columns: columns, rows: rows, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
    }

    /// The sample as it shows 100 columns wide: a table, a code block, lists, a quote, a link.
    static let sampleRows = [
        "Opta:",
        "Markdown sample",
        "",
        "Some bold, italic, code and struck words.",
        "",
        "┌──────┬──────┬────────┐",
        "│ Tool │ Runs │ Status │",
        "├──────┼──────┼────────┤",
        "│ read │    3 │   ok   │",
        "│ exec │   12 │  漢字  │",
        "└──────┴──────┴────────┘",
        "",
        "┌─ swift " + String(repeating: "─", count: 90) + "┐",
        "│ let greeting = \"hello\" // a comment" + String(repeating: " ", count: 62) + "│",
        "│ print(greeting, 42)" + String(repeating: " ", count: 78) + "│",
        "└" + String(repeating: "─", count: 98) + "┘",
        "",
        "• first point",
        "• second point",
        "  1. nested one",
        "",
        "│ A quote of note.",
        "",
        "See the docs (https://example.com/docs).",
    ]

    /// The rows of `screen` from the one that starts with `first`, as many as `count`, with
    /// the spaces tmux leaves out at their ends.
    private func rows(of screen: String, from first: String, count: Int) -> [String] {
        let lines = screen.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix(first) }) else { return [] }
        return Array(lines[start..<min(lines.count, start + count)])
    }

    private func trimmed(_ rows: [String]) -> [String] {
        rows.map { row in String(row.reversed().drop { $0 == " " }.reversed()) }
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"), arguments: ["seed", "openclaw"])
    func theMarkdownSampleIsRenderedWhileItStreamsAndWhenWhole(dialect: String) async throws {
        let environment = ["TETHER_CHUNK_DELAY": "150"]
        let set = try await dialect == "seed" ? ComposedSet(environment: environment) : ComposedSet.openClaw(environment: environment)
        defer { set.stop() }
        let ui = try startUI(set, columns: 100, rows: 40)
        _ = try await ui.waitFor("Enter send")
        try ui.type("markdown: sample")
        try ui.press("Enter")

        // While it streams: the code block, its fence not closed yet, is framed so far.
        let streaming = try await ui.waitFor("│ let greeting", "▍", timeout: .seconds(30))
        print("terminal UI (\(dialect)) while the sample streams:\n\(streaming)")
        #expect(streaming.contains("┌─ swift ───"), "no frame while streaming:\n\(streaming)")
        #expect(streaming.contains("│ Tool │ Runs │ Status │"), "the table is not rendered while streaming:\n\(streaming)")
        if !streaming.contains("first point") {
            #expect(streaming.contains("└" + String(repeating: "─", count: 98) + "┘"), "the open code block is not closed below:\n\(streaming)")
        }

        // Whole: every row as expected.
        _ = try await ui.waitFor("See the docs (https://example.com/docs).", timeout: .seconds(30))
        let whole = try await ui.waitForAbsence(of: "▍", timeout: .seconds(5))
        print("terminal UI (\(dialect)) with the whole sample:\n\(whole)")
        #expect(whole.contains("You: markdown: sample  ✓✓ delivered"), "the user's own message is not as it was:\n\(whole)")
        // Under the message sent: the bot's name (the seed bot's, or the OpenClaw assistant's
        // "Bot"), then the reply.
        let shown = trimmed(rows(of: whole, from: "You: markdown: sample", count: Self.sampleRows.count + 1))
        #expect(shown.dropFirst().first == (dialect == "seed" ? "Opta:" : "Bot:"))
        #expect(Array(shown.dropFirst(2)) == trimmed(Array(Self.sampleRows.dropFirst())))

        // Narrower: rendered again at the new width.
        try ui.resize(columns: 60, rows: 40)
        let narrow = try await ui.waitFor("└" + String(repeating: "─", count: 58) + "┘", "┌─ swift " + String(repeating: "─", count: 50) + "┐")
        print("terminal UI (\(dialect)) at 60 columns:\n\(narrow)")
        #expect(narrow.split(separator: "\n").allSatisfy { $0.count <= 60 })
        #expect(narrow.contains("│ exec │   12 │  漢字  │"))
        try ui.press("C-c")

        // tether send prints the reply as it came: the Markdown itself.
        let sent = try set.tether(["send", "markdown: sample"])
        #expect(sent.status == 0)
        #expect(sent.standardOutput.contains("| exec | 12 | 漢字 |"), "tether send did not print the Markdown as it came:\n\(sent.standardOutput)")
    }

    /// Told that the terminal shows hyperlinks, the link is one: its address is not shown
    /// after it, and the escape sequences written past ncurses leave the screen as it was.
    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func aLinkIsAHyperlinkWhenTheTerminalIsSaidToShowThem() async throws {
        let set = try await ComposedSet(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        let ui = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 100, rows: 40, directory: set.run.path,
            environment: ["LANG": "C.UTF-8", "TETHER_HYPERLINKS": "on"])
        _ = try await ui.waitFor("Enter send")
        try ui.type("markdown: sample")
        try ui.press("Enter")
        let shown = try await ui.waitFor("See the docs.", "└──────┴──────┴────────┘")
        print("terminal UI with hyperlinks:\n\(shown)")
        #expect(!shown.contains("https://example.com/docs"), "the address is shown beside a hyperlink:\n\(shown)")
        #expect(!shown.contains("8;;"), "an escape sequence shows as text:\n\(shown)")
        #expect(shown.contains("│ exec │   12 │  漢字  │"))
        try ui.press("C-c")
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func aTenThousandLineReplyScrolls() async throws {
        let set = try await ComposedSet(environment: ["TETHER_CHUNK_DELAY": "20"])
        defer { set.stop() }
        let ui = try startUI(set, columns: 80, rows: 30)
        _ = try await ui.waitFor("Enter send")
        try ui.type("markdown: long")
        let sent = ContinuousClock.now
        try ui.press("Enter")
        _ = try await ui.waitFor("10000. line 10000 of 10000", timeout: .seconds(120))
        let bottom = try await ui.waitForAbsence(of: "▍", timeout: .seconds(30))
        print("terminal UI: the 10,000-line reply whole \(sent.duration(to: .now)) after it was sent:\n\(bottom)")
        // 30 rows: 28 of conversation, the status line, the input line.
        let conversation = bottom.split(separator: "\n", omittingEmptySubsequences: false).prefix(28).map(String.init)
        #expect(conversation == (9973...10000).map { Self.longRow($0) })

        // 100 pages up (10 lines each), then 50 down.
        let pressed = ContinuousClock.now
        try ui.press("-N", "100", "PageUp")
        let up = try await ui.waitFor("scrolled up 1000 (PgDn)")
        print("terminal UI: 100 PageUps shown \(pressed.duration(to: .now)) after they were pressed:\n\(up)")
        #expect(up.split(separator: "\n", omittingEmptySubsequences: false).prefix(28).map(String.init) == (8973...9000).map { Self.longRow($0) })
        try ui.press("-N", "50", "PageDown")
        let down = try await ui.waitFor("scrolled up 500 (PgDn)")
        #expect(down.split(separator: "\n", omittingEmptySubsequences: false).prefix(28).map(String.init) == (9473...9500).map { Self.longRow($0) })
        try ui.press("C-c")
    }

    /// Row `number` of the long reply's list: numbers right-aligned to the widest.
    private static func longRow(_ number: Int) -> String {
        let marker = "\(number)."
        return String(repeating: " ", count: 6 - marker.count) + marker + " line \(number) of 10000"
    }
}
