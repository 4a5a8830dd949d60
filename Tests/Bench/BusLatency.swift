import Logging
import TetherBus
import TetherSchema

/// Tether's side of the bus rows: two `BusClient`s in one process, one publishing and one
/// subscribed, through the proxy of a run directory.
enum BusLatency {
    struct Tick: Codable {
        var index: Int
    }

    static let logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })

    /// One message at a time: each published once the one before has arrived; the time each
    /// took, leaving out the first `warmup`.
    static func measure(runDirectory: RunDirectory, count: Int, warmup: Int) async throws -> Samples {
        let (publisher, subscriber) = try clients(runDirectory)
        let subscription = try await subscriber.subscribe(to: ["bench.latency"], confirm: true)
        try await awaitPresence(of: "bench.latency", at: publisher)
        var samples = Samples()
        var messages = subscription.makeAsyncIterator()
        for index in 0..<(count + warmup) {
            let start = ContinuousClock.now
            try publisher.publish(Tick(index: index), on: "bench.latency")
            while true {
                guard let message = await messages.next() else { throw BenchError("the bus subscription ended") }
                if let tick = try? message.decode(Tick.self), tick.index == index { break }
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
