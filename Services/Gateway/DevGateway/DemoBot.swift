import Foundation
import TetherWire

/// The development gateway's bot: acknowledges each message, thinks, and streams an answer.
struct DemoBot: Sendable {
    var name: String
    var chunkDelay: Duration

    /// The reply to `content`.
    func reply(to content: String) -> String {
        "You said: \(content)"
    }

    /// Splits a reply into the chunks it is streamed in: one word each, spaces kept.
    func chunks(of reply: String) -> [String] {
        var chunks: [String] = []
        var current = ""
        for character in reply {
            current.append(character)
            if character == " " {
                chunks.append(current)
                current = ""
            }
        }
        if !current.isEmpty || chunks.isEmpty { chunks.append(current) }
        return chunks
    }
}
