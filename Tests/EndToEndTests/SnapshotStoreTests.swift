import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// tether-snapd's transcript through real processes and a real SQLite file.
@Suite(.serialized) struct SnapshotStoreTests {
    @Test func snapdKilledWhileWritingLosesNothingCommitted() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "snapd-test", runDirectory: set.run.runDirectory, logger: Logger(label: "snapd-test"))
        // Once a confirmed subscription has made the round trip, this publisher knows snapd's subscriptions.
        _ = try await client.subscribe(to: [Topic.conversationMessage.name], confirm: true)
        // A first batch, all recorded.
        let first = (1...200).map { index in
            TranscriptEntry(id: MessageID("first-\(index)"), sender: .bot(name: "Opta"), content: "first \(index)", timestamp: Date(), status: .received)
        }
        for entry in first { try client.publish(entry, on: .conversationMessage) }
        let recorded = await eventually(timeout: .seconds(20)) {
            ((try? await client.request(TranscriptCommand.self, .init(limit: 1000)).entries.count) ?? 0) >= first.count
        }
        #expect(recorded, "snapd did not record the first batch")

        // A second batch, with snapd killed while it writes it.
        let snapd = try #require(set.pid(of: "snapd"))
        for index in 1...500 {
            try client.publish(
                TranscriptEntry(id: MessageID("second-\(index)"), sender: .user, content: "second \(index)", timestamp: Date(), status: .queued),
                on: .conversationMessage)
            if index == 100 { kill(snapd, SIGKILL) }
        }
        let restarted = await eventually(timeout: .seconds(15)) {
            guard let program = set.state()?.programs.first(where: { $0.name == "snapd" }) else { return false }
            return program.pid != snapd && program.ready
        }
        #expect(restarted)
        let entries = try await client.request(TranscriptCommand.self, .init(limit: 2000)).entries
        let ids = Set(entries.map(\.id.value))
        #expect(first.allSatisfy { ids.contains($0.id.value) }, "a committed entry was lost")
        // Entries of the second batch that were committed are whole, in order.
        let second = entries.filter { $0.id.value.hasPrefix("second-") }.map { Int($0.id.value.dropFirst("second-".count))! }
        #expect(second == second.sorted())
        print("snapd killed after \(second.count) of the second batch's 500 entries were committed; all \(first.count) of the first kept")

        // The file itself is sound.
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        check.arguments = ["sqlite3", set.run.path + "/snapd.sqlite", "PRAGMA integrity_check;"]
        let output = Pipe()
        check.standardOutput = output
        if (try? check.run()) != nil {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            check.waitUntilExit()
            #expect(text.trimmingCharacters(in: .whitespacesAndNewlines) == "ok")
        }
        await client.close()
    }
}
