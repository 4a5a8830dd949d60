import ArgumentParser
import Foundation
import TetherBus
import TetherSchema
import TetherTesting

/// `tether-bench`: measures the set against baselines taken in the same run and prints one
/// table (Markdown), each figure beside its baseline and its target. Run it from a release
/// build through scripts/bench, which builds one.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-bench",
        abstract: "Measures Tether against baselines measured in the same run and prints one table.",
        subcommands: [Measure.self, FrontEnd.self, CatchUpMeasure.self, BusProbe.self], defaultSubcommand: Measure.self)
}

/// Every measurement, printed as one table.
struct Measure: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "measure", abstract: "Measures every row and prints the table (what tether-bench does unless told otherwise).")

    @Option(help: "Round trips measured for each of Tether and the direct client.")
    var roundTrips = 500

    @Option(help: "Messages sent through the bus for each of Tether's client and raw libzmq.")
    var busMessages = 100_000

    @Option(help: "Messages sent one at a time through the bus under valgrind, for the instruction counts (and twice as many).")
    var probeMessages = 2_000

    @Option(help: "Chunks of the streamed reply.")
    var chunks = 20_000

    @Option(help: "Chunks of the reply streamed at the development bot's own pace, for the chunk latency.")
    var pacedChunks = 300

    @Option(parsing: .upToNextOption, help: "Sizes of the stored transcript (entries) at which the first frame is measured.")
    var transcriptEntries = [10_000, 100_000, 1_000_000]

    @Option(parsing: .upToNextOption, help: "Numbers of front ends attached while the round trip is measured.")
    var frontEnds = [1, 10, 50]

    @Option(help: "Seconds over which the idle CPU of each program is measured.")
    var idleSeconds = 60

    @Option(help: "connd's reconnect preset for the set: default or aggressive.")
    var preset = "default"

    @Option(parsing: .upToNextOption, help: "Lengths in bytes of the replies whose bytes on the bus are measured.")
    var replyBytes = [1_000, 100_000, 900_000]

    @Option(help: "Exchanges before the reconnect whose history traffic is measured.")
    var exchanges = 500

    @OptionGroup var frontEnd: FrontEndOptions

    @Option(
        parsing: .upToNextOption,
        help: "Only these parts: \((Bench.Part.allCases.map(\.rawValue) + Self.otherParts).joined(separator: ", ")) (default: all).")
    var only: [String] = []

    /// The parts measured by benches of their own.
    static let otherParts = ["terminal-ui", "catch-up"]

    func validate() throws {
        let known = Set(Bench.Part.allCases.map(\.rawValue) + Self.otherParts)
        if let unknown = only.first(where: { !known.contains($0) }) {
            throw ValidationError("no part named '\(unknown)'; the parts are \(known.sorted().joined(separator: ", "))")
        }
    }

    func run() async throws {
        let bench = Bench(
            settings: .init(
                roundTrips: roundTrips, busMessages: busMessages, probeMessages: probeMessages, chunks: chunks, pacedChunks: pacedChunks,
                transcriptEntries: transcriptEntries, frontEnds: frontEnds, idleSeconds: idleSeconds, preset: preset, replyBytes: replyBytes))
        func wanted(_ part: String) -> Bool { only.isEmpty || only.contains(part) }
        var table = BenchTable()
        let parts = Set(Bench.Part.allCases.filter { wanted($0.rawValue) })
        if !parts.isEmpty { await bench.run(parts: parts, into: &table) }
        if wanted("terminal-ui") {
            await bench.measuring("the terminal UI's rows", into: &table) {
                try await FrontEndBench(settings: frontEnd.settings(idleSeconds: idleSeconds)).measure(into: &$0)
            }
        }
        if wanted("catch-up") {
            await bench.measuring("a reconnect after \(exchanges) exchanges: chat.history both ways", into: &table) {
                try await CatchUpBench(exchanges: exchanges).measure(into: &$0)
            }
        }
        print(table.markdown)
        if table.rows.contains(where: { $0.met == false }) {
            FileHandle.standardError.write(Data("bench: some figures miss their targets (marked \"missed\")\n".utf8))
        }
        // Everything is printed first: a row that could not be measured fails the run.
        if !table.unmeasured.isEmpty {
            FileHandle.standardError.write(Data("bench: \(table.unmeasured.count) row(s) not measured (marked \"not measured\", with the reason)\n".utf8))
            throw ExitCode(2)
        }
    }
}

/// Messages one at a time through a running proxy and nothing else: the bench runs this
/// under valgrind to count the instructions a message costs publisher and subscriber.
struct BusProbe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bus-probe", abstract: "Sends messages one at a time through the proxy of a run directory.", shouldDisplay: false)

    @Option(help: "The run directory of a running tether-bus.")
    var runDir: String

    @Option(help: "Messages to send.")
    var messages: Int

    @Flag(help: "Plain libzmq sockets instead of Tether's bus client.")
    var raw = false

    @Flag(help: "The body through Foundation's JSONEncoder and JSONDecoder instead of written and read directly.")
    var foundationCoders = false

    func run() async throws {
        let runDirectory = RunDirectory(path: runDir)
        if raw {
            _ = try await RawBus.latency(
                busIn: try runDirectory.endpoint(Endpoints.busIn), busOut: try runDirectory.endpoint(Endpoints.busOut), count: messages, warmup: 0)
        } else {
            _ = try await BusLatency.measure(runDirectory: runDirectory, count: messages, warmup: 0, foundationCoders: foundationCoders)
        }
    }
}
