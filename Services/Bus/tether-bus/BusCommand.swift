import ArgumentParser
import BusProxy
import Logging
import TetherBus
import TetherService

@main
struct BusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-bus",
        abstract: "The Tether bus: a ZeroMQ XSUB/XPUB proxy on bus.in and bus.out in the run directory."
    )

    @OptionGroup var options: ProgramOptions

    func run() async throws {
        options.bootstrapLogging()
        let logger = Logger(label: "tether-bus")
        let runDirectory = options.resolvedRunDirectory
        let bus = try BusClient(source: "tether-bus", runDirectory: runDirectory, logger: logger)
        // The proxy starts first and stops last; its own heartbeat goes through itself.
        try await BusProgram.run(
            [
                BusProxy(runDirectory: runDirectory, logger: logger),
                BusClientService(bus: bus),
                HeartbeatService(bus: bus, program: "tether-bus"),
            ],
            logger: logger)
    }
}
