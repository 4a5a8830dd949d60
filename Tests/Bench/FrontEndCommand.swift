import ArgumentParser
import Foundation

/// What the terminal UI's rows are measured with.
struct FrontEndOptions: ParsableArguments {
    @Option(help: "Entries stored in the transcript the terminal UI shows while it is measured.")
    var uiEntries = 10_000

    @Option(help: "Characters of the message typed into the terminal UI, a key at a time.")
    var typedCharacters = 1_000

    @Option(help: "Words of the streamed reply whose CPU is measured with the terminal UI attached.")
    var replyWords = 56

    @Option(help: "Bytes pasted into the terminal UI's composer.")
    var pastedBytes = 100_000

    @Option(parsing: .upToNextOption, help: "The terminal UI's rows to measure: idle, typing, reply, paste.")
    var uiRows = FrontEndBench.Row.allCases

    func settings(idleSeconds: Int) -> FrontEndBench.Settings {
        .init(
            idleSeconds: idleSeconds, storedEntries: uiEntries, typedCharacters: typedCharacters, replyWords: replyWords, pastedBytes: pastedBytes,
            rows: uiRows)
    }
}

extension FrontEndBench.Row: ExpressibleByArgument {}

/// The terminal UI's rows alone: `tether` in tmux beside a set of its own.
struct FrontEnd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "front-end", abstract: "Measures only the terminal UI's rows: the set idle with it attached, typing, a reply, a paste.")

    @Option(help: "Seconds over which the idle CPU and wakeups are measured.")
    var idleSeconds = 60

    @OptionGroup var options: FrontEndOptions

    func run() async throws {
        var table = BenchTable()
        try await FrontEndBench(settings: options.settings(idleSeconds: idleSeconds)).measure(into: &table)
        print(table.markdown)
    }
}
