public import ServiceLifecycle
public import TetherBus
import TetherSchema
import Foundation
import Synchronization

/// Publishes the program's ``Heartbeat`` every second, so the compose script, `tether status`
/// and the tap can see who is alive.
public struct HeartbeatService: Service {
    private let bus: BusClient
    private let program: String
    private let state: @Sendable () -> String
    private let counters: ProgramCounters?
    private let startedAt = Date()

    /// - Parameters:
    ///   - state: a word for what the program is doing, read at each beat.
    ///   - counters: the program's own counters, sent with each beat.
    public init(bus: BusClient, program: String, state: @escaping @Sendable () -> String = { "running" }, counters: ProgramCounters? = nil) {
        self.bus = bus
        self.program = program
        self.state = state
        self.counters = counters
    }

    public func run() async throws {
        let timer = AsyncTimerSequence.repeating(every: .seconds(1))
        beat()
        for await _ in timer.cancelOnGracefulShutdown() {
            beat()
        }
    }

    private func beat() {
        let traffic = bus.statistics
        let heartbeat = Heartbeat(
            program: program, pid: ProcessInfo.processInfo.processIdentifier, state: state(), startedAt: startedAt,
            published: traffic.published, received: traffic.received, dropped: traffic.dropped.values.reduce(0, +),
            droppedByKind: traffic.dropped, counters: counters?.snapshot)
        try? bus.publish(heartbeat, on: .heartbeat)
    }
}

/// Counters a program keeps of its own work, shown by `tether status` through its heartbeat.
public final class ProgramCounters: Sendable {
    private let values: Mutex<[String: Int]>

    /// - Parameter names: counters shown as 0 until they first count.
    public init(names: [String] = []) {
        values = Mutex(Dictionary(uniqueKeysWithValues: names.map { ($0, 0) }))
    }

    public func increment(_ name: String, by amount: Int = 1) {
        values.withLock { $0[name, default: 0] += amount }
    }

    public var snapshot: [String: Int] {
        values.withLock { $0 }
    }
}

/// An endless sequence of ticks, one every `interval`.
public struct AsyncTimerSequence: AsyncSequence, Sendable {
    public typealias Element = ContinuousClock.Instant
    let interval: Duration

    public static func repeating(every interval: Duration) -> AsyncTimerSequence {
        AsyncTimerSequence(interval: interval)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let interval: Duration
        var next: ContinuousClock.Instant = .now

        public mutating func next() async -> ContinuousClock.Instant? {
            next = next.advanced(by: interval)
            do {
                try await Task.sleep(until: next, clock: .continuous)
            } catch {
                return nil
            }
            return next
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(interval: interval)
    }
}

/// Closes a ``BusClient`` when the service group shuts down, after the services that use it.
public struct BusClientService: Service {
    private let bus: BusClient

    public init(bus: BusClient) {
        self.bus = bus
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await bus.close()
    }
}
