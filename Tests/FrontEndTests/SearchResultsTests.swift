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
}
