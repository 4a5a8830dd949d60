import Foundation
import TetherWire

/// The development gateway's bot: acknowledges each message, thinks, and streams an answer.
/// It answers `markdown: sample` with ``markdownSample`` and `markdown: long` with
/// ``longMarkdown`` (both dialects), so that a front end's rendering of Markdown can be seen.
struct DemoBot: Sendable {
    var name: String
    var chunkDelay: Duration

    /// The message that asks for ``markdownSample``.
    static let sampleRequest = "markdown: sample"
    /// The message that asks for ``longMarkdown``.
    static let longRequest = "markdown: long"

    /// A reply with a heading, inline styles, a table (with wide characters), a code block,
    /// lists, a quote and a link.
    static let markdownSample = """
        ## Markdown sample

        Some **bold**, *italic*, `code` and ~~struck~~ words.

        | Tool | Runs | Status |
        |:-----|-----:|:------:|
        | read | 3 | ok |
        | exec | 12 | 漢字 |

        ```swift
        let greeting = "hello" // a comment
        print(greeting, 42)
        ```

        - first point
        - second point
          1. nested one

        > A quote of *note*.

        See [the docs](https://example.com/docs).
        """

    /// The lines of ``longMarkdown``'s list.
    static let longLines = 10_000

    /// A heading and a numbered list of ``longLines`` items, `1. line 1 of 10000` on.
    static let longMarkdown = "# Ten thousand lines\n\n" + (1...longLines).map { "\($0). line \($0) of \(longLines)" }.joined(separator: "\n")

    /// The reply to `content`.
    func reply(to content: String) -> String {
        switch content.trimmingCharacters(in: .whitespacesAndNewlines) {
        case Self.sampleRequest: Self.markdownSample
        case Self.longRequest: Self.longMarkdown
        default: "You said: \(content)"
        }
    }

    /// ``longMarkdown`` is streamed in pieces of whole lines about this long.
    static let longChunkLength = 4000

    /// Splits a reply into the chunks it is streamed in: one word each, spaces kept;
    /// ``longMarkdown`` in pieces of whole lines about ``longChunkLength`` long.
    func chunks(of reply: String) -> [String] {
        var chunks: [String] = []
        var current = ""
        let long = reply == Self.longMarkdown
        for character in reply {
            current.append(character)
            if long ? character == "\n" && current.utf8.count >= Self.longChunkLength : character == " " {
                chunks.append(current)
                current = ""
            }
        }
        if !current.isEmpty || chunks.isEmpty { chunks.append(current) }
        return chunks
    }
}
