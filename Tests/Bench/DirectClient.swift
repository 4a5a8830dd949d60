import Foundation
import HTTPTypes
import Logging
import Synchronization
import TetherWire
import WSClient

/// The baseline for the gateway rows: one process with one WebSocket to the gateway,
/// writing chat messages itself and reading the acknowledgements, no bus and no outbox.
struct DirectClient {
    let url: String
    let token: String
    private let logger = Logger(label: "bench-direct", factory: { _ in SwiftLogNoOpLogHandler() })

    private var configuration: WebSocketClientConfiguration {
        var headers = HTTPFields()
        headers[.authorization] = "Bearer \(token)"
        return WebSocketClientConfiguration(maxFrameSize: 1 << 20, additionalHeaders: headers)
    }

    /// The time from writing a chat message to reading its acknowledgement, `count` times
    /// after `warmup` unmeasured ones, one at a time over one connection.
    func roundTrips(count: Int, warmup: Int) async throws -> Samples {
        let measured = Mutex(Samples())
        let finished = Mutex(false)
        try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
            let codec = WireCodec()
            var frames = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
            for index in 0..<(warmup + count) {
                let id = MessageID("bench-direct-\(UUID().uuidString.lowercased())")
                let chat = ChatMessage(id: id, content: "direct \(index)", sender: .user, timestamp: Date(), status: .pending)
                let text = String(decoding: try codec.encode(chatMessage: chat, sequence: index + 1), as: UTF8.self)
                let start = ContinuousClock.now
                try await outbound.write(.text(text))
                acknowledged: while let frame = try await frames.next() {
                    guard case .text(let text) = frame, case .messageAck(let ack) = try? codec.decode(text) else { continue }
                    if ack.payload.messageID == id { break acknowledged }
                }
                if index >= warmup { measured.withLock { $0.add(start.duration(to: .now)) } }
            }
            finished.withLock { $0 = true }
        }
        guard finished.withLock({ $0 }) else { throw BenchError("the direct client's connection ended before its round trips") }
        return measured.withLock { $0 }
    }

    /// Sends a message of `words` words and reads the streamed reply to its last chunk, decoding
    /// each frame: the chunks a second from the first to the last.
    func streamRate(words: Int) async throws -> Double {
        let rate = Mutex<Double?>(nil)
        try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
            let codec = WireCodec()
            var frames = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
            let id = MessageID("bench-direct-stream-\(UUID().uuidString.lowercased())")
            let content = Array(repeating: "w", count: words).joined(separator: " ")
            let chat = ChatMessage(id: id, content: content, sender: .user, timestamp: Date(), status: .pending)
            try await outbound.write(.text(String(decoding: try codec.encode(chatMessage: chat, sequence: 1), as: UTF8.self)))
            var first: ContinuousClock.Instant?
            var chunks = 0
            while let frame = try await frames.next() {
                guard case .text(let text) = frame, case .streamingChunk(let chunk) = try? codec.decode(text) else { continue }
                first = first ?? .now
                chunks += 1
                if chunk.payload.isFinal {
                    let elapsed = first.map { $0.duration(to: .now) } ?? .zero
                    rate.withLock { $0 = Double(chunks) / elapsed.seconds }
                    return
                }
            }
        }
        guard let measured = rate.withLock({ $0 }) else { throw BenchError("the direct client's connection ended before the reply did") }
        return measured
    }

    /// The time from starting a connection to holding an open WebSocket (TCP connect and
    /// HTTP upgrade), `count` times.
    func handshakes(count: Int) async throws -> Samples {
        let measured = Mutex(Samples())
        for _ in 0..<count {
            let start = ContinuousClock.now
            try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { _, _, _ in
                measured.withLock { $0.add(start.duration(to: .now)) }
            }
        }
        return measured.withLock { $0 }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
