import ArgumentParser
import Logging
import NetworkMonitor
import TetherBus
import TetherService

@main
struct NetmonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-netmon",
        abstract: "Publishes the network path (default route, interface and its kind) read from the kernel.",
        version: TetherVersion.current,
    )

    @OptionGroup var options: ProgramOptions

    func run() async throws {
        try await BusProgram.run("tether-netmon", options: options) { bus, logger in
            [NetworkMonitorService(bus: bus, logger: logger)]
        }
    }
}
