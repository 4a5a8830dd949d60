import ArgumentParser
import DevGateway
import Foundation
import Hummingbird
import Logging
import TetherService

@main
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-gateway",
        abstract: "A development gateway that speaks the Tether wire protocol, with a demo bot.",
        discussion: """
            Clients connect to ws://HOST:PORT/ws with "Authorization: Bearer TOKEN". Every chat \
            message received is kept in the record: GET /record (same token) or the --record file.
            """
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks a free one.")
    var port = 8765

    @Option(help: "A file holding the bearer token (mode 0600). Else $TETHER_GATEWAY_TOKEN.")
    var tokenFile: String?

    @Option(help: "Append every chat message received to this file, one JSON object a line.")
    var record: String?

    @Option(help: "Write the port to this file once listening.")
    var portFile: String?

    @Option(help: "The bot's name.")
    var botName = "Opta"

    @Option(help: "Milliseconds between streamed chunks.")
    var chunkDelay = 20

    @Option(help: "A certificate chain (PEM) to serve wss:// with; needs --tls-key.")
    var tlsCert: String?

    @Option(help: "The private key (PEM) of --tls-cert.")
    var tlsKey: String?

    @Option(help: #"Faults to inject from the start, as JSON: {"ignorePings": true, "closeAfterFrames": 3, …} (see docs/GATEWAY.md)."#)
    var faults: String?

    @Flag(help: "Behave as a gateway that knows only the seeds' JSON: no duplicate suppression, no session resume, no replyTo, one message at a time, each acknowledged after its reply (the strictSeed fault, see docs/GATEWAY.md).")
    var strictSeed = false

    @Option(help: "Log level.")
    var logLevel: Logger.Level = .info

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        guard chunkDelay >= 0 else { throw ValidationError("--chunk-delay cannot be negative") }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        if let faults {
            do {
                _ = try GatewayFaults.decode(Data(faults.utf8), over: GatewayFaults())
            } catch {
                throw ValidationError("--faults is not a set of faults: \(error)")
            }
        }
    }

    func run() async throws {
        LoggingBootstrap.bootstrap(level: logLevel)
        let token = try SecretFile.token(file: tokenFile, environmentVariable: "TETHER_GATEWAY_TOKEN")
        var initialFaults = try faults.map { try GatewayFaults.decode(Data($0.utf8), over: GatewayFaults()) } ?? GatewayFaults()
        if strictSeed { initialFaults.strictSeed = true }
        let configuration = GatewayConfiguration(
            host: host, port: port, token: token, recordPath: record, portFile: portFile, botName: botName,
            chunkDelay: .milliseconds(chunkDelay),
            faults: initialFaults,
            tls: tlsCert.flatMap { certificate in tlsKey.map { (certificate, $0) } })
        let app = try DevGateway.makeApplication(configuration: configuration, logger: Logger(label: "tether-gateway"))
        try await app.runService()
    }
}
