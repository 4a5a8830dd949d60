import Foundation
public import TetherMarkdown
import TetherService

/// A Markdown document as styled terminal rows of a width: headings bold (and underlined at
/// level 1), emphasis italic, strong bold, code in its colour, lists with bullets or numbers
/// and a hanging indent, quotes with a bar, tables and code blocks in box-drawing frames, code
/// coloured by its language, and links as OSC 8 hyperlinks where the terminal shows them (only
/// http, https and mailto), else as `text (url)`. Widths are terminal columns: wide
/// characters and emoji stay aligned. No row is wider than the width.
public enum MarkdownTerminalRenderer {
    /// The rows `document` takes on a terminal of `width` columns with `capabilities`.
    public static func rows(of document: MarkdownDocument, width: Int, capabilities: TerminalCapabilities) -> [ScreenRow] {
        let width = max(4, width)
        let renderer = Renderer(capabilities: capabilities)
        return renderer.blocks(document.blocks, width: width, separated: true, listDepth: 0).map {
            ScreenRow(spans: Renderer.spans(of: Renderer.clip($0, to: width)))
        }
    }

    /// Link addresses that may become hyperlinks: http, https and mailto, in printable ASCII.
    static func isHyperlinkable(_ destination: String) -> Bool {
        let lowered = destination.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") || lowered.hasPrefix("mailto:") else { return false }
        return destination.unicodeScalars.allSatisfy { (0x21...0x7E).contains($0.value) }
    }
}

/// One character as laid out: its columns and style. A line break is a cell of "\n".
private struct Cell {
    var character: Character
    var width: Int
    var style: SpanStyle
}

private typealias Line = [Cell]

private struct Renderer {
    let capabilities: TerminalCapabilities

    static let bullets: [Character] = ["•", "◦", "▪"]

    // MARK: Blocks

    func blocks(_ blocks: [MarkdownBlock], width: Int, separated: Bool, listDepth: Int) -> [Line] {
        var lines: [Line] = []
        for (index, block) in blocks.enumerated() {
            if separated && index > 0 { lines.append([]) }
            lines += self.block(block, width: width, listDepth: listDepth)
        }
        return lines
    }

    func block(_ block: MarkdownBlock, width: Int, listDepth: Int) -> [Line] {
        switch block {
        case .paragraph(let content):
            return Self.wrap(cells(content, SpanStyle.plain), width: width)
        case .heading(let level, let content):
            return Self.wrap(cells(content, SpanStyle(bold: true, underline: level == 1)), width: width)
        case .list(let ordered, let start, let items):
            return list(ordered: ordered, start: start, items: items, width: width, depth: listDepth)
        case .quote(let inner):
            let bar = Self.cells("│ ", SpanStyle(tone: .dim))
            let content = blocks(inner, width: max(1, width - 2), separated: true, listDepth: listDepth)
            return (content.isEmpty ? [[]] : content).map { bar + $0 }
        case .codeBlock(let language, let text):
            return codeBlock(language: language, text: text, width: width)
        case .table(let alignments, let header, let rows):
            return table(alignments: alignments, header: header, rows: rows, width: width)
        case .thematicBreak:
            return [Self.cells(String(repeating: "─", count: width), SpanStyle(tone: .dim))]
        }
    }

    private func list(ordered: Bool, start: Int, items: [[MarkdownBlock]], width: Int, depth: Int) -> [Line] {
        let last = start + max(0, items.count - 1)
        let markerWidth = ordered ? String(last).count + 2 : 2
        var lines: [Line] = []
        for (index, item) in items.enumerated() {
            let marker: String
            if ordered {
                let number = String(start + index) + "."
                marker = String(repeating: " ", count: markerWidth - 1 - number.count) + number + " "
            } else {
                marker = String(Self.bullets[depth % Self.bullets.count]) + " "
            }
            var content = blocks(item, width: max(1, width - markerWidth), separated: false, listDepth: depth + 1)
            if content.isEmpty { content = [[]] }
            let indent = Self.cells(String(repeating: " ", count: markerWidth), .plain)
            for (row, line) in content.enumerated() {
                lines.append((row == 0 ? Self.cells(marker, .plain) : indent) + line)
            }
        }
        return lines
    }

