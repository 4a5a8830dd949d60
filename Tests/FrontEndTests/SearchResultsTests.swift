import Foundation
import Testing
import TetherSchema
import TetherWire

@testable import FrontEnd

/// `tether search`'s lines: the words found in bold on a terminal, nothing else let through.
@Suite struct SearchResultsTests {
    private func hit(_ excerpt: String, sender: Sender = .user, session: String? = nil) -> SearchCommand.Hit {
        var entry = TranscriptEntry(
            id: MessageID("a"), sender: sender, content: "unused", timestamp: Date(timeIntervalSince1970: 1_800_000_000), status: .delivered)
        entry.session = session
        return SearchCommand.Hit(position: 1, entry: entry, excerpt: excerpt)
    }

    @Test func theWordsFoundAreBoldOnATerminalAndPlainElsewhere() {
        let found = hit("Deploy the \u{2}build\u{3} to staging")
        let utc = TimeZone(identifier: "UTC")!
        #expect(SearchResults.line(found, highlight: true, timeZone: utc) == "2027-01-15 08:00  You: Deploy the \u{1B}[1mbuild\u{1B}[22m to staging")
        #expect(SearchResults.line(found, highlight: false, timeZone: utc) == "2027-01-15 08:00  You: Deploy the build to staging")
        #expect(
            SearchResults.line(hit("…the \u{2}reply\u{3}", sender: .bot(name: "Opta"), session: "agent:main:side"), highlight: false, timeZone: utc)
                == "2027-01-15 08:00  [agent:main:side] Opta: …the reply")
    }

    @Test func escapeSequencesInAMessageAreShownAsTextAndLinesStayLines() {
        let line = SearchResults.excerpt("a \u{1B}[2J \u{2}word\u{3}\nnext", highlight: false)
        #expect(line == "a ^[[2J word next")
    }

    @Test func aHitInItsConversationIsMarkedAndEachMessageIsOneLine() {
        let utc = TimeZone(identifier: "UTC")!
        func entry(_ id: String, _ content: String, sender: Sender = .user, session: String? = nil) -> TranscriptEntry {
            var entry = TranscriptEntry(
                id: MessageID(id), sender: sender, content: content, timestamp: Date(timeIntervalSince1970: 1_800_000_000), status: .delivered)
            entry.session = session
            return entry
        }
        let reply = AroundCommand.Reply(
            entries: [
                entry("a", "before\nit"), entry("b", "deploy the build"), entry("c", "You said: deploy the build", sender: .bot(name: "Opta")),
                entry("d", String(repeating: "x", count: 400), session: "agent:main:side"), entry("e", "\u{1B}[2J"),
            ], focus: 1)
        let lines = SearchResults.context(reply, shown: "agent:main:main", timeZone: utc)
        #expect(
            Array(lines.prefix(3)) == [
                "  2027-01-15 08:00  You: before it", "▶ 2027-01-15 08:00  You: deploy the build", "  2027-01-15 08:00  Opta: You said: deploy the build",
            ])
        #expect(lines[3].hasPrefix("  2027-01-15 08:00  [agent:main:side] You: xxx") && lines[3].hasSuffix("x…"), "\(lines[3])")
        #expect(lines[3].count == "  2027-01-15 08:00  [agent:main:side] ".count + AroundCommand.Reply.lineLimit)
        #expect(lines[4] == "  2027-01-15 08:00  You: ^[[2J", "a control sequence is shown as text")
        #expect(!SearchResults.context(AroundCommand.Reply(entries: [entry("a", "x")], focus: nil), timeZone: utc)[0].hasPrefix("▶"))
    }
}
