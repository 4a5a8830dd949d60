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

    @Option(help: "Show each message found in its conversation: this many messages before and after it (0–\(AroundCommand.sideLimit)).")
    var context = 0

    @Flag(help: "One JSON object: the hits with their entries, and where the next page starts.")
    var json = false

    func validate() throws {
        guard (1...SearchCommand.pageLimit).contains(limit) else { throw ValidationError("--limit must be between 1 and \(SearchCommand.pageLimit)") }
        guard !words.joined().allSatisfy(\.isWhitespace) else { throw ValidationError("give the words to search for") }
        guard (0...AroundCommand.sideLimit).contains(context) else { throw ValidationError("--context must be between 0 and \(AroundCommand.sideLimit)") }
        guard context == 0 || !json else { throw ValidationError("--context shows lines: it does not go with --json") }
    }

    func run() async throws {
        let bus = try openBus(options, remote)
        let reply: SearchCommand.Reply
        var contexts: [[String]] = []
        do {
            reply = try await bus.request(SearchCommand.self, .init(words: words.joined(separator: " "), limit: limit, session: session), timeout: .seconds(5))
            if context > 0 {
                for hit in reply.hits {
                    let around = try await bus.request(
                        AroundCommand.self, .init(position: hit.position, count: context, session: hit.entry.session), timeout: .seconds(5))
                    contexts.append(SearchResults.context(around))
                }
            }
            await bus.close()
        } catch {
            await bus.close()
            throw commandError(error, options, remote)
        }
        if json {
            try printJSON(reply)
        } else if context > 0 {
            // As grep -C does: the groups apart by a line of their own.
            if !contexts.isEmpty { print(contexts.map { $0.joined(separator: "\n") }.joined(separator: "\n--\n")) }
            if reply.nextBefore != nil { print("(more: --limit \(min(SearchCommand.pageLimit, limit * 2)) shows more)") }
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
