import CCmarkGFM
import Synchronization

/// Turns Markdown text into a ``MarkdownDocument`` with cmark-gfm (CommonMark with GitHub's
/// tables, strikethrough and autolinks). Any text is a document: nothing in it is an error.
/// Raw HTML is kept as the text it was, never interpreted. Blocks and inlines nested deeper
/// than ``depthLimit`` are kept as their plain text, so that no text makes a document deeper.
public enum MarkdownParser {
    /// The most blocks (quotes, lists) or inlines (emphasis, links) held one in another;
    /// what is deeper is its plain text.
    public static let depthLimit = 24

    /// cmark-gfm's extensions are registered once per process (its own registration is not
    /// safe to run from two threads at once; a global is initialised once).
    private static let extensions: Extensions = {
        cmark_gfm_core_extensions_ensure_registered()
        let names = ["table", "strikethrough", "autolink"]
        return Extensions(pointers: names.compactMap { name in name.withCString { cmark_find_syntax_extension($0) } })
    }()

    /// cmark-gfm's extensions, which nothing changes once they are registered.
    private struct Extensions: @unchecked Sendable {
        let pointers: [OpaquePointer]
    }

    /// The most lines of one plain paragraph handed to cmark-gfm: a longer run is cut into
    /// paragraphs of this many lines. cmark-gfm 0.29's inline parser takes time growing with
    /// the square of a paragraph's emphasis and links (seconds for 10,000 lines of them); cut,
    /// a reply's parse takes time in proportion to its length.
    public static let paragraphLineLimit = 200

    /// The document `text` is.
    public static func parse(_ text: String) -> MarkdownDocument {
        parseBounded(boundingParagraphs(text))
    }

