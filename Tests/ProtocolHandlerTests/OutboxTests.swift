import Foundation
import ProtocolHandler
import Testing
import TetherTesting
import TetherWire

/// The outbox on a real SQLite file.
@Suite struct OutboxTests {
    @Test func enqueueIsIdempotentAndOrdered() async throws {
        let run = try TestRunDirectory()
        let outbox = try Outbox(path: run.path + "/outbox.sqlite")
        let (first, inserted) = try await outbox.enqueue(id: MessageID("a"), content: "one")
        #expect(inserted)
        #expect(first.sequence == 1)
        let (again, insertedAgain) = try await outbox.enqueue(id: MessageID("a"), content: "one, retried")
        #expect(!insertedAgain)
        #expect(again.content == "one")
        _ = try await outbox.enqueue(id: MessageID("b"), content: "two")
        #expect(try await outbox.pending().map(\.id) == ["a", "b"])
    }

    @Test func deliveredMessagesLeaveThePendingList() async throws {
        let run = try TestRunDirectory()
        let outbox = try Outbox(path: run.path + "/outbox.sqlite")
        _ = try await outbox.enqueue(id: MessageID("a"), content: "one")
        try await outbox.markSent(ids: ["a"], epoch: 3, connection: "c-3")
        let sent = try #require(try await outbox.message(id: "a"))
        #expect(sent.status == .sent)
        #expect(sent.attempts == 1)
        #expect(sent.sentEpoch == 3)
        #expect(sent.sentConnection == "c-3")
        #expect(try await outbox.markDelivered(id: "a") == sent.createdAt)
        #expect(try await outbox.markDelivered(id: "a") == nil, "a second ack changes nothing")
        #expect(try await outbox.pending().isEmpty)
    }

    @Test func survivesReopening() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/outbox.sqlite"
        do {
            let outbox = try Outbox(path: path)
            _ = try await outbox.enqueue(id: MessageID("kept"), content: "still here")
        }
        let reopened = try Outbox(path: path)
        #expect(try await reopened.pending().map(\.content) == ["still here"])
    }
}
