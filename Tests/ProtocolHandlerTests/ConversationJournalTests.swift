import Foundation
import ProtocolHandler
import Testing
import TetherSchema
import TetherTesting
import TetherWire

@Suite struct ConversationJournalTests {
    private func entry(_ index: Int) -> TranscriptEntry {
        TranscriptEntry(
            id: MessageID("m\(index)"), sender: .user, content: "message \(index)", timestamp: Date(timeIntervalSince1970: 1_700_000_000), status: .queued)
    }

    @Test func changesAreNumberedInOrderAndReadBackInPages() throws {
        let run = try TestRunDirectory()
        let journal = try ConversationJournal(path: run.path + "/conversation.sqlite")
        let recorded = try journal.record(entry(1))
        #expect(recorded.revision == 1)
        let delivery = try journal.record(DeliveryUpdate(id: MessageID("m1"), status: .sent))
        #expect(delivery.revision == 2)
        let reply = try journal.changes(after: 0, limit: 10)
        #expect(reply.changes.map(\.revision) == [1, 2])
        #expect(reply.changes[0].entry == recorded)
        #expect(reply.changes[1].delivery == delivery)
        #expect(reply.oldest == 1 && reply.latest == 2)
        #expect(try journal.changes(after: 1, limit: 10).changes.map(\.revision) == [2])
        #expect(try journal.changes(after: 2, limit: 10).changes.isEmpty)
    }

    @Test func theNameAndRevisionsOutliveTheProcessAndANewFileGetsANewName() throws {
        let run = try TestRunDirectory()
        let path = run.path + "/conversation.sqlite"
        let name: String
        do {
            let journal = try ConversationJournal(path: path)
            name = journal.name
            _ = try journal.record(entry(1))
        }
        let reopened = try ConversationJournal(path: path)
        #expect(reopened.name == name)
        #expect(try reopened.record(entry(2)).revision == 2)
        let other = try ConversationJournal(path: run.path + "/other.sqlite")
        #expect(other.name != name)
    }

    @Test func onlyTheNewestChangesAreKept() throws {
        let run = try TestRunDirectory()
        let journal = try ConversationJournal(path: run.path + "/conversation.sqlite", capacity: 100)
        for index in 1...250 { _ = try journal.record(entry(index)) }
        let reply = try journal.changes(after: 0, limit: 1000)
        #expect(reply.latest == 250)
        #expect(reply.oldest > 100 && reply.oldest <= 151, "oldest kept \(reply.oldest)")
        #expect(reply.changes.first?.revision == reply.oldest)
    }
}
