public import TetherWire

/// Puts streamed replies together from their chunks, which may come out of order or twice.
public struct StreamAssembler: Sendable {
    private struct Stream {
        var chunks: [Int: String] = [:]
        var finalIndex: Int?
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
        var stream = streams[chunk.messageID] ?? Stream()
        let isFirst = stream.chunks.isEmpty
        let isDuplicate = stream.chunks[chunk.chunkIndex] != nil
        if !isDuplicate { stream.chunks[chunk.chunkIndex] = chunk.content }
        if chunk.isFinal { stream.finalIndex = chunk.chunkIndex }

        var content = ""
        var index = 0
        while let piece = stream.chunks[index] {
            content += piece
            index += 1
        }
        let isComplete = stream.finalIndex.map { index > $0 } ?? false
        if isComplete {
            streams[chunk.messageID] = nil
            completed.insert(chunk.messageID)
            completedOrder.append(chunk.messageID)
            if completedOrder.count > completedMemory { completed.remove(completedOrder.removeFirst()) }
        } else {
            streams[chunk.messageID] = stream
        }
        return Progress(content: content, isComplete: isComplete, isDuplicate: isDuplicate, isFirst: isFirst)
    }

    /// Forgets an open stream; returns what had arrived of it, chunks in order from index 0.
    public mutating func discard(_ id: MessageID) -> String? {
        guard let stream = streams.removeValue(forKey: id) else { return nil }
        var content = ""
        var index = 0
        while let piece = stream.chunks[index] {
            content += piece
            index += 1
        }
        return content
    }

    /// The streams still open.
    public var openStreams: [MessageID] {
        Array(streams.keys)
    }
}
