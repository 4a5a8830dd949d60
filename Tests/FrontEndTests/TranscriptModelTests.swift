import Foundation
import FrontEnd
import Testing
import TetherSchema
import TetherWire

@Suite struct TranscriptModelTests {
    private func entry(_ id: String, _ status: DeliveryStatus, revision: Int?, sender: Sender = .user, content: String = "hi") -> TranscriptEntry {
        TranscriptEntry(
            id: MessageID(id), sender: sender, content: content, timestamp: Date(timeIntervalSince1970: 1_700_000_000), status: status,
            revision: revision)
    }

    @Test func changesTheSnapshotHoldsAreDropped() {
        var model = TranscriptModel(snapshot: [entry("a", .delivered, revision: 4)], revision: 5)
        // Published before the snapshot was taken, received after it: already in it.
        #expect(model.apply(DeliveryUpdate(id: MessageID("a"), status: .sent, revision: 3)) == nil)
        #expect(model.apply(entry("b", .queued, revision: 5)) == nil)
        // Newer than the snapshot.
        let added = model.apply(entry("c", .queued, revision: 6))
        #expect(added == .added(entry("c", .queued, revision: 6)))
        #expect(model.apply(DeliveryUpdate(id: MessageID("c"), status: .delivered, revision: 8)) != nil)
        #expect(model.apply(DeliveryUpdate(id: MessageID("c"), status: .sent, revision: 7)) == nil, "older than the change applied")
        #expect(model.entries.map(\.id.value) == ["a", "c"])
        #expect(model.entries.map(\.status) == [.delivered, .delivered])
    }

    @Test func aMessageSteeredIntoTheReplyInProgressIsMarkedSo() {
        var model = TranscriptModel(snapshot: [entry("a", .accepted, revision: 1, content: "also this")], revision: 1)
        _ = model.apply(DeliveryUpdate(id: MessageID("a"), status: .delivered, detail: "steered into the reply in progress", revision: 2))
        let steered = model.entries[0]
        #expect(steered.deliveryMark == "✓✓ steered into the reply in progress")
        _ = model.apply(entry("b", .delivered, revision: 3, content: "plain"))
        #expect(model.entries[1].deliveryMark == "✓✓ delivered")
    }

    @Test func aReplyGrowsInPlaceAndKeepsWhatItAnswers() {
        var model = TranscriptModel(snapshot: [], revision: 0)
        var reply = entry("r", .incomplete, revision: 1, sender: .bot(name: "Opta"), content: "Hel")
        reply.inReplyTo = MessageID("a")
        _ = model.apply(reply)
        let whole = entry("r", .received, revision: 2, sender: .bot(name: "Opta"), content: "Hello")
        guard case .updated(let updated) = model.apply(whole) else {
            Issue.record("the reply was not updated")
            return
        }
        #expect(updated.content == "Hello")
        #expect(updated.inReplyTo == MessageID("a"))
        #expect(model.entries.count == 1)
    }
}
