import Foundation
import Testing

@testable import TetherMarkdown

@Suite struct MarkdownParserTests {
    @Test func headingsParagraphsAndInlines() {
        let document = MarkdownParser.parse("# Title\n\nSome *soft* and **strong** `code` ~~gone~~\nnext line  \nafter a break\n\n---\n")
        #expect(
            document.blocks == [
                .heading(level: 1, content: [.text("Title")]),
                .paragraph([
                    .text("Some "), .emphasis([.text("soft")]), .text(" and "), .strong([.text("strong")]), .text(" "), .code("code"), .text(" "),
                    .strikethrough([.text("gone")]), .text(" next line"), .lineBreak, .text("after a break"),
                ]),
                .thematicBreak,
            ])
    }

    @Test func listsKeepTheirKindStartAndItems() {
        let document = MarkdownParser.parse("3. three\n4. four\n   - inner\n\n* a\n* b\n")
        #expect(
            document.blocks == [
                .list(
                    ordered: true, start: 3,
                    items: [
                        [.paragraph([.text("three")])],
                        [.paragraph([.text("four")]), .list(ordered: false, start: 0, items: [[.paragraph([.text("inner")])]])],
                    ]),
                .list(ordered: false, start: 0, items: [[.paragraph([.text("a")])], [.paragraph([.text("b")])]]),
            ])
    }

    @Test func quotesAndCodeBlocks() {
        let document = MarkdownParser.parse("> quoted\n> > deeper\n\n```swift title=x\nlet a = 1\n\nprint(a)\n```\n\n    indented\n")
        #expect(
            document.blocks == [
                .quote([.paragraph([.text("quoted")]), .quote([.paragraph([.text("deeper")])])]),
                .codeBlock(language: "swift", text: "let a = 1\n\nprint(a)"),
                .codeBlock(language: "", text: "indented"),
            ])
    }

    @Test func anUnterminatedFenceIsACodeBlockSoFar() {
        #expect(
            MarkdownParser.parse("Here:\n```python\nprint(1)\n").blocks == [.paragraph([.text("Here:")]), .codeBlock(language: "python", text: "print(1)")])
    }

    @Test func tablesHaveAlignmentsAHeaderAndFullRows() {
        let document = MarkdownParser.parse("| a | b | c | d |\n|---|:--|:-:|--:|\n| 1 | *2* |\n| 5 | 6 | 7 | 8 | 9 |\n")
        #expect(
            document.blocks == [
                .table(
                    alignments: [.none, .left, .center, .right],
                    header: [[.text("a")], [.text("b")], [.text("c")], [.text("d")]],
                    rows: [
                        [[.text("1")], [.emphasis([.text("2")])], [], []],
                        [[.text("5")], [.text("6")], [.text("7")], [.text("8")]],
                    ])
            ])
    }

    /// cmark-gfm's extensions share a table of the whole process: parses on many threads at
    /// once each still find every autolink.
    @Test func parsesOnManyThreadsAtOnceEachFindTheirAutolinks() async {
        let found = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    (0..<300).filter { _ in
                        MarkdownParser.parse("see www.example.org now").blocks
                            == [
                                .paragraph([
                                    .text("see "), .link(destination: "http://www.example.org", title: "", content: [.text("www.example.org")]), .text(" now"),
                                ])
                            ]
                    }.count
                }
            }
            return await group.reduce(0, +)
        }
        #expect(found == 8 * 300)
    }

    @Test func linksAutolinksAndImages() {
        let document = MarkdownParser.parse("[docs](https://example.com/d \"The docs\") and www.example.org and ![a cat](cat.png)")
        #expect(
            document.blocks == [
                .paragraph([
                    .link(destination: "https://example.com/d", title: "The docs", content: [.text("docs")]),
                    .text(" and "),
                    .link(destination: "http://www.example.org", title: "", content: [.text("www.example.org")]),
                    .text(" and "),
                    .link(destination: "cat.png", title: "", content: [.text("a cat")]),
                ])
            ])
    }

    @Test func rawHTMLStaysText() {
        let document = MarkdownParser.parse("<div onclick=\"x()\">\n<b>hi</b>\n</div>\n\nan <i>inline</i> tag")
        #expect(
            document.blocks == [
                .paragraph([.text("<div onclick=\"x()\">"), .lineBreak, .text("<b>hi</b>"), .lineBreak, .text("</div>")]),
                .paragraph([.text("an <i>inline</i> tag")]),
            ])
    }

    @Test func theDocumentIsCodable() throws {
        let document = MarkdownParser.parse("# T\n\n| a |\n|--:|\n| `b` |\n\n1. [x](https://x.org)\n\n> ~~y~~\n\n```js\n1\n```\n***\n")
        let decoded = try JSONDecoder().decode(MarkdownDocument.self, from: JSONEncoder().encode(document))
        #expect(decoded == document)
        #expect(document.blocks.count == 6)
    }

    @Test func nestingDeeperThanTheLimitIsPlainText() {
        let quotes = MarkdownParser.parse(String(repeating: ">", count: 5000) + " deep")
        #expect(depth(of: quotes.blocks) <= MarkdownParser.depthLimit + 1)
        #expect(text(of: quotes.blocks).contains("deep"))
        let emphasis = MarkdownParser.parse(String(repeating: "*a ", count: 3000) + "b" + String(repeating: " c*", count: 3000))
        #expect(text(of: emphasis.blocks).contains("b"))
    }

    /// Random and garbled Markdown, deep nesting and a huge text: every one is a document,
    /// none crashes, and each is parsed fast.
    @Test func anyTextIsADocumentFast() throws {
        var generator = SeededGenerator(seed: 0x7e7e)
        let pieces = [
            "*", "**", "_", "~~", "`", "```", "~~~", "[", "]", "(", ")", "<", ">", "!", "|", "-", ":", "#", " ", "\n", "\n\n", "1.", "\t", "\\",
            "http://", "www.", "&amp;", "<div>", "</b>", "é", "漢字", "👍🏽", "\u{0}", "\u{7}", "\r", "---", "| a | b |\n|---|---|\n", "    ",
        ]
        let clock = ContinuousClock()
        for _ in 0..<400 {
            let text = (0..<Int.random(in: 0...200, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let elapsed = clock.measure { _ = MarkdownParser.parse(text) }
            #expect(elapsed < .milliseconds(200), "\(text.debugDescription) took \(elapsed)")
        }
        let garbled = String(decoding: (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &generator) }, as: UTF8.self)
        _ = MarkdownParser.parse(garbled)
        // Paragraphs, a list and a table of 10,000 lines each.
        let paragraphs = (0..<10_000).map { "line \($0) with *emphasis*, `code` and [a link](https://example.com/\($0))" }.joined(separator: "\n\n")
        let list = (1...10_000).map { "\($0). item \($0) with **strong** [link](https://example.com/\($0))" }.joined(separator: "\n")
        let table = "| a | b |\n|---|--:|\n" + (0..<10_000).map { "| *\($0)* | [x](https://x.org/\($0)) |" }.joined(separator: "\n")
        // One paragraph of 10,000 lines of emphasis and links: cut into paragraphs of 200 lines.
        let paragraph = (0..<10_000).map { "line \($0) with *emphasis*, `code` and [a link](https://example.com/\($0))" }.joined(separator: "\n")
        for huge in [paragraphs, list, table, paragraph] {
            let started = clock.now
            let document = MarkdownParser.parse(huge)
            #expect(clock.now - started < .seconds(2))
            #expect(text(of: document.blocks).contains("9999"))
        }
        for nested in [
            String(repeating: "> ", count: 100_000), String(repeating: "- ", count: 50_000), String(repeating: "[", count: 100_000),
            String(repeating: "*", count: 100_000),
        ] {
            let started = clock.now
            _ = MarkdownParser.parse(nested + "x")
            #expect(clock.now - started < .seconds(2))
        }
    }

    @Test func aLongParagraphIsCutOutsideCodeAndOtherBlocks() {
        let limit = MarkdownParser.paragraphLineLimit
        let long = (1...(2 * limit + 1)).map { "word \($0)" }
        #expect(MarkdownParser.parse(long.joined(separator: "\n")).blocks.count == 3)
        // A fenced code block, a list and a quote are left whole.
        let code = "```\n" + long.joined(separator: "\n") + "\n```"
        #expect(MarkdownParser.parse(code).blocks == [.codeBlock(language: "", text: long.joined(separator: "\n"))])
        let list = long.map { "- " + $0 }.joined(separator: "\n")
        #expect(MarkdownParser.parse(list).blocks.count == 1)
        #expect(MarkdownParser.boundingParagraphs(long.prefix(limit).joined(separator: "\n")) == long.prefix(limit).joined(separator: "\n"))
    }

    private func depth(of blocks: [MarkdownBlock]) -> Int {
        blocks.map { block in
            switch block {
            case .quote(let inner): 1 + depth(of: inner)
            case .list(_, _, let items): 1 + (items.map { depth(of: $0) }.max() ?? 0)
            default: 0
            }
        }.max() ?? 0
    }

    private func text(of blocks: [MarkdownBlock]) -> String {
        blocks.map { block in
            switch block {
            case .paragraph(let inlines), .heading(_, let inlines): text(of: inlines)
            case .quote(let inner): text(of: inner)
            case .list(_, _, let items): items.map { text(of: $0) }.joined(separator: " ")
            case .codeBlock(_, let code): code
            case .table(_, let header, let rows): (header + rows.joined()).map { text(of: $0) }.joined(separator: " ")
            case .thematicBreak: ""
            }
        }.joined(separator: " ")
    }

    private func text(of inlines: [MarkdownInline]) -> String {
        inlines.map { inline in
            switch inline {
            case .text(let text), .code(let text): text
            case .emphasis(let inner), .strong(let inner), .strikethrough(let inner), .link(_, _, let inner): text(of: inner)
            case .lineBreak: " "
            }
        }.joined()
    }
}

/// The same random values every run (SplitMix64), so that a failure can be repeated.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
