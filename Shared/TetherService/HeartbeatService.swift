import FoundationEssentials
public import ServiceLifecycle
import Synchronization
public import TetherBus
import TetherSchema

/// Publishes the program's ``Heartbeat``, retained (so `tether status` and the tap have it
/// as soon as they subscribe): at start, at once when its state changes, it counts a drop or
/// one of its own counters changes (then at most once a ``spacing``), and every ``interval``
/// while nothing changes. An idle program wakes for it once per interval only, and so does
/// every program that follows heartbeats (the bus relays each, snapd and compose hear all).
/// At each interval the program also gives its freed heap pages back to the system
/// (``ProcessMemory/returnFreedPages()``), in the wakeup it has anyway: what a burst of
/// traffic allocated does not stay with the program once it is idle again.
public struct HeartbeatService: Service {
    /// The longest time between two beats. Nothing reads a beat's age: between changes a
    /// beat only brings the traffic counters up to date, and each beat wakes every program
    /// that hears it (three or four threads each), so an idle set of seven programs beating
    /// every 10 s kept the bus and snapd above two wakeups a second.
    public static let interval = Duration.seconds(30)
    /// The shortest time between two beats: a burst of changes makes one beat a second.
    public static let spacing = Duration.seconds(1)

    private let bus: any Bus
    private let program: String
    private let state: @Sendable () -> String
    private let stateChanged: ChangeSignal?
    private let counters: ProgramCounters?
    private let startedAt = Date()

    /// - Parameters:
    ///   - state: a word for what the program is doing, read at each beat.
    ///   - stateChanged: notified when `state` would read differently.
    ///   - counters: the program's own counters, sent with each beat.
    public init(
        bus: any Bus, program: String, state: @escaping @Sendable () -> String = { "running" }, stateChanged: ChangeSignal? = nil,
        counters: ProgramCounters? = nil
    ) {
        self.bus = bus
        self.program = program
        self.state = state
        self.stateChanged = stateChanged
        self.counters = counters
    }

    public func run() async throws {
        let (due, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in BusDrop.counted.changes() { wake.yield() }
            }
            for signal in [stateChanged, counters?.changed].compactMap({ $0 }) {
                group.addTask {
                    for await _ in signal.changes() { wake.yield() }
                }
            }
            group.addTask {
                for await _ in AsyncTimerSequence.repeating(every: Self.interval) {
                    ProcessMemory.returnFreedPages()
                    wake.yield()
                }
            }
            beat()
            for await _ in due.cancelOnGracefulShutdown() {
                beat()
                guard (try? await Task.sleep(for: Self.spacing)) != nil else { break }
            }
            group.cancelAll()
        }
    }

    private func beat() {
        let traffic = bus.statistics
        let heartbeat = Heartbeat(
            program: program, pid: ProcessInfo.processInfo.processIdentifier, state: state(), startedAt: startedAt,
            published: traffic.published, received: traffic.received, dropped: traffic.dropped.values.reduce(0, +),
            droppedByKind: traffic.dropped, counters: counters?.snapshot)
        try? bus.retain(heartbeat, on: .heartbeat)
    }
}

/// Counters a program keeps of its own work, shown by `tether status` through its heartbeat.
public final class ProgramCounters: Sendable {
    private let values: Mutex<[String: Int]>
    /// Notified at each increment.
    public let changed = ChangeSignal()

    /// - Parameter names: counters shown as 0 until they first count.
    public init(names: [String] = []) {
        values = Mutex(Dictionary(uniqueKeysWithValues: names.map { ($0, 0) }))
    }

    public func increment(_ name: String, by amount: Int = 1) {
        values.withLock { $0[name, default: 0] += amount }
        changed.notify()
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