    private func codeBlock(language: String, text: String, width: Int) -> [Line] {
        let frame = SpanStyle(tone: .dim)
        let inner = max(1, width - 4)
        var top = "┌"
        if !language.isEmpty {
            let name = TerminalSafe.visible(language, newlines: false)
            top += "─ " + name + " "
        }
        let topCells = Self.clip(Self.cells(top, frame), to: width - 1)
        let topLine = topCells + Self.cells(String(repeating: "─", count: max(0, width - 1 - Self.width(of: topCells))) + "┐", frame)
        var lines: [Line] = [topLine]
        var highlighter = CodeHighlighter(language: language)
        for sourceLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let expanded = TerminalSafe.visible(sourceLine.replacingOccurrences(of: "\t", with: "    "), newlines: false)
            var cells: Line = []
            for span in highlighter.spans(of: expanded) { cells += Self.cells(span.text, span.style) }
            // Code is cut into pieces of the width, not at spaces: its spaces matter.
            var piece: Line = []
            var used = 0
            var pieces: [Line] = []
            for cell in cells {
                if used + cell.width > inner && !piece.isEmpty {
                    pieces.append(piece)
                    piece = []
                    used = 0
                }
                piece.append(cell)
                used += cell.width
            }
            pieces.append(piece)
            for piece in pieces {
                let padding = max(0, inner - Self.width(of: piece))
                lines.append(Self.cells("│ ", frame) + piece + Self.cells(String(repeating: " ", count: padding) + " │", frame))
            }
        }
        lines.append(Self.cells("└" + String(repeating: "─", count: max(0, width - 2)) + "┘", frame))
        return lines
    }

    private func table(alignments: [MarkdownColumnAlignment], header: [[MarkdownInline]], rows: [[[MarkdownInline]]], width: Int) -> [Line] {
        let columns = alignments.count
        guard columns > 0 else { return [] }
        let headerCells = header.map { cells($0, SpanStyle(bold: true)) }
        let bodyCells = rows.map { row in row.map { cells($0, .plain) } }
        // Each column as wide as its widest cell, then the widest narrowed until the table fits.
        var widths = Array(repeating: 1, count: columns)
        for row in [headerCells] + bodyCells {
            for (column, cell) in row.enumerated() where column < columns {
                let widest = Self.split(cell).map(Self.width(of:)).max() ?? 0
                widths[column] = max(widths[column], widest)
            }
        }
        let available = max(columns, width - (3 * columns + 1))
        var excess = widths.reduce(0, +) - available
        while excess > 0, let widest = widths.indices.max(by: { widths[$0] < widths[$1] }), widths[widest] > 1 {
            let others = widths.enumerated().filter { $0.offset != widest }.map(\.element).max() ?? 1
            let cut = max(1, min(excess, widths[widest] - max(others, 1)))
            widths[widest] -= min(cut, widths[widest] - 1)
            excess = widths.reduce(0, +) - available
        }
        let border = SpanStyle(tone: .dim)
        func rule(_ left: String, _ middle: String, _ right: String) -> Line {
            Self.cells(left + widths.map { String(repeating: "─", count: $0 + 2) }.joined(separator: middle) + right, border)
        }
        func lines(of row: [Line]) -> [Line] {
            let wrapped = (0..<columns).map { column in column < row.count ? Self.wrap(row[column], width: widths[column]) : [[]] }
            let height = wrapped.map(\.count).max() ?? 1
            return (0..<height).map { index in
                var line = Self.cells("│", border)
                for column in 0..<columns {
                    let content = index < wrapped[column].count ? wrapped[column][index] : []
                    let padding = max(0, widths[column] - Self.width(of: content))
                    let (before, after): (Int, Int) =
                        switch alignments[column] {
                        case .right: (padding, 0)
                        case .center: (padding / 2, padding - padding / 2)
                        case .left, .none: (0, padding)
                        }
                    line += Self.cells(String(repeating: " ", count: before + 1), .plain) + content
                    line += Self.cells(String(repeating: " ", count: after + 1), .plain) + Self.cells("│", border)
                }
                return line
            }
        }
        var result = [rule("┌", "┬", "┐")]
        result += lines(of: headerCells)
        result.append(rule("├", "┼", "┤"))
        for row in bodyCells { result += lines(of: row) }
        result.append(rule("└", "┴", "┘"))
        return result
    }

    // MARK: Inlines

    /// The cells of `inlines` in `style`; a line break is a cell of "\n".
    func cells(_ inlines: [MarkdownInline], _ style: SpanStyle) -> Line {
        var result: Line = []
        for inline in inlines {
            switch inline {
            case .text(let text):
                result += Self.cells(TerminalSafe.visible(text.replacingOccurrences(of: "\t", with: " "), newlines: false), style)
            case .emphasis(let inner):
                var inside = style
                inside.italic = true
                result += cells(inner, inside)
            case .strong(let inner):
                var inside = style
                inside.bold = true
                result += cells(inner, inside)
            case .strikethrough(let inner):
                var inside = style
                inside.struck = true
                result += cells(inner, inside)
            case .code(let code):
                var inside = style
                inside.tone = .code
                result += Self.cells(TerminalSafe.visible(code, newlines: false), inside)
            case .lineBreak:
                result.append(Cell(character: "\n", width: 0, style: style))
            case .link(let destination, _, let content):
                var inside = style
                inside.tone = .link
                inside.underline = true
                let hyperlink = capabilities.hyperlinks && MarkdownTerminalRenderer.isHyperlinkable(destination)
                if hyperlink { inside.link = destination }
                let text = cells(content, inside)
                result += text
                let shown = String(text.map(\.character))
                let sameAsText = [shown, "http://" + shown, "https://" + shown, "mailto:" + shown].contains(destination)
                if !hyperlink && !destination.isEmpty && !sameAsText {
                    var address = style
                    address.tone = .dim
                    result += Self.cells(" (" + TerminalSafe.visible(destination, newlines: false) + ")", address)
                }
            }
        }
        return result
    }

    // MARK: Lines

    static func cells(_ text: String, _ style: SpanStyle) -> Line {
        text.map { Cell(character: $0, width: TerminalText.columns(of: $0), style: style) }
    }

    static func width(of line: Line) -> Int {
        line.reduce(0) { $0 + $1.width }
    }

    /// `line` cut to at most `width` columns.
    static func clip(_ line: Line, to width: Int) -> Line {
        var used = 0
        var end = 0
        while end < line.count && used + line[end].width <= width {
            used += line[end].width
            end += 1
        }
        return end == line.count ? line : Array(line[..<end])
    }

    /// `cells` split at its line breaks.
    static func split(_ cells: Line) -> [Line] {
        cells.split(omittingEmptySubsequences: false) { $0.character == "\n" }.map(Array.init)
    }

    /// `cells` in lines of at most `width` columns, broken at spaces where possible and at
    /// its line breaks; a space where a line is broken is left out.
    static func wrap(_ cells: Line, width: Int) -> [Line] {
        var lines: [Line] = []
        for paragraph in split(cells) {
            var line: Line = []
            var used = 0
            var lastSpace: Int?
            for cell in paragraph {
                if used + cell.width > width && !line.isEmpty {
                    if let space = lastSpace, space > 0 {
                        let rest = Array(line[(space + 1)...])
                        lines.append(Array(line[..<space]))
                        line = rest
                        used = Self.width(of: rest)
                    } else {
                        lines.append(line)
                        line = []
                        used = 0
                    }
                    lastSpace = nil
                    if cell.character == " " && line.isEmpty { continue }
                }
                if cell.character == " " { lastSpace = line.count }
                line.append(cell)
                used += cell.width
            }
            lines.append(line)
        }
        return lines
    }

    /// The spans of a line: neighbouring cells of one style are one span.
    static func spans(of line: Line) -> [StyledSpan] {
        var spans: [StyledSpan] = []
        for cell in line {
            if let last = spans.last, last.style == cell.style {
                spans[spans.count - 1].text.append(cell.character)
            } else {
                spans.append(StyledSpan(String(cell.character), cell.style))
            }
        }
        return spans
    }
}
