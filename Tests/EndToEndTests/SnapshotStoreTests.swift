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
        let restarted = await set.awaitRestart(of: "snapd", replacing: snapd)
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

    @Test func frontEndStartedAfterTenThousandMessagesDrawsThemInItsFirstFrame() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "snapd-test", runDirectory: set.run.runDirectory, logger: Logger(label: "snapd-test"))
        _ = try await client.subscribe(to: [Topic.conversationMessage.name], confirm: true)
        let count = 10_000
        let written = ContinuousClock.now
        for index in 1...count {
            try client.publish(
                TranscriptEntry(id: MessageID("m-\(index)"), sender: .bot(name: "Opta"), content: "entry \(index)", timestamp: Date(), status: .received),
                on: .conversationMessage)
        }
        let stored = await eventually(timeout: .seconds(60)) {
            (try? await client.request(TranscriptCommand.self, .init(limit: 1)).entries.first?.id.value) == "m-\(count)"
        }
        #expect(stored, "snapd did not store \(count) entries")
        print("snapd stored \(count) entries in \(written.duration(to: .now))")

        let started = ContinuousClock.now
        let watch = try ChildProcess(
            Programs.path("tether"), ["watch", "--history", "\(count)", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "watch")
        defer { watch.stop() }
        let drawn = await eventually(timeout: .seconds(30)) { watch.standardOutput.contains("Opta: entry \(count)\n") }
        let firstFrame = started.duration(to: .now)
        #expect(drawn, "the stored transcript was not drawn")
        let lines = watch.standardOutput.split(separator: "\n")
        #expect(lines.count >= count)
        #expect(lines.first?.hasSuffix("Opta: entry 1") == true)
        print("a front end started after \(count) messages drew them all \(firstFrame) after it started")
        await client.close()
    }
}
