import Foundation
import Logging
import TetherBus
import TetherSchema
import TetherWire

/// Tether's side of the bus rows: two `BusClient`s in one process, one publishing and one
/// subscribed, through the proxy of a run directory.
enum BusLatency {
    /// The body of the bus rows, `{"index":N}`, written and read directly, as the bodies on
    /// the bus's hot paths are (each frame to and from the gateway): the rows measure the bus,
    /// not Foundation's coders.
    struct Tick: DirectJSONBody {
        var index: Int

        func jsonBytes() -> [UInt8] {
            var bytes = Array(#"{"index":"#.utf8)
            DirectJSON.appendDecimal(Int64(index), to: &bytes)
            bytes.append(UInt8(ascii: "}"))
            return bytes
        }

        init(index: Int) {
            self.index = index
        }

        init(jsonBytes bytes: UnsafeRawBufferPointer) throws {
            var reader = DirectJSON.Reader(bytes: bytes.assumingMemoryBound(to: UInt8.self))
            var index: Int?
            let read = DirectJSON.Reader.object(&reader) { key, reader in
                guard DirectJSON.isKey(key, "index"), index == nil, let value = reader.integer() else { return false }
                index = Int(value)
                return true
            }
            guard read, reader.atEnd, let index else {
                self = try BusSchema.decoder.decode(Tick.self, from: Data(bytes))
                return
            }
            self.index = index
        }
    }

    /// The same body through Foundation's JSONEncoder and JSONDecoder, as most bodies go:
    /// for the probe's count of what those cost.
    struct CodableTick: Codable {
        var index: Int
    }

    static let logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })

    /// One message at a time: each published once the one before has arrived; the time each
    /// took, leaving out the first `warmup`. With `foundationCoders`, the body goes through
    /// Foundation's JSONEncoder and JSONDecoder.
    static func measure(runDirectory: RunDirectory, count: Int, warmup: Int, foundationCoders: Bool = false) async throws -> Samples {
        let (publisher, subscriber) = try clients(runDirectory)
        let subscription = try await subscriber.subscribe(to: ["bench.latency"], confirm: true)
        try await awaitPresence(of: "bench.latency", at: publisher)
        var samples = Samples()
        var messages = subscription.makeAsyncIterator()
        for index in 0..<(count + warmup) {
            let start = ContinuousClock.now
            if foundationCoders {
                try publisher.publish(CodableTick(index: index), on: "bench.latency")
            } else {
                try publisher.publish(Tick(index: index), on: "bench.latency")
            }
            while true {
                guard let message = await messages.next() else { throw BenchError("the bus subscription ended") }
                let received = foundationCoders ? (try? message.decode(CodableTick.self))?.index : (try? message.decode(Tick.self))?.index
                if received == index { break }
            }
            if index >= warmup { samples.add(start.duration(to: .now)) }
        }
        await publisher.close()
        await subscriber.close()
        return samples
    }

    /// A publisher and a subscriber client on the proxy of `runDirectory`.
    static func clients(_ runDirectory: RunDirectory) throws -> (publisher: BusClient, subscriber: BusClient) {
        (
            try BusClient(source: "bench-publisher", runDirectory: runDirectory, logger: logger),
            try BusClient(source: "bench-subscriber", runDirectory: runDirectory, logger: logger)
        )
    }

    /// Once a subscription to `topic` has reached `client` through the proxy.
    static func awaitPresence(of topic: Topic, at client: BusClient) async throws {
        let presence = try client.subscriberPresence(for: topic)
        try await withDeadline(.seconds(10), "waiting for the subscription to reach the publisher") {
            for await present in presence where present { return }
        }
    }
}
