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

    func run() async throws {
        let bench = Bench(
            settings: .init(
                roundTrips: roundTrips, busMessages: busMessages, probeMessages: probeMessages, chunks: chunks, pacedChunks: pacedChunks,
                transcriptEntries: transcriptEntries, frontEnds: frontEnds, idleSeconds: idleSeconds, preset: preset, replyBytes: replyBytes))
        var table = try await bench.run()
        try await FrontEndBench(settings: frontEnd.settings(idleSeconds: idleSeconds)).measure(into: &table)
        try await CatchUpBench(exchanges: exchanges).measure(into: &table)
        print(table.markdown)
        if table.rows.contains(where: { $0.met == false }) {
            FileHandle.standardError.write(Data("bench: some figures miss their targets (marked \"missed\")\n".utf8))
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
