import Foundation
import Testing
import TetherTesting

/// The bench itself, with small counts: every row is there and holds figures. What the
/// figures say is for `scripts/bench` in a release build; nothing here asserts a speed.
@Suite(.serialized) struct BenchTests {
    @Test func aShortBenchRunPrintsEveryRowWhole() throws {
        let run = try TestRunDirectory()
        let bench = try ChildProcess(
            Programs.path("tether-bench"),
            [
                "--round-trips", "20", "--bus-messages", "2000", "--probe-messages", "50", "--chunks", "300", "--paced-chunks", "40", "--transcript-entries",
                "100", "1000",
                "--front-ends", "1", "3", "--idle-seconds", "2", "--reply-bytes", "1000", "20000",
            ],
            outputDirectory: run.path, name: "bench")
        let status = try bench.waitForExit(timeout: .seconds(480))
        #expect(status == 0, "tether-bench failed: \(bench.standardError.suffix(2000))")
        print(bench.standardOutput)
        let rows = bench.standardOutput.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| measurement") }
        let measurements = rows.map { $0.split(separator: "|", omittingEmptySubsequences: false)[1].trimmingCharacters(in: .whitespaces) }
        for expected in [
            "bus: publisher to subscriber", "bus: messages per second", "bus: instructions per message", "chat round trip: send",
            "chat round trip, where the time goes", "chat round trip with front ends attached", "streamed chunks, gateway",
            "streamed chunks at the development bot's pace", "reconnect after a gateway restart",
            "reconnect after the link comes back", "first frame", "search: the first page", "`tether status`", "idle 2 s: netmon", "idle 2 s: protod",
            "idle 2 s: connd",
            "idle: the whole set's proportional memory", "a streamed reply's conv.stream bytes",
        ] {
            #expect(measurements.contains { $0.hasPrefix(expected) }, "no row \"\(expected)\" in:\n\(bench.standardOutput)")
        }
        for row in rows {
            let cells = row.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(cells.count == 7, "a row without its five columns: \(row)")
            #expect(cells.count > 2 && !cells[2].isEmpty && !cells[2].contains("nan") && !cells[2].contains("—"), "a row without Tether's figure: \(row)")
        }
    }
}
