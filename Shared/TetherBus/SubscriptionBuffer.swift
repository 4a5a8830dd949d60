import Synchronization

/// The messages of one subscription.
///
/// One task reads it at a time, as an `AsyncStream`; it ends when the client closes, and
/// reading stops (unsubscribing) when the task is cancelled or the subscription is dropped.
public struct BusSubscription: AsyncSequence, Sendable {
    public typealias Element = BusMessage

    /// Ends the subscription once no reader holds it any more.
    fileprivate final class Reader: Sendable {
        let buffer: SubscriptionBuffer

        init(_ buffer: SubscriptionBuffer) {
            self.buffer = buffer
        }

        deinit {
            buffer.stopReading()
        }
    }

    fileprivate let reader: Reader

    /// A subscription reading `buffer`, which its owner fills.
    public init(_ buffer: SubscriptionBuffer) {
        reader = Reader(buffer)
    }

    /// Reads the messages in order.
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let reader: Reader

        fileprivate init(reader: Reader) {
            self.reader = reader
        }

        /// The next message; nil once the subscription has ended or the task is cancelled.
        public mutating func next() async -> BusMessage? {
            await reader.buffer.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(reader: reader)
    }
}

/// A subscription's messages on their way from the client's socket thread to the one task
/// reading them. The thread appends each message, or hands it straight to the reader when it
/// waits; the reader takes them in order and suspends only when there are none.
///
/// It does what an `AsyncStream` with `bufferingNewest` does, compiled for ``BusMessage``:
/// the stream's generic code, unspecialized in the concurrency library, looked up type
/// metadata at each step, some 8,600 of the 13,000 instructions a hand-off to a waiting
/// task cost (callgrind, a thread handing values to a task through an eventfd and each).
public final class SubscriptionBuffer: Sendable {
    /// What became of a message handed to ``deliver(_:)``.
    public enum Delivery: Equatable {
        /// Queued, or taken by the waiting reader.
        case delivered
        /// Queued, and the oldest message waiting was dropped to make room.
        case droppedOldest
        /// Not taken: the subscription has ended.
        case ended
    }

    private struct State: ~Copyable {
        /// The messages waiting, from `head` on (those before it were taken).
        var waiting: [BusMessage] = []
        var head = 0
        /// The reader, while it waits for a message.
        var reader: UnsafeContinuation<BusMessage?, Never>?
        /// No more messages come: the reader gets those waiting, then nil.
        var finished = false
        /// The reader stopped: nothing is kept or read any more.
        var stopped = false
        /// Whether `onEnd` has run.
        var ended = false

        var count: Int { waiting.count - head }

        mutating func takeFirst() -> BusMessage? {
            guard head < waiting.count else { return nil }
            let message = waiting[head]
            head += 1
            if head == waiting.count {
                waiting.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 4096 && head * 2 >= waiting.count {
                // What was taken goes once it is most of the array: each message moves once at most.
                waiting.removeFirst(head)
                head = 0
            }
            return message
        }

        /// Marks the end; true the first time, when `onEnd` is to run.
        mutating func end() -> Bool {
            defer { ended = true }
            return !ended
        }
    }

    private let state = Mutex(State())
    private let limit: Int
    private let onEnd: @Sendable () -> Void

    /// - Parameters:
    ///   - limit: the messages kept for a reader that falls behind; beyond it the oldest go.
    ///   - onEnd: called once, when the subscription ends from either side (its owner
    ///     finishes it, or its reader stops).
    public init(limit: Int, onEnd: @escaping @Sendable () -> Void) {
        self.limit = max(1, limit)
        self.onEnd = onEnd
    }

    /// Whether the reader is suspended waiting for a message now: the next one is handed to it.
    var hasReaderWaiting: Bool {
        state.withLock { $0.reader != nil }
    }

    /// Hands `message` to the reader, or queues it.
    @discardableResult
    public func deliver(_ message: BusMessage) -> Delivery {
        let (reader, delivery) = state.withLock { state -> (UnsafeContinuation<BusMessage?, Never>?, Delivery) in
            guard !state.finished && !state.stopped else { return (nil, .ended) }
            if let reader = state.reader {
                state.reader = nil
                return (reader, .delivered)
            }
            var delivery = Delivery.delivered
            if state.count >= limit {
                _ = state.takeFirst()
                delivery = .droppedOldest
            }
            state.waiting.append(message)
            return (nil, delivery)
        }
        reader?.resume(returning: message)
        return delivery
    }

    /// No more messages: the reader gets those waiting, then nil.
    public func finish() {
        let (reader, ending) = state.withLock { state -> (UnsafeContinuation<BusMessage?, Never>?, Bool) in
            state.finished = true
            defer { state.reader = nil }
            return (state.reader, state.end())
        }
        reader?.resume(returning: nil)
        if ending { onEnd() }
    }

    /// The reader stopped (cancelled, or the subscription dropped): what waits is let go.
    func stopReading() {
        let (reader, ending) = state.withLock { state -> (UnsafeContinuation<BusMessage?, Never>?, Bool) in
            state.stopped = true
            state.waiting.removeAll()
            state.head = 0
            defer { state.reader = nil }
            return (state.reader, state.end())
        }
        reader?.resume(returning: nil)
        if ending { onEnd() }
    }

    /// The next message, waiting for one if none is queued; nil once the subscription has
    /// ended (after the messages queued before its owner finished it) or the task is cancelled.
    func next() async -> BusMessage? {
        if !Task.isCancelled, let message = state.withLock({ $0.takeFirst() }) { return message }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (reader: UnsafeContinuation<BusMessage?, Never>) in
                let ready = state.withLock { state -> BusMessage?? in
                    if let message = state.takeFirst() { return .some(message) }
                    if state.finished || state.stopped { return .some(nil) }
                    precondition(state.reader == nil, "two tasks read one bus subscription at once")
                    state.reader = reader
                    return .none
                }
                if let ready { reader.resume(returning: ready) }
            }
        } onCancel: {
            stopReading()
        }
    }
}
