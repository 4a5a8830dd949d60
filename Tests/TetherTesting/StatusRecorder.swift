public import Foundation
public import TetherBus
public import TetherSchema

/// Records every value of a topic as it arrives, with the time it arrived.
public actor BusRecorder<Value: Decodable & Sendable> {
    public struct Entry: Sendable {
        public let value: Value
        public let receivedAt: ContinuousClock.Instant
        public let header: BusHeader
    }

    public private(set) var entries: [Entry] = []
    private var task: Task<Void, Never>?

    /// Starts recording `topic` through `bus` (the subscription is confirmed first).
    public init(bus: BusClient, topic: Topic, as type: Value.Type = Value.self) async throws {
        let subscription = try await bus.subscribe(to: [topic.name], confirm: true)
        task = Task { [weak self] in
            for await message in subscription {
                guard let value = try? message.decode(Value.self) else { continue }
                await self?.append(Entry(value: value, receivedAt: .now, header: message.header))
            }
        }
    }

    private func append(_ entry: Entry) {
        entries.append(entry)
    }

    public var latest: Value? { entries.last?.value }

    /// Waits for a value that satisfies `condition`, received at or after `since`.
    public func waitFor(
        timeout: Duration = .seconds(15), since: ContinuousClock.Instant? = nil, _ condition: @Sendable (Value) -> Bool
    ) async throws -> Entry {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let entry = entries.first(where: { (since == nil || $0.receivedAt >= since!) && condition($0.value) }) { return entry }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestFailure("no matching value within \(timeout); last: \(String(describing: entries.last?.value))")
    }

    public func stop() {
        task?.cancel()
    }
}
