import Foundation
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
    public init(bus: any Bus, topic: Topic, as type: Value.Type = Value.self) async throws {
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

/// Records every message of some topics, in the order they arrive, with the time.
public actor TopicRecorder {
    public struct Entry: Sendable {
        public let message: BusMessage
        public let receivedAt: ContinuousClock.Instant

        public var topic: Topic { message.topic }

        public func decode<Value: Decodable>(_ type: Value.Type) -> Value? {
            try? message.decode(type)
        }
    }

    public private(set) var entries: [Entry] = []
    private var task: Task<Void, Never>?

    /// Starts recording the topics matching `prefixes` (the subscription is confirmed first).
    public init(bus: any Bus, prefixes: [String]) async throws {
        let subscription = try await bus.subscribe(to: prefixes, confirm: true)
        task = Task { [weak self] in
            for await message in subscription {
                await self?.append(Entry(message: message, receivedAt: .now))
            }
        }
    }

    private func append(_ entry: Entry) {
        entries.append(entry)
    }

    /// Waits for a message of `topic` whose body satisfies `condition`, received at or after `since`.
    public func waitFor<Value: Decodable & SendableMetatype>(
        _ topic: Topic, as type: Value.Type, timeout: Duration = .seconds(15), since: ContinuousClock.Instant? = nil,
        _ condition: @Sendable (Value) -> Bool = { _ in true }
    ) async throws -> Entry {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let found = entries.first { entry in
                guard entry.topic == topic, since == nil || entry.receivedAt >= since!, let value = entry.decode(type) else { return false }
                return condition(value)
            }
            if let found { return found }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestFailure("no matching \(topic) within \(timeout)")
    }

    public func stop() {
        task?.cancel()
    }
}
