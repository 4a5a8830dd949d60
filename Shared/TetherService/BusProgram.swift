public import Logging
public import ServiceLifecycle
public import TetherBus
import UnixSignals

/// Runs a Tether program: its services in order, until SIGTERM or SIGINT, then shuts them
/// down in reverse order within a deadline.
public enum BusProgram {
    /// Connects `name` to the bus (the run directory's, or `remote`), then runs the bus
    /// client, the services `makeServices` returns and a heartbeat whose state word comes
    /// from `state` (beating again when `stateChanged` is notified), carrying `counters`.
    public static func run(
        _ name: String,
        options: ProgramOptions,
        remote: RemoteBus? = nil,
        state: (@Sendable () -> String)? = nil,
        stateChanged: ChangeSignal? = nil,
        counters: ProgramCounters? = nil,
        makeServices: (BusClient, Logger) async throws -> [any Service]
    ) async throws {
        ProcessMemory.limitArenas()
        options.bootstrapLogging()
        let logger = Logger(label: name)
        let bus = try BusClient(source: name, runDirectory: options.resolvedRunDirectory, remote: remote, logger: logger)
        let services = try await makeServices(bus, logger)
        try await run(
            [BusClientService(bus: bus)] + services + [
                HeartbeatService(bus: bus, program: name, state: state ?? { "running" }, stateChanged: stateChanged, counters: counters)
            ],
            logger: logger)
    }

    /// Runs `services` in order until SIGTERM or SIGINT, or (started by a compose
    /// supervisor) until the supervisor is gone. A program that starts threads of its own
    /// before this calls ``ProcessMemory/limitArenas()`` first itself.
    public static func run(_ services: [any Service], logger: Logger) async throws {
        ProcessMemory.limitArenas()
        let watch: [any Service] = SupervisorWatch.fromEnvironment(logger: logger).map { [$0] } ?? []
        let group = ServiceGroup(
            configuration: .init(
                services: (services + watch).map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            ).withShutdownDeadline(.seconds(10)))
        try await group.run()
    }
}

extension ServiceGroupConfiguration {
    fileprivate func withShutdownDeadline(_ deadline: Duration) -> Self {
        var configuration = self
        configuration.maximumGracefulShutdownDuration = deadline
        return configuration
    }
}
