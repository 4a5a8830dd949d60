import Foundation
import TetherBus
import TetherTesting

/// How many times the set's threads were woken for one message: every hand-off from one
/// thread to another (a bus client's socket thread, a task resumed on Swift's pool, an event
/// loop, the database's writer) is a wait ended, counted by Linux as a context switch of the
/// thread that waited. Counted over the whole set while round trips and one streamed reply
/// pass, each program apart; the development gateway and the bench are left out.
extension Bench {
    func measureWakeups(set: ComposedSet, client: BusClient, into table: inout BenchTable) async throws {
        let count = max(50, settings.roundTrips / 2)
        let trips = try await counting(set: set) { _ = try await roundTrips(client: client, count: count, warmup: 0) }
        table.add(
            BenchRow(
                measurement: "thread wakeups a round trip, the whole set (context switches over \(count) round trips, each program)",
                tether: Self.perMessage(trips, count: count), baseline: "—", target: "", met: nil))
        let words = max(1, settings.chunks - 2)
        var chunks = 0
        let streamed = try await counting(set: set) {
            chunks = try await streamReply(client: client, words: words, id: "bench-wakeups").chunks
        }
        table.add(
            BenchRow(
                measurement: "thread wakeups a streamed chunk, the whole set (context switches over a reply of \(chunks) chunks, each program)",
                tether: Self.perMessage(streamed, count: max(1, chunks)), baseline: "—", target: "", met: nil))
    }

    /// The context switches of each program of `set` while `body` runs.
    private func counting(set: ComposedSet, _ body: () async throws -> Void) async throws -> [(name: String, switches: Int)] {
        guard let state = set.state() else { throw BenchError("no compose state") }
        var programs = state.programs.filter { $0.name != "gateway" }.compactMap { program in program.pid.map { (program.name, $0) } }
        programs.append(("compose", state.supervisorPID))
        let before = programs.map { ProcessUsage(pid: $0.1) }
        try await body()
        return zip(programs, before).map { program, first in
            guard let first, let last = ProcessUsage(pid: program.1) else { return (program.0, -1) }
            return (program.0, last.contextSwitches(since: first))
        }
    }

    /// "14.2 in all: protod 4.1, connd 3.0, …", each program's switches divided by `count`.
    private static func perMessage(_ counted: [(name: String, switches: Int)], count: Int) -> String {
        guard !counted.contains(where: { $0.switches < 0 }) else {
            return
                "not counted: \(counted.filter { $0.switches < 0 }.map(\.name).joined(separator: ", ")) could not be read in /proc before and after (a restart meanwhile ends its count)"
        }
        let each = counted.sorted { $0.switches > $1.switches }.map { String(format: "%@ %.1f", $0.name, Double($0.switches) / Double(count)) }
        let total = Double(counted.reduce(0) { $0 + $1.switches }) / Double(count)
        return String(format: "%.1f in all: ", total) + each.joined(separator: ", ")
    }
}
