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
        try await store.apply(entry("a", .queued))
        try await store.apply(DeliveryUpdate(id: MessageID("a"), status: .delivered))
        // A late "sent" arrives after the ack.
        try await store.apply(DeliveryUpdate(id: MessageID("a"), status: .sent))
        try await store.apply(entry("a", .queued))
        #expect(try await store.latest(limit: 10).entries.map(\.status) == [.delivered])
    }

    @Test func aMessageDeliveredWithWordsOfItsOwnKeepsThem() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        try await store.apply(entry("a", .queued))
        try await store.apply(DeliveryUpdate(id: MessageID("a"), status: .accepted, detail: "given to the reply in progress to steer it"))
        #expect(try await store.latest(limit: 10).entries.first?.detail == nil, "only a delivered message's words are kept")
        try await store.apply(DeliveryUpdate(id: MessageID("a"), status: .delivered, detail: "steered into the reply in progress"))
        try await store.apply(entry("a", .delivered))
        let stored = try #require(try await store.latest(limit: 10).entries.first)
        #expect(stored.detail == "steered into the reply in progress")
        #expect(stored.deliveryMark == "✓✓ steered into the reply in progress")
    }

    @Test func eachSessionHasItsTranscriptAndEntriesNamingNoneAreInEvery() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        var older = entry("old", .delivered, content: "before sessions were kept")
        older.session = nil
        try await store.apply(older)
        for index in 0..<4 {
            var main = entry("m\(index)", .delivered, content: "main \(index)")
            main.session = "agent:main:main"
            try await store.apply(main)
            var side = entry("s\(index)", .delivered, content: "side \(index)")
            side.session = "agent:main:side"
            try await store.apply(side)
        }
        let side = try await store.latest(limit: 3, session: "agent:main:side")
        #expect(side.entries.map(\.content) == ["side 1", "side 2", "side 3"])
        #expect(side.entries.allSatisfy { $0.session == "agent:main:side" })
        let rest = try await store.latest(limit: 3, before: side.nextBefore, session: "agent:main:side")
        #expect(rest.entries.map(\.content) == ["before sessions were kept", "side 0"])
        #expect(rest.nextBefore == nil, "another session's entries are not older pages of this one")
        #expect(try await store.latest(limit: 100).entries.count == 9, "without a session: every entry")
        // A later change of an entry that does not name its session keeps the one it had.
        try await store.apply(entry("s3", .delivered, content: "side 3, edited"))
        #expect(try await store.latest(limit: 1, session: "agent:main:side").entries.first?.session == "agent:main:side")
        #expect(try await store.conversation() == nil)
        #expect(try await store.save(ConversationSession(dialect: .openclaw, sessionKey: "agent:main:side")))
        #expect(try await !store.save(ConversationSession(dialect: .openclaw, sessionKey: "agent:main:side")), "the same again changes nothing")
        #expect(try await store.conversation()?.sessionKey == "agent:main:side")
    }

    @Test func latestKeepsOrderAndLimit() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        for index in 0..<5 {
            try await store.apply(entry("m\(index)", .received, sender: .bot(name: "Opta"), content: "reply \(index)"))
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

    @Test func revisionsDecideAndTheAppliedRevisionOnlyMovesInOrder() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        var first = entry("a", .queued)
        first.revision = 1
        let applied1 = try await store.apply(first)
        #expect(!applied1.gap && applied1.compacted == 0)
        // Revision 3 arrives before 2: applied, but a gap; the applied revision stays at 1.
        let applied = try await store.apply(DeliveryUpdate(id: MessageID("a"), status: .delivered, revision: 3))
        #expect(applied.gap)
        #expect(try await store.followed().revision == 1)
        // Revision 2 (sent), older than the stored change, changes nothing.
        try await store.apply(DeliveryUpdate(id: MessageID("a"), status: .sent, revision: 2))
        #expect(try await store.latest(limit: 10).entries.map(\.status) == [.delivered])
        // The journal fills the gap: every change up to 3 is applied.
        let changes = [
            ConversationChange(revision: 2, delivery: DeliveryUpdate(id: MessageID("a"), status: .sent, revision: 2)),
            ConversationChange(revision: 3, delivery: DeliveryUpdate(id: MessageID("a"), status: .delivered, revision: 3)),
        ]
        _ = try await store.apply(journaled: changes, from: "journal-1")
        let followed = try await store.followed()
        #expect(followed.journal == "journal-1")
        #expect(followed.revision == 3)
        let reply = try await store.latest(limit: 10)
        #expect(reply.revision == 3)
        #expect(reply.entries.map(\.status) == [.delivered])
        // A new journal: followed from 0, and the old revisions no longer shadow new changes.
        try await store.restartFollowing("journal-2")
        #expect(try await store.followed().revision == 0)
        var reply2 = entry("b", .received, sender: .bot(name: "Opta"), content: "hello")
        reply2.revision = 1
        #expect(try await store.apply(reply2).gap == false)
        #expect(try await store.followed().revision == 1)
    }

    @Test func theOldestEntriesAreRemovedBeyondTheCap() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite", maximumEntries: 100)
        var removed = 0
        for index in 0..<250 {
            removed += try await store.apply(entry("m\(index)", .received, sender: .bot(name: "Opta"), content: "reply \(index)")).compacted
        }
        let count = try await store.count()
        #expect((100...110).contains(count), "\(count) entries kept with a cap of 100")
        #expect(removed == 250 - count)
        let newest = try await store.latest(limit: 1000)
        #expect(newest.entries.last?.content == "reply 249")
        #expect(newest.entries.first?.content == "reply \(250 - count)")
        #expect(newest.nextBefore == nil)
    }

    @Test func displaySnapshotsAndIdentitySurviveReopening() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/snapd.sqlite"
        let display = DisplaySnapshot(
            frontEnd: "tether", screen: ["You: hi", "Opta: hello — 你好"], scrollOffset: 3, draft: "half a thought", history: ["hi"],
            savedAt: Date(timeIntervalSince1970: 1_700_000_000))
        let identity = ConnectionIdentity(url: "ws://gateway/ws", authMethod: "bearer-token", keyID: "file:/run/token")
        do {
            let store = try TranscriptStore(path: path)
            try await store.save(display)
            #expect(try await store.save(identity))
            #expect(try await store.save(identity) == false, "the same identity again is not a change")
        }
        let reopened = try TranscriptStore(path: path)
        #expect(try await reopened.display(for: "tether") == display)
        #expect(try await reopened.display(for: "other") == nil)
        #expect(try await reopened.identity() == identity)
    }

    @Test func aReplyStreamingIsKeptUntilItIsWhole() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        let id = MessageID("r")
        try await store.apply(StreamProgress(id: id, chunkIndex: 1, chunk: "lo", content: "Hello", isFinal: false))
        try await store.apply(StreamProgress(id: id, chunkIndex: 0, chunk: "Hel", content: "Hel", isFinal: false))
        #expect(try await store.streams().map(\.content) == ["Hello"], "an older chunk changes nothing")
        try await store.apply(entry("r", .received, sender: .bot(name: "Opta"), content: "Hello there"))
        #expect(try await store.streams().isEmpty)
        try await store.apply(StreamProgress(id: id, chunkIndex: 2, chunk: " there", content: "Hello there", isFinal: true))
        #expect(try await store.streams().isEmpty, "a chunk after the whole reply does not bring the stream back")
    }
}
