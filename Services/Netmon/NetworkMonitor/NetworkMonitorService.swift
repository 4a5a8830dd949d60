public import Logging
public import ServiceLifecycle
public import TetherBus
import TetherSchema
import TetherService

/// Publishes the network path as the retained `net.path` topic, and again at every change.
public struct NetworkMonitorService: Service {
    private let bus: BusClient
    private let routes: KernelRoutes
    private let interval: Duration
    private let logger: Logger

    /// - Parameter interval: how often the kernel's tables are read.
    public init(bus: BusClient, routes: KernelRoutes = KernelRoutes(), interval: Duration = .milliseconds(500), logger: Logger) {
        self.bus = bus
        self.routes = routes
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        var last = routes.currentPath()
        publish(last)
        for await _ in AsyncTimerSequence.repeating(every: interval).cancelOnGracefulShutdown() {
            let path = routes.currentPath()
            guard path != last else { continue }
            last = path
            publish(path)
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
