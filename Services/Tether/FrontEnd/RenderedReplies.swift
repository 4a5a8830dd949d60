import Synchronization
import TetherMarkdown
import TetherSchema
import TetherWire

/// Bot replies rendered from their Markdown, kept per entry for the width and text they were
/// rendered at: a frame renders only a reply that changed (the one streaming) or a new width,
/// so that scrolling through a long reply costs no rendering. Only what a reply looks like is
/// kept here, never a decision.
final class RenderedReplies: Sendable {
    /// What a reply's rows are made of.
    struct Reply: Equatable {
        /// Before the reply's first line: `Opta: ` (and the session's key when not the one shown).
        var label: String
        /// The reply's Markdown.
        var content: String
        /// A last line of its own, as a problem: `✗ incomplete: …`.
        var ending: String?
        /// Whether it still grows: its end shows a cursor (▍).
        var streaming: Bool
        var width: Int
    }

    /// The most replies kept; beyond it the store starts afresh.
    static let limit = 2000

    private let store = Mutex<[MessageID: (reply: Reply, capabilities: TerminalCapabilities, rows: [ScreenRow])]>([:])

    /// The rows of the reply `id`, rendered again only when it is not as it was kept.
    func rows(of id: MessageID, _ reply: Reply, capabilities: TerminalCapabilities) -> [ScreenRow] {
        if let kept = store.withLock({ $0[id] }), kept.reply == reply, kept.capabilities == capabilities { return kept.rows }
        let rows = Self.render(reply, capabilities: capabilities)
        store.withLock { store in
            if store.count >= Self.limit { store.removeAll() }
            store[id] = (reply, capabilities, rows)
        }
        return rows
    }

    /// `Opta: ` before the reply's first paragraph (on a line of its own before any other
    /// block), the reply rendered, the cursor after its last character while it streams.
    static func render(_ reply: Reply, capabilities: TerminalCapabilities) -> [ScreenRow] {
        var document = MarkdownParser.parse(reply.content)
        var rows: [ScreenRow] = []
        if document.blocks.isEmpty { document.blocks = [.paragraph([])] }
        if case .paragraph(let content)? = document.blocks.first {
            document.blocks[0] = .paragraph([.text(reply.label)] + content)
        } else {
            rows.append(ScreenRow(TerminalText.fit(String(reply.label.dropLast()), width: reply.width)))
        }
        rows += MarkdownTerminalRenderer.rows(of: document, width: reply.width, capabilities: capabilities)
        if reply.streaming {
            if let last = rows.last, let spans = last.spans, TerminalText.columns(of: last.text) < reply.width {
                rows[rows.count - 1] = ScreenRow(spans: spans + [StyledSpan("▍")])
            } else {
                rows.append(ScreenRow(spans: [StyledSpan("▍")]))
            }
        }
        if let ending = reply.ending {
            rows += TerminalText.wrap(ending, width: reply.width).map { ScreenRow($0, .error) }
        }
        return rows
    }
}
