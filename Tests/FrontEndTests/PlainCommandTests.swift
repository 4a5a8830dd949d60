import Foundation
import FrontEnd
import Testing
import TetherSchema
import TetherService
import TetherWire

/// What `--plain` prints for the slash commands Tether handles itself: a line each, lists
/// indented under their title.
@Suite struct PlainCommandTests {
    @Test func listsWordsAndHitsArePrintedALineEach() {
        #expect(PlainSession.lines(for: .list(title: "The gateway's agents", lines: ["main", "ops"])) == ["The gateway's agents:", "  main", "  ops"])
        #expect(PlainSession.lines(for: .words("thinking high set")) == ["thinking high set"])
        #expect(PlainSession.lines(for: .found(SearchCommand.Reply(hits: [], nextBefore: nil), words: "deploy")) == ["No stored message holds deploy."])
        let entry = TranscriptEntry(
            id: MessageID("m1"), sender: .user, content: "deploy the build", timestamp: Date(timeIntervalSince1970: 1_800_000_000), status: .delivered)
        let hit = SearchCommand.Hit(position: 7, entry: entry, excerpt: "\(SearchCommand.matchStart)deploy\(SearchCommand.matchEnd) the build")
        let found = PlainSession.lines(for: .found(SearchCommand.Reply(hits: [hit], nextBefore: 7), words: "deploy"))
        #expect(found == ["Found deploy, newest first (the newest 1: tether search lists more):", "  " + hit.plainLine], "\(found)")
        #expect(!found[1].contains(SearchCommand.matchStart), "the marks around a match are not printed")
    }

    @Test func helpListsEveryCommandAndWhatOtherLinesDo() {
        let help = PlainSession.helpLines
        #expect(help.first == "Tether handles these itself:" && help.last == "  " + SlashCommands.otherLines)
        #expect(help.count == SlashCommands.standard.help.count + 1)
        #expect(help.contains { $0.hasPrefix("  /search WORDS") })
    }
}