    /// `text` with an empty line after every ``paragraphLineLimit`` lines of a run of plain
    /// paragraph lines (not blank, not in a fenced code block, not indented as code, not
    /// starting a list item, a quote, a table row, a heading or a fence); unchanged when it
    /// has no such run.
    static func boundingParagraphs(_ text: String) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count > paragraphLineLimit else { return text }
        var result: [Substring] = []
        result.reserveCapacity(lines.count)
        var fence: Substring?
        var run = 0
        for line in lines {
            let indent = line.prefix { $0 == " " }.count
            let content = line.dropFirst(indent)
            let opensFence = indent < 4 && (content.hasPrefix("```") || content.hasPrefix("~~~"))
            if let open = fence {
                if opensFence && content.hasPrefix(open) { fence = nil }
                result.append(line)
                continue
            }
            if opensFence {
                fence = content.prefix(3)
                run = 0
                result.append(line)
                continue
            }
            if indent < 4 && !content.allSatisfy(\.isWhitespace) && !mayStartBlock(content) {
                if run == paragraphLineLimit {
                    result.append("")
                    run = 0
                }
                run += 1
            } else {
                run = 0
            }
            result.append(line)
        }
        return result.joined(separator: "\n")
    }

    /// Whether a line may start a block other than a paragraph, or underline a heading.
    private static func mayStartBlock(_ content: Substring) -> Bool {
        guard let first = content.first else { return true }
        if "-*+>|#=_<".contains(first) { return true }
        let digits = content.prefix { $0.isASCII && $0.isNumber }
        return !digits.isEmpty && content.dropFirst(digits.count).first.map { $0 == "." || $0 == ")" } == true
    }

    /// cmark-gfm adds its extensions' special characters to a table of the whole process as a
    /// parse finishes, and takes them out again (`cmark_manage_extensions_special_characters`):
    /// two parses at once, on two threads, lose each other's (`www.` then links nothing). One
    /// parse at a time.
    private static let oneParseAtATime = Mutex(())

    private static func parseBounded(_ text: String) -> MarkdownDocument {
        oneParseAtATime.withLock { _ in parseAlone(text) }
    }

    private static func parseAlone(_ text: String) -> MarkdownDocument {
        guard let parser = cmark_parser_new(CMARK_OPT_DEFAULT) else { return MarkdownDocument(blocks: [.paragraph([.text(text)])]) }
        defer { cmark_parser_free(parser) }
        for extensionPointer in extensions.pointers { cmark_parser_attach_syntax_extension(parser, extensionPointer) }
        var utf8 = text
        utf8.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { cmark_parser_feed(parser, $0.baseAddress, $0.count) }
        }
        guard let root = cmark_parser_finish(parser) else { return MarkdownDocument(blocks: []) }
        defer { cmark_node_free(root) }
        return MarkdownDocument(blocks: blocks(under: root, depth: 0))
    }

    // MARK: Blocks

    private static func blocks(under node: OpaquePointer, depth: Int) -> [MarkdownBlock] {
        children(of: node).compactMap { block($0, depth: depth) }
    }

    private static func block(_ node: OpaquePointer, depth: Int) -> MarkdownBlock? {
        let type = cmark_node_get_type(node)
        if depth >= depthLimit, type == CMARK_NODE_BLOCK_QUOTE || type == CMARK_NODE_LIST {
            return .paragraph([.text(plainText(of: node))])
        }
        switch type {
        case CMARK_NODE_PARAGRAPH:
            return .paragraph(inlines(under: node, depth: 0))
        case CMARK_NODE_HEADING:
            return .heading(level: Int(cmark_node_get_heading_level(node)), content: inlines(under: node, depth: 0))
        case CMARK_NODE_BLOCK_QUOTE:
            return .quote(blocks(under: node, depth: depth + 1))
        case CMARK_NODE_LIST:
            let items = children(of: node).map { blocks(under: $0, depth: depth + 1) }
            return .list(ordered: cmark_node_get_list_type(node) == CMARK_ORDERED_LIST, start: Int(cmark_node_get_list_start(node)), items: items)
        case CMARK_NODE_CODE_BLOCK:
            let info = string(cmark_node_get_fence_info(node))
            let language = info.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init) ?? ""
            return .codeBlock(language: language, text: withoutFinalNewline(string(cmark_node_get_literal(node))))
        case CMARK_NODE_HTML_BLOCK:
            return .paragraph(lines(withoutFinalNewline(string(cmark_node_get_literal(node)))))
        case CMARK_NODE_THEMATIC_BREAK:
            return .thematicBreak
        default:
            if string(cmark_node_get_type_string(node)) == "table" { return table(node) }
            let text = plainText(of: node)
            return text.isEmpty ? nil : .paragraph([.text(text)])
        }
    }

    /// A table of cmark-gfm's table extension: every row has as many cells as the table has columns.
    private static func table(_ node: OpaquePointer) -> MarkdownBlock {
        let columns = Int(cmark_gfm_extensions_get_table_columns(node))
        var alignments: [MarkdownColumnAlignment] = []
        if let codes = cmark_gfm_extensions_get_table_alignments(node) {
            for column in 0..<columns {
                let alignment: MarkdownColumnAlignment =
                    switch UnicodeScalar(codes[column]) {
                    case "l": .left
                    case "c": .center
                    case "r": .right
                    default: .none
                    }
                alignments.append(alignment)
            }
        } else {
            alignments = Array(repeating: .none, count: columns)
        }
        var header: [[MarkdownInline]] = Array(repeating: [], count: columns)
        var rows: [[[MarkdownInline]]] = []
        for row in children(of: node) {
            var cells = children(of: row).prefix(columns).map { inlines(under: $0, depth: 0) }
            cells += Array(repeating: [], count: columns - cells.count)
            if cmark_gfm_extensions_get_table_row_is_header(row) != 0 { header = cells } else { rows.append(cells) }
        }
        return .table(alignments: alignments, header: header, rows: rows)
    }

    // MARK: Inlines

    private static func inlines(under node: OpaquePointer, depth: Int) -> [MarkdownInline] {
        var result: [MarkdownInline] = []
        for child in children(of: node) {
            guard let inline = inline(child, depth: depth) else { continue }
            // Neighbouring text is one text.
            if case .text(let next) = inline, case .text(let previous)? = result.last {
                result[result.count - 1] = .text(previous + next)
            } else {
                result.append(inline)
            }
        }
        return result
    }

    private static func inline(_ node: OpaquePointer, depth: Int) -> MarkdownInline? {
        let type = cmark_node_get_type(node)
        switch type {
        case CMARK_NODE_TEXT, CMARK_NODE_HTML_INLINE:
            return .text(string(cmark_node_get_literal(node)))
        case CMARK_NODE_SOFTBREAK:
            return .text(" ")
        case CMARK_NODE_LINEBREAK:
            return .lineBreak
        case CMARK_NODE_CODE:
            return .code(string(cmark_node_get_literal(node)))
        default:
            break
        }
        if depth >= depthLimit { return .text(plainText(of: node)) }
        switch type {
        case CMARK_NODE_EMPH:
            return .emphasis(inlines(under: node, depth: depth + 1))
        case CMARK_NODE_STRONG:
            return .strong(inlines(under: node, depth: depth + 1))
        case CMARK_NODE_LINK, CMARK_NODE_IMAGE:
            // An image is a link to it: a terminal cannot show it, a page may.
            return .link(
                destination: string(cmark_node_get_url(node)), title: string(cmark_node_get_title(node)),
                content: inlines(under: node, depth: depth + 1))
        default:
            if string(cmark_node_get_type_string(node)) == "strikethrough" {
                return .strikethrough(inlines(under: node, depth: depth + 1))
            }
            let text = plainText(of: node)
            return text.isEmpty ? nil : .text(text)
        }
    }

    // MARK: Reading nodes

    private static func children(of node: OpaquePointer) -> [OpaquePointer] {
        var result: [OpaquePointer] = []
        var child = cmark_node_first_child(node)
        while let current = child {
            result.append(current)
            child = cmark_node_next(current)
        }
        return result
    }

    /// The text of every node under `node`, walked without recursion (it may be deep).
    private static func plainText(of node: OpaquePointer) -> String {
        guard let iterator = cmark_iter_new(node) else { return "" }
        defer { cmark_iter_free(iterator) }
        var text = ""
        while true {
            let event = cmark_iter_next(iterator)
            if event == CMARK_EVENT_DONE { break }
            guard event == CMARK_EVENT_ENTER, let current = cmark_iter_get_node(iterator) else { continue }
            switch cmark_node_get_type(current) {
            case CMARK_NODE_TEXT, CMARK_NODE_CODE, CMARK_NODE_HTML_INLINE: text += string(cmark_node_get_literal(current))
            case CMARK_NODE_CODE_BLOCK, CMARK_NODE_HTML_BLOCK: text += withoutFinalNewline(string(cmark_node_get_literal(current))) + " "
            case CMARK_NODE_SOFTBREAK, CMARK_NODE_LINEBREAK: text += " "
            case CMARK_NODE_PARAGRAPH, CMARK_NODE_HEADING: if !text.isEmpty && text.last != " " { text += " " }
            default: break
            }
        }
        return text.trimmingSpaces
    }

    private static func string(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    private static func withoutFinalNewline(_ text: String) -> String {
        text.hasSuffix("\n") ? String(text.dropLast()) : text
    }

    /// Text of several lines as inlines: its lines with line breaks between them.
    private static func lines(_ text: String) -> [MarkdownInline] {
        var result: [MarkdownInline] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if index > 0 { result.append(.lineBreak) }
            if !line.isEmpty { result.append(.text(String(line))) }
        }
        return result
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var result = Substring(self)
        while result.first == " " { result = result.dropFirst() }
        while result.last == " " { result = result.dropLast() }
        return String(result)
    }
}
