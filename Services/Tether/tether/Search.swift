import ArgumentParser
import Foundation
import FrontEnd
import TetherBus
import TetherSchema
import TetherService

#if canImport(Glibc)
import Glibc
#endif

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Find stored messages by their words, newest first; offline: snapd's own index, not the gateway.",
        discussion: """
            Every word must be in the message, each as a word or the start of one (deploy finds deployed), in any case and \
            with or without accents. Exits 1 when no message holds them.
            """
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Argument(help: "The words to find.")
    var words: [String]

    @Option(help: "The most messages to show (1–\(SearchCommand.pageLimit)).")
    var limit = 20

    @Option(help: "OpenClaw: only this session's messages (its key as the gateway names it); every session's by default.")
    var session: String?

    @Flag(help: "One JSON object: the hits with their entries, and where the next page starts.")
    var json = false

    func validate() throws {
        guard (1...SearchCommand.pageLimit).contains(limit) else { throw ValidationError("--limit must be between 1 and \(SearchCommand.pageLimit)") }
        guard !words.joined().allSatisfy(\.isWhitespace) else { throw ValidationError("give the words to search for") }
    }

    func run() async throws {
        let reply = try await ask(
            SearchCommand.self, .init(words: words.joined(separator: " "), limit: limit, session: session), options, remote, timeout: .seconds(5))
        if json {
            try printJSON(reply)
        } else {
            let highlight = isatty(STDOUT_FILENO) != 0
            for hit in reply.hits { print(SearchResults.line(hit, highlight: highlight)) }
            if reply.nextBefore != nil { print("(more: --limit \(min(SearchCommand.pageLimit, limit * 2)) shows more)") }
        }
        if reply.hits.isEmpty {
            if !json { FileHandle.standardError.write(Data("tether: no stored message holds \(words.joined(separator: " "))\n".utf8)) }
            throw ExitCode(.notDone)
        }
    }
}
