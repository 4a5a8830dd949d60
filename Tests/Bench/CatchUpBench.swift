import ArgumentParser
import Foundation
import Logging
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// What a reconnect fetches after a long conversation: the `chat.history` frames and bytes
/// both ways, read from the bus (`wire.out`, `wire.in`), against the development gateway as
/// the 2026.4 release (a page of the last entries) and as today's (what came after the cursor).
struct CatchUpBench {
    var exchanges: Int
    private let logger = Logger(label: "bench-catch-up", factory: { _ in SwiftLogNoOpLogHandler() })

    init(exchanges: Int) { self.exchanges = exchanges }

    struct Traffic {
        var frames = 0
        var bytesOut = 0
        var answers = 0
        var bytesIn = 0
        var kinds: [String] = []
        /// The lookups while the exchanges went on (the first, and the cursor's renewals).
        var during: Traffic? {
            get { earlier.first }
            set { earlier = newValue.map { [$0] } ?? [] }
        }
        private var earlier: [Traffic] = []

        var words: String {
            let reconnect =
                "\(frames) request(s), \(formatBytes(bytesOut)) out; \(answers) answer(s), \(formatBytes(bytesIn)) in (\(kinds.joined(separator: ", ")))"
            guard let during else { return reconnect }
            return reconnect + "; during the exchanges: \(during.frames) lookup(s), \(formatBytes(during.bytesOut)) out, \(formatBytes(during.bytesIn)) in"
        }
    }

    func measure(into table: inout BenchTable) async throws {
        let old = try await traffic(release: "2026.4")
        let today = try await traffic(release: "current")
        table.add(
            BenchRow(
                measurement:
                    "a reconnect after \(exchanges) exchanges: chat.history both ways, from the frames on the bus (the connection lost with nothing missed)",
                tether: "today's gateway: \(today.words)", baseline: "the 2026.4 release: \(old.words)", target: "only the gap",
                met: today.kinds.allSatisfy { $0.hasPrefix("delta") } && today.bytesIn < old.bytesIn))
    }

    /// The history traffic of one reconnect after `exchanges` exchanges with a gateway of `release`.
    private func traffic(release: String) async throws -> Traffic {
        let set = try await ComposedSet.openClaw(release: release, protocols: "release", environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        let client = try BusClient(source: "bench-catch-up", runDirectory: set.run.runDirectory, logger: logger)
        defer { Task { await client.close() } }
        let out = try await BusRecorder<WireFrame>(bus: client, topic: .wireOutbound)
        let inbound = try await BusRecorder<WireFrame>(bus: client, topic: .wireInbound)
        // In batches of 50: the outbox holds at most 100.
        for batch in stride(from: 1, through: exchanges, by: 50) {
            let last = min(batch + 49, exchanges)
            for index in batch...last {
                _ = try await client.request(SendMessageCommand.self, .init(id: .random(), content: "exchange \(index)"))
            }
            let done = await eventually(timeout: .seconds(120)) { set.openClawTranscript().count { $0.role == "assistant" } >= last }
            guard done else { throw BenchError("\(last) exchanges with \(release) were not answered") }
        }
        // Quiet for longer than protod waits before it renews its cursor.
        try await Task.sleep(for: .seconds(8))
        let before = await (out.entries.count, inbound.entries.count)
        guard let connd = set.pid(of: "connd") else { throw BenchError("connd is not running") }
        kill(connd, SIGKILL)
        guard await set.awaitRestart(of: "connd", replacing: connd) else { throw BenchError("connd did not start again") }
        // Until the lookup after it is answered and the set settles.
        func after() async -> Traffic {
            await Self.measured(Array(out.entries.map(\.value)[before.0...]), Array(inbound.entries.map(\.value)[before.1...]))
        }
        _ = await eventually(timeout: .seconds(20)) { await after().answers > 0 }
        try await Task.sleep(for: .seconds(2))
        var traffic = await after()
        traffic.during = await Self.measured(Array(out.entries.map(\.value)[..<before.0]), Array(inbound.entries.map(\.value)[..<before.1]))
        return traffic
    }

    private static func measured(_ out: [WireFrame], _ inbound: [WireFrame]) -> Traffic {
        func object(_ text: String) -> [String: Any]? { try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] }
        var traffic = Traffic()
        var ids: Set<String> = []
        for frame in out {
            guard let request = object(frame.text), request["method"] as? String == "chat.history", let id = request["id"] as? String else { continue }
            ids.insert(id)
            traffic.frames += 1
            traffic.bytesOut += frame.text.utf8.count
        }
        for frame in inbound {
            guard let answer = object(frame.text), let id = answer["id"] as? String, ids.contains(id) else { continue }
            traffic.answers += 1
            traffic.bytesIn += frame.text.utf8.count
            let payload = answer["payload"] as? [String: Any]
            let messages = (payload?["messages"] as? [Any])?.count ?? 0
            traffic.kinds.append("\(payload?["kind"] as? String ?? "page") of \(messages)")
        }
        return traffic
    }
}

/// Only the catch-up row.
struct CatchUpMeasure: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catch-up", abstract: "Measures what a reconnect fetches after a long conversation, as 2026.4 and as today's gateway.")

    @Option(help: "Exchanges before the reconnect.")
    var exchanges = 500

    func run() async throws {
        var table = BenchTable()
        try await CatchUpBench(exchanges: exchanges).measure(into: &table)
        print(table.markdown)
    }
}
