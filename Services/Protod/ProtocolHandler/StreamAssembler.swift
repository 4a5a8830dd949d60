public import TetherWire

/// Puts streamed replies together from their chunks, which may come out of order or twice.
public struct StreamAssembler: Sendable {
    private struct Stream {
        /// The chunks from index 0 with no gap, joined.
        var assembled = ""
        /// How many chunks `assembled` holds: the index of the next one it needs.
        var assembledCount = 0
        /// Chunks that came ahead of a gap.
        var waiting: [Int: String] = [:]
        var finalIndex: Int?
        var isEmpty: Bool { assembledCount == 0 && waiting.isEmpty }

        func has(_ index: Int) -> Bool {
            index < assembledCount || waiting[index] != nil
        }

        /// Appends the waiting chunks that now follow on.
        mutating func absorb() {
            while let piece = waiting.removeValue(forKey: assembledCount) {
                assembled += piece
                assembledCount += 1
            }
        }
    }

    private var streams: [MessageID: Stream] = [:]
    /// Recently completed streams, so a chunk repeated after the end does not open a new one.
    private var completed: Set<MessageID> = []
    private var completedOrder: [MessageID] = []
    private let completedMemory = 256

    public init() {}

    /// The outcome of adding a chunk.
    public struct Progress: Equatable, Sendable {
        /// The reply so far: the chunks from index 0 with no gap, in order.
        public var content: String
        /// The index of the last chunk in `content` (-1 before chunk 0 came).
        public var lastIndex: Int
        /// True once the final chunk and every chunk before it have arrived.
        public var isComplete: Bool
        /// True when this chunk's index had arrived before.
        public var isDuplicate: Bool
        /// True when this chunk started the stream.
        public var isFirst: Bool
    }

    /// Adds a chunk; nil for a chunk of a stream that has already completed.
    public mutating func add(_ chunk: StreamingChunk) -> Progress? {
        guard !completed.contains(chunk.messageID) else { return nil }
        // Taken out while it changes, so that its text is not copied on each append.
        var stream = streams.removeValue(forKey: chunk.messageID) ?? Stream()
        let isFirst = stream.isEmpty
        let isDuplicate = stream.has(chunk.chunkIndex)
        if !isDuplicate {
            stream.waiting[chunk.chunkIndex] = chunk.content
            stream.absorb()
        }
        if chunk.isFinal { stream.finalIndex = chunk.chunkIndex }
        let isComplete = stream.finalIndex.map { stream.assembledCount > $0 } ?? false
        if isComplete {
            remember(chunk.messageID)
        } else {
            streams[chunk.messageID] = stream
        }
        return Progress(
            content: stream.assembled, lastIndex: stream.assembledCount - 1, isComplete: isComplete, isDuplicate: isDuplicate, isFirst: isFirst)
    }

    /// Ends an open stream as it is (cut off); returns what had arrived of it, chunks in
    /// order from index 0. Chunks of it that come later are ignored.
    public mutating func discard(_ id: MessageID) -> String? {
        let assembled = streams.removeValue(forKey: id)?.assembled
        remember(id)
        return assembled
    }

    /// Remembers an ended stream, so that a chunk repeated after its end does not open a new one.
    private mutating func remember(_ id: MessageID) {
        guard completed.insert(id).inserted else { return }
        completedOrder.append(id)
        if completedOrder.count > completedMemory { completed.remove(completedOrder.removeFirst()) }
    }

    /// An open stream's reply so far and the index of its last chunk in it.
    public func assembled(_ id: MessageID) -> (content: String, lastIndex: Int)? {
        streams[id].map { ($0.assembled, $0.assembledCount - 1) }
    }

    /// The streams still open.
    public var openStreams: [MessageID] {
        Array(streams.keys)
    }
}
