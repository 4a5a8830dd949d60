public import Logging
public import ServiceLifecycle
public import TetherBus
import TetherSchema
import TetherService

/// Publishes the network path as the retained `net.path` topic, and again at every change.
///
/// The kernel says when links, addresses or routes change (rtnetlink); a burst of its
/// messages is coalesced for `coalescing` (50 ms) before the path is read again. Where
/// rtnetlink cannot be opened, the path is read every `pollInterval` instead.
public struct NetworkMonitorService: Service {
    private let bus: any Bus
    private let routes: KernelRoutes
    private let coalescing: Duration
    private let pollInterval: Duration
    /// What says the routes may have changed, when not the kernel (a test's stand-in for it).
    private let changes: AsyncStream<Void>?
    private let logger: Logger

    public init(
        bus: any Bus, routes: KernelRoutes = KernelRoutes(), coalescing: Duration = .milliseconds(50), pollInterval: Duration = .seconds(1),
        logger: Logger
    ) {
        self.init(bus: bus, routes: routes, coalescing: coalescing, pollInterval: pollInterval, changes: nil, logger: logger)
    }

    /// A monitor told of changes by `changes` instead of the kernel.
    init(bus: any Bus, routes: KernelRoutes, coalescing: Duration, pollInterval: Duration = .seconds(1), changes: AsyncStream<Void>?, logger: Logger) {
        self.bus = bus
        self.routes = routes
        self.coalescing = coalescing
        self.pollInterval = pollInterval
        self.changes = changes
        self.logger = logger
    }

    public func run() async throws {
        var last = routes.currentPath()
        publish(last)
        let check = { (last: inout NetworkPath) in
            let path = routes.currentPath()
            guard path != last else { return }
            last = path
            publish(path)
        }
        if let changes {
            for await _ in changes.cancelOnGracefulShutdown() {
                try? await Task.sleep(for: coalescing)
                check(&last)
            }
            return
        }
        do {
            let kernel = try RouteEvents()
            defer { kernel.stop() }
            for await _ in kernel.events.cancelOnGracefulShutdown() {
                try? await Task.sleep(for: coalescing)
                check(&last)
            }
        } catch {
            logger.warning("rtnetlink is not available: reading the routes every \(pollInterval) instead", metadata: ["net.error": "\(error)"])
            for await _ in AsyncTimerSequence.repeating(every: pollInterval).cancelOnGracefulShutdown() {
                check(&last)
            }
        }
    }

    private func publish(_ path: NetworkPath) {
        logger.info(
            "network path",
            metadata: [
                "net.satisfied": "\(path.satisfied)", "net.interface": "\(path.interface ?? "-")",
                "net.kind": "\(path.kind?.rawValue ?? "-")", "net.reason": "\(path.reason ?? "")",
            ])
        do {
            try bus.retain(path, on: .networkPath)
        } catch {
            logger.warning("cannot publish the network path", metadata: ["bus.error": "\(error)"])
        }
    }
}
