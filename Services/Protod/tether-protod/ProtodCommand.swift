import ArgumentParser
import Logging
import ProtocolHandler
import TetherBus
import TetherService

@main
struct ProtodCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-protod",
        abstract: "The protocol handler: durable outbox, acknowledgements, streamed replies, ping/pong."
    )

    @OptionGroup var options: ProgramOptions

    @Option(help: "The outbox database (default: protod.sqlite in the run directory).")
    var outbox: String?

    func run() async throws {
        let path = outbox ?? options.resolvedRunDirectory.file("protod.sqlite")
        try await BusProgram.run("tether-protod", options: options) { bus, logger in
            [ProtocolService(bus: bus, outbox: try Outbox(path: path), logger: logger)]
        }
    }
}
