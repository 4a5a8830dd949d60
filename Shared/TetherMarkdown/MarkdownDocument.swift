/// A Markdown text as a value: the blocks of a bot's reply and the inlines within them, with
/// nothing of how one front end shows them. Raw HTML in the text is kept as plain text.
public struct MarkdownDocument: Codable, Hashable, Sendable {
    /// The top-level blocks, in order.
    public var blocks: [MarkdownBlock]

    /// A document of these blocks.
    public init(blocks: [MarkdownBlock]) {
        self.blocks = blocks
    }
}

/// How the text of a table's column lines up in its cells.
public enum MarkdownColumnAlignment: String, Codable, Hashable, Sendable {
    /// No alignment asked for: shown as the left one.
    case none
    case left
    case center
    case right
}

/// One block of a Markdown document.
public enum MarkdownBlock: Codable, Hashable, Sendable {
    /// A heading of level 1 (the largest) to 6.
    case heading(level: Int, content: [MarkdownInline])
    /// A paragraph of inlines.
    case paragraph([MarkdownInline])
    /// A list: numbered from `start` when ordered, with bullets otherwise. Each item is blocks.
    case list(ordered: Bool, start: Int, items: [[MarkdownBlock]])
    /// A block quote of blocks.
    case quote([MarkdownBlock])
    /// Code as it was written, with the language named after the opening fence ("" if none).
    case codeBlock(language: String, text: String)
    /// A table: one alignment per column, the header's cells, then the rows' cells. A row has
    /// as many cells as the table has columns.
    case table(alignments: [MarkdownColumnAlignment], header: [[MarkdownInline]], rows: [[[MarkdownInline]]])
    /// A line across (`---`).
    case thematicBreak
}

/// One inline of a Markdown block.
public enum MarkdownInline: Codable, Hashable, Sendable {
    /// Text as it is shown (raw HTML included, as text).
    case text(String)
    /// Emphasised inlines (`*a*`).
    case emphasis([MarkdownInline])
    /// Strong inlines (`**a**`).
    case strong([MarkdownInline])
    /// Struck-through inlines (`~~a~~`).
    case strikethrough([MarkdownInline])
    /// Code within a line (`` `a` ``).
    case code(String)
    /// A link to `destination`, with an optional title ("" if none).
    case link(destination: String, title: String, content: [MarkdownInline])
    /// A hard line break (two spaces or a backslash at the end of a line).
    case lineBreak
}
