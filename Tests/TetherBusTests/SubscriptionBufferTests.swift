import Foundation
import Synchronization
import Testing
import TetherSchema

@testable import TetherBus

/// A subscription's messages between the socket thread and its reader: order, the limit, and
/// how it ends from either side, without sockets.
@Suite struct SubscriptionBufferTests {
    private static func message(_ sequence: UInt64) -> BusMessage {
        BusMessage(topic: "conv.message", header: BusHeader(source: "test", sequence: sequence), body: Data("{}".utf8))
    }

    /// Counts the ends the buffer reports.
    private final class Ends: Sendable {
        private let count = Atomic<Int>(0)
        var value: Int { count.load(ordering: .relaxed) }
        func add() { count.add(1, ordering: .relaxed) }
    }

    @Test func messagesQueuedAndHandedToAWaitingReaderArriveInOrder() async {
        let buffer = SubscriptionBuffer(limit: 10) {}
        let subscription = BusSubscription(buffer)
        for sequence: UInt64 in 1...3 { #expect(buffer.deliver(Self.message(sequence)) == .delivered) }
        let reading = Task {
            var sequences: [UInt64] = []
            for await message in subscription {
                sequences.append(message.header.sequence)
                if sequences.count == 5 { break }
            }
            return sequences
        }
        // The reader takes the three queued, then waits: the next two are handed to it.
        while !buffer.hasReaderWaiting { await Task.yield() }
        #expect(buffer.deliver(Self.message(4)) == .delivered)
        while !buffer.hasReaderWaiting { await Task.yield() }
        #expect(buffer.deliver(Self.message(5)) == .delivered)
        #expect(await reading.value == [1, 2, 3, 4, 5])
    }

    @Test func aReaderThatFallsBehindLosesTheOldestBeyondTheLimit() async {
        let buffer = SubscriptionBuffer(limit: 2) {}
        var messages = BusSubscription(buffer).makeAsyncIterator()
        #expect(buffer.deliver(Self.message(1)) == .delivered)
        #expect(buffer.deliver(Self.message(2)) == .delivered)
        #expect(buffer.deliver(Self.message(3)) == .droppedOldest)
        #expect(await messages.next()?.header.sequence == 2)
        #expect(await messages.next()?.header.sequence == 3)
    }

    @Test func finishedTheReaderGetsWhatWasQueuedThenTheEndOnce() async {
        let ends = Ends()
        let buffer = SubscriptionBuffer(limit: 10) { ends.add() }
        var messages = BusSubscription(buffer).makeAsyncIterator()
        buffer.deliver(Self.message(1))
        buffer.finish()
        #expect(ends.value == 1)
        #expect(buffer.deliver(Self.message(2)) == .ended)
        #expect(await messages.next()?.header.sequence == 1)
        #expect(await messages.next() == nil)
        #expect(await messages.next() == nil)
        buffer.finish()
        #expect(ends.value == 1, "ended once")
    }

    @Test func aWaitingReaderIsToldTheEnd() async {
        let buffer = SubscriptionBuffer(limit: 10) {}
        let subscription = BusSubscription(buffer)
        let reading = Task {
            var messages = subscription.makeAsyncIterator()
            return await messages.next()
        }
        while !buffer.hasReaderWaiting { await Task.yield() }
        buffer.finish()
        #expect(await reading.value == nil)
    }

    @Test func aCancelledReaderEndsTheSubscription() async {
        let ends = Ends()
        let buffer = SubscriptionBuffer(limit: 10) { ends.add() }
        let subscription = BusSubscription(buffer)
        let reading = Task {
            var messages = subscription.makeAsyncIterator()
            return await messages.next()
        }
        while !buffer.hasReaderWaiting { await Task.yield() }
        reading.cancel()
        #expect(await reading.value == nil)
        #expect(ends.value == 1)
        #expect(buffer.deliver(Self.message(1)) == .ended, "nothing is kept for a reader that stopped")
    }

    @Test func aSubscriptionDroppedUnreadEndsAndLetsGoOfItsMessages() {
        let ends = Ends()
        let buffer = SubscriptionBuffer(limit: 10) { ends.add() }
        do {
            let subscription = BusSubscription(buffer)
            buffer.deliver(Self.message(1))
            withExtendedLifetime(subscription) {}
        }
        #expect(ends.value == 1)
        #expect(buffer.deliver(Self.message(2)) == .ended)
    }
}
