import ArgumentParser
import ConnectionManager
import Foundation
import Logging
import TetherBus
import TetherService

@main
struct ConndCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-connd",
        abstract: "Keeps the WebSocket to the gateway open and carries its frames over the bus."
    )

    @OptionGroup var options: ProgramOptions

    @Option(help: "The gateway's WebSocket URL.")
    var url = "ws://127.0.0.1:8765/ws"

    @Option(help: "A file holding the bearer token; it must be mode 0600. Else $TETHER_TOKEN.")
    var tokenFile: String?

    func validate() throws {
        guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else {
            throw ValidationError("--url must start with ws:// or wss://")
        }
    }

    func run() async throws {
        let token = try SecretFile.token(file: tokenFile, environmentVariable: "TETHER_TOKEN")
        let configuration = ConnectionConfiguration(url: url, token: token)
        let phase = ConnectionPhaseBox()
        try await BusProgram.run("tether-connd", options: options, state: phase.read) { bus, logger in
            [ConnectionService(bus: bus, configuration: configuration, phase: phase, logger: logger)]
        }
    }
}
