import ArgumentParser
import Foundation
import TetherTesting

/// `tether-bench`: measures the set against baselines taken in the same run and prints one
/// table (Markdown), each figure beside its baseline and its target. Run it from a release
/// build through scripts/bench, which builds one.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-bench",
        abstract: "Measures Tether against baselines measured in the same run and prints one table.")

    @Option(help: "Round trips measured for each of Tether and the direct client.")
    var roundTrips = 500

    @Option(help: "Messages sent through the bus for each of Tether's client and raw libzmq.")
    var busMessages = 100_000

    @Option(help: "Chunks of the streamed reply.")
    var chunks = 20_000

    @Option(help: "Messages in the transcript before the first-frame measurement (each also gets a reply).")
    var transcriptMessages = 5_000

    @Option(help: "Seconds over which the idle CPU of each program is measured.")
    var idleSeconds = 60

    @Option(help: "connd's reconnect preset for the set: default or aggressive.")
    var preset = "default"

    @Option(parsing: .upToNextOption, help: "Lengths in bytes of the replies whose bytes on the bus are measured.")
    var replyBytes = [1_000, 100_000, 1_000_000]

    func run() async throws {
        let bench = Bench(
            settings: .init(
                roundTrips: roundTrips, busMessages: busMessages, chunks: chunks, transcriptMessages: transcriptMessages,
                idleSeconds: idleSeconds, preset: preset, replyBytes: replyBytes))
        let table = try await bench.run()
        print(table.markdown)
        if table.rows.contains(where: { $0.met == false }) {
            FileHandle.standardError.write(Data("bench: some figures miss their targets (marked \"missed\")\n".utf8))
        }
    }
}
