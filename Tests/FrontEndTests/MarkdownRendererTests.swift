import Testing
import TetherMarkdown

@testable import FrontEnd

@Suite struct MarkdownRendererTests {
    private let plain = TerminalCapabilities(hyperlinks: false)

    private func lines(_ markdown: String, width: Int, hyperlinks: Bool = false) -> [String] {
        MarkdownTerminalRenderer.rows(of: MarkdownParser.parse(markdown), width: width, capabilities: TerminalCapabilities(hyperlinks: hyperlinks)).map(\.text)
    }

    private func rows(_ markdown: String, width: Int, hyperlinks: Bool = false) -> [ScreenRow] {
        MarkdownTerminalRenderer.rows(of: MarkdownParser.parse(markdown), width: width, capabilities: TerminalCapabilities(hyperlinks: hyperlinks))
    }

    @Test func aTableHasBordersAndAlignedColumns() {
        let table = "| Name | Qty | Note |\n|:-----|----:|:----:|\n| apple | 3 | ok |\n| kiwi | 12 | ripe |\n"
        #expect(
            lines(table, width: 40) == [
                "┌───────┬─────┬──────┐",
                "│ Name  │ Qty │ Note │",
                "├───────┼─────┼──────┤",
                "│ apple │   3 │  ok  │",
                "│ kiwi  │  12 │ ripe │",
                "└───────┴─────┴──────┘",
            ])
        // The header is bold, the borders dim.
        let header = rows(table, width: 40)[1].spans ?? []
        #expect(header.contains { $0.text == "Name" && $0.style.bold })
        #expect(header.first?.style.tone == .dim)
    }

    @Test func aWideCellWrapsWithinItsColumn() {
        let table = "| key | value |\n|---|---|\n| a | one two three four five six |\n"
        #expect(
            lines(table, width: 22) == [
                "┌─────┬──────────────┐",
                "│ key │ value        │",
                "├─────┼──────────────┤",
                "│ a   │ one two      │",
                "│     │ three four   │",
                "│     │ five six     │",
                "└─────┴──────────────┘",
            ])
    }

    @Test func wideCharactersInATableStayAligned() {
        let table = "| 名前 | x |\n|---|---|\n| 漢字です | 👍 |\n| ab | c |\n"
        let shown = lines(table, width: 40)
        #expect(
            shown == [
                "┌──────────┬────┐",
                "│ 名前     │ x  │",
                "├──────────┼────┤",
                "│ 漢字です │ 👍 │",
                "│ ab       │ c  │",
                "└──────────┴────┘",
            ])
        #expect(Set(shown.map { TerminalText.columns(of: $0) }) == [17])
    }

    @Test func aCodeBlockIsFramedWithItsLanguageAndColours() {
        let code = "```swift\nlet answer = 42 // the answer\nprint(\"hi\")\n```\n"
        #expect(
            lines(code, width: 34) == [
                "┌─ swift " + String(repeating: "─", count: 24) + "┐",
                "│ let answer = 42 // the answer  │",
                "│ print(\"hi\")                    │",
                "└" + String(repeating: "─", count: 32) + "┘",
            ])
        let spans = rows(code, width: 34)[1].spans ?? []
        #expect(spans.contains { $0.text == "let" && $0.style.tone == .keyword })
        #expect(spans.contains { $0.text == "42" && $0.style.tone == .number })
        #expect(spans.contains { $0.text == "// the answer" && $0.style.tone == .comment })
        #expect(rows(code, width: 34)[2].spans?.contains { $0.text == "\"hi\"" && $0.style.tone == .string } == true)
    }

    @Test func codeLongerThanTheFrameContinuesOnTheNextLine() {
        #expect(lines("```\nabcdefghij\n```", width: 10) == ["┌────────┐", "│ abcdef │", "│ ghij   │", "└────────┘"])
    }

    @Test func listsHaveBulletsNumbersAndAHangingIndent() {
        let list = "- first item wraps here\n- second\n  - nested\n\n9. nine\n10. ten\n"
        #expect(
            lines(list, width: 16) == [
                "• first item",
                "  wraps here",
                "• second",
                "  ◦ nested",
                "",
                " 9. nine",
                "10. ten",
            ])
    }

    @Test func aQuoteHasABar() {
        #expect(lines("> quoted words that wrap\n>\n> > deeper", width: 16) == ["│ quoted words", "│ that wrap", "│ ", "│ │ deeper"])
    }

    @Test func headingsEmphasisAndCodeAreStyled() {
        let shown = rows("# Title\n\nsome *soft* **bold** `code` ~~gone~~", width: 40)
        #expect(shown.map(\.text) == ["Title", "", "some soft bold code gone"])
        #expect(shown[0].spans == [StyledSpan("Title", SpanStyle(bold: true, underline: true))])
        let spans = shown[2].spans ?? []
        #expect(spans.contains(StyledSpan("soft", SpanStyle(italic: true))))
        #expect(spans.contains(StyledSpan("bold", SpanStyle(bold: true))))
        #expect(spans.contains(StyledSpan("code", SpanStyle(tone: .code))))
        #expect(spans.contains(StyledSpan("gone", SpanStyle(struck: true))))
    }

    @Test func aLinkIsAHyperlinkOnlyWhereTheTerminalShowsThem() {
        let markdown = "see [the docs](https://example.com/docs) or [local](file:///etc/passwd)"
        #expect(lines(markdown, width: 80) == ["see the docs (https://example.com/docs) or local (file:///etc/passwd)"])
        let linked = rows(markdown, width: 80, hyperlinks: true)[0]
        #expect(linked.text == "see the docs or local (file:///etc/passwd)")
        #expect(linked.spans?.contains(StyledSpan("the docs", SpanStyle(underline: true, tone: .link, link: "https://example.com/docs"))) == true)
        // Only http, https and mailto become hyperlinks.
        #expect(linked.spans?.contains { $0.text == "local" && $0.style.link == nil } == true)
        // An autolink shows its address once.
        #expect(lines("at https://example.org/x", width: 80) == ["at https://example.org/x"])
    }

    @Test func rawHTMLIsShownAsText() {
        #expect(lines("<script>alert(1)</script>\n\nan <b>x</b>", width: 40) == ["<script>alert(1)</script>", "", "an <b>x</b>"])
    }

    @Test func noRowIsWiderThanTheWidth() {
        let markdown =
            "# " + String(repeating: "漢", count: 50) + "\n\n| a | b | c | d | e | f | g |\n|-|-|-|-|-|-|-|\n| 1 | 2 | 3 | 4 | 5 | 6 | 7 |\n\n```\n"
            + String(repeating: "界", count: 30) + "\n```\n> - " + String(repeating: "word ", count: 30)
        for width in [4, 5, 9, 13, 20, 31] {
            for row in lines(markdown, width: width) {
                #expect(TerminalText.columns(of: row) <= width, "\(row) is wider than \(width)")
            }
        }
    }

    @Test func theHighlighterKnowsItsLanguages() {
        var python = CodeHighlighter(language: "py")
        #expect(
            python.spans(of: "def f(): return 'x' # done") == [
                StyledSpan("def", SpanStyle(tone: .keyword)), StyledSpan(" f(): "), StyledSpan("return", SpanStyle(tone: .keyword)), StyledSpan(" "),
                StyledSpan("'x'", SpanStyle(tone: .string)), StyledSpan(" "), StyledSpan("# done", SpanStyle(tone: .comment)),
            ])
        var c = CodeHighlighter(language: "C")
        #expect(
            c.spans(of: "int x; /* open") == [
                StyledSpan("int", SpanStyle(tone: .keyword)), StyledSpan(" x; "), StyledSpan("/* open", SpanStyle(tone: .comment)),
            ])
        #expect(
            c.spans(of: "still */ 0x1F") == [StyledSpan("still */", SpanStyle(tone: .comment)), StyledSpan(" "), StyledSpan("0x1F", SpanStyle(tone: .number))])
        var unknown = CodeHighlighter(language: "cobol")
        #expect(unknown.spans(of: "if 1") == [StyledSpan("if 1")])
        for language in ["swift", "python", "js", "ts", "json", "sh", "bash", "go", "rust", "c"] {
            #expect(CodeHighlighter.languages[language] != nil, "\(language) is not coloured")
        }
    }

    @Test func hyperlinksAreDecidedConservatively() {
        #expect(TerminalCapabilities.detect(environment: ["TERM": "xterm-256color"]).hyperlinks == false)
        #expect(TerminalCapabilities.detect(environment: ["TERM": "xterm-kitty"]).hyperlinks == true)
        #expect(TerminalCapabilities.detect(environment: ["TERM": "xterm-256color", "VTE_VERSION": "7200"]).hyperlinks == true)
        #expect(TerminalCapabilities.detect(environment: ["TERM": "tmux-256color", "TMUX": "/tmp/t,1,0", "TERM_PROGRAM": "tmux"]).hyperlinks == false)
        #expect(TerminalCapabilities.detect(environment: ["TERM": "screen", "VTE_VERSION": "7200"]).hyperlinks == false)
        #expect(TerminalCapabilities.detect(environment: ["TMUX": "/tmp/t,1,0", "TETHER_HYPERLINKS": "on"]).hyperlinks == true)
        #expect(TerminalCapabilities.detect(environment: ["TERM": "xterm-kitty", "TETHER_HYPERLINKS": "off"]).hyperlinks == false)
    }
}
