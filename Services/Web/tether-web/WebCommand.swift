import ArgumentParser
import Foundation
import TetherBus
import TetherService
import WebFrontEnd

@main
struct WebCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-web",
        abstract: "A web front end: one page and a WebSocket bridged to the bus. `tether web` prints the URL to open.",
        version: TetherVersion.current,
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Option(help: "The address to listen on; the default answers only this machine.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port).")
    var port = 8766

    @Option(help: "The access token's file (default: web.token in the run directory, made with a random token, mode 0600, when missing).")
    var tokenFile: String?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0 to 65535") }
    }

    func run() async throws {
        let directory = options.resolvedRunDirectory
        let tokenPath = tokenFile ?? directory.file("web.token")
        let token = try Self.token(at: tokenPath)
        let configuration = WebConfiguration(host: host, port: port, token: token, urlFile: directory.file("web.url"))
        try await BusProgram.run("tether-web", options: options, remote: try remote.remoteBus()) { bus, logger in
            try WebServer.makeServices(configuration: configuration, bus: bus, logger: logger)
        }
    }

    /// The token in `path`; a new random one when the file is missing.
    static func token(at path: String) throws -> String {
        if !FileManager.default.fileExists(atPath: path) { try SecretFile.write(SecretFile.newToken(), to: path) }
        return try SecretFile.read(path, kind: "web token file")
    }
}
