import Foundation
import ProtocolHandler
import Testing
import TetherSchema
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

    @Test func aMessageInTheGatewaysQueueStaysPendingAsAcceptedAndTheSessionChosenIsKeptPerFlag() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/outbox.sqlite"
        do {
            let outbox = try Outbox(path: path)
            _ = try await outbox.enqueue(id: MessageID("a"), content: "one", session: "side")
            try await outbox.markSent(ids: ["a"], epoch: 1, connection: "c-1")
            let at = Date(timeIntervalSince1970: 1_800_000_000)
            try await outbox.markInGatewayQueue(id: "a", at: at)
            try await outbox.saveChosenSession("side", startedWith: "main")
        }
        let outbox = try Outbox(path: path)
        let pending = try #require(try await outbox.pending().first)
        #expect(pending.status == .accepted && pending.acceptedAt == Date(timeIntervalSince1970: 1_800_000_000) && pending.session == "side")
        #expect(try await outbox.chosenSession(startedWith: "main") == "side")
        #expect(try await outbox.chosenSession(startedWith: "work") == nil, "a changed --session wins over the choice")
        // Written again after the gateway lost its queue: sent again, then delivered.
        try await outbox.markSent(ids: ["a"], epoch: 2, connection: "c-2")
        #expect(try await outbox.message(id: "a")?.status == .sent)
        #expect(try await outbox.markDelivered(id: "a") != nil)
        // The gateway then lost it (a session's first message): back among those to send.
        try await outbox.requeue(id: "a")
        #expect(try await outbox.pending().map(\.status) == [.queued])
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
