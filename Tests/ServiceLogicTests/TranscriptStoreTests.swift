import Foundation
import SnapshotStore
import Testing
import TetherSchema
import TetherTesting
import TetherWire

@Suite struct TranscriptStoreTests {
    private func entry(_ id: String, _ status: DeliveryStatus, sender: Sender = .user, content: String = "hi") -> TranscriptEntry {
        TranscriptEntry(id: MessageID(id), sender: sender, content: content, timestamp: Date(timeIntervalSince1970: 1_700_000_000), status: status)
    }

    @Test func statusNeverGoesBack() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        try await store.upsert(entry("a", .queued))
        try await store.update(DeliveryUpdate(id: MessageID("a"), status: .delivered))
        // A late "sent" arrives after the ack.
        try await store.update(DeliveryUpdate(id: MessageID("a"), status: .sent))
        try await store.upsert(entry("a", .queued))
        #expect(try await store.latest(limit: 10).entries.map(\.status) == [.delivered])
    }

    @Test func latestKeepsOrderAndLimit() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        for index in 0..<5 {
            try await store.upsert(entry("m\(index)", .received, sender: .bot(name: "Opta"), content: "reply \(index)"))
        }
        let latest = try await store.latest(limit: 2)
        #expect(latest.entries.map(\.content) == ["reply 3", "reply 4"])
        #expect(latest.entries.first?.sender == .bot(name: "Opta"))
        // Pages: the next older one starts where this one ended.
        let older = try await store.latest(limit: 2, before: latest.nextBefore)
        #expect(older.entries.map(\.content) == ["reply 1", "reply 2"])
        let oldest = try await store.latest(limit: 2, before: older.nextBefore)
        #expect(oldest.entries.map(\.content) == ["reply 0"])
        #expect(oldest.nextBefore == nil)
    }
}
