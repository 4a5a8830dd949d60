import ArgumentParser
import DevGateway
import Foundation
import Hummingbird
import Logging
import TetherBus
import TetherService

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@main
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-gateway",
        abstract: "A development gateway that speaks the Tether wire protocol, with a demo bot.",
        version: TetherVersion.current,
        subcommands: [Serve.self, Approve.self],
        defaultSubcommand: Serve.self
    )
}

/// Approves a device waiting for pairing on a running gateway (OpenClaw dialect).
struct Approve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Approve a device's pairing request on a running gateway (the OpenClaw dialect).",
        discussion: "The request id is in the refusal the device got, and in Tether's conn.state words."
    )

    @Argument(help: "The pairing request's id.")
    var requestID: String

    @Option(help: "The gateway's address.")
    var host = "127.0.0.1"

    @Option(help: "The gateway's port.")
    var port = 8765

    @Option(help: "A file holding the gateway's token (mode 0600). Else $TETHER_GATEWAY_TOKEN.")
    var tokenFile: String?

    func run() async throws {
        let token = try SecretFile.token(file: tokenFile, environmentVariable: "TETHER_GATEWAY_TOKEN")
        var request = URLRequest(url: URL(string: "http://\(host):\(port)/admin/devices/approve")!)
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.httpBody = try JSONEncoder().encode(["requestId": requestID])
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let body = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard status == 200 else { throw ValidationError("the gateway refused the approval (HTTP \(status)): \(body)") }
        print("approved: \(body)")
    }
}

/// Runs the gateway.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the gateway (the default).",
        discussion: """
            Seed dialect: clients connect to ws://HOST:PORT/ws with "Authorization: Bearer TOKEN". \
            OpenClaw dialect (--dialect openclaw): any path, the token and a signed device in the \
            connect request. Every chat message received is kept in the record: GET /record (same \
            token) or the --record file.
            """
    )

    @Option(help: "The dialect to speak: seed, or openclaw (protocol 3 and 4, see docs/GATEWAY.md).")
    var dialect = "seed"

    @Option(
        help:
            "OpenClaw: the release to behave as: 2026.4 (protocol 3, nothing kept but the transcript), 2026.5 (protocol 4, run status) or current (today's: inputs kept before they are acknowledged, receipts, pending inputs); see docs/GATEWAY.md."
    )
    var openclaw = OpenClawRelease.current.rawValue

    @Option(help: "OpenClaw: the protocol versions to speak, as 3-4, 3 or 4; release (the default): the release's, 3 for 2026.4 and 4 after.")
    var protocols: String?

    @Option(help: "OpenClaw: seconds between ticks.")
    var tickInterval: Double = 30

    @Option(help: "OpenClaw: keep session transcripts and paired devices in this directory across restarts.")
    var stateDir: String?

    @Option(help: "OpenClaw: seconds a finished run's idempotency key is remembered.")
    var dedupeWindow: Double = 300

    @Option(help: "OpenClaw: seconds between the model's failed attempts, with the modelFailure fault.")
    var modelRetryDelay: Double = 5

    @Option(help: "OpenClaw: how many messages a busy session holds; beyond it the oldest are dropped.")
    var queueCap = 20

    @Option(help: "OpenClaw: seconds after a session's run ends before the first message queued behind it runs.")
    var followUpDelay: Double = 1

    @Option(help: "OpenClaw: seconds an exec approval (a message starting with exec:) waits for a decision.")
    var approvalTimeout: Double = 1800

    @Option(help: "OpenClaw: the largest frame the gateway reads, in bytes (its hello's policy.maxPayload; by default OpenClaw's own, 26214400).")
    var maxPayload = OpenClawGatewaySettings.openClawMaximumPayload

    @Option(help: "OpenClaw: every session's verbose level (off, on or full); a tool's result is sent live only with full.")
    var verboseDefault = "off"

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

    @Flag(
        help:
            "Behave as a gateway that knows only the seeds' JSON: no duplicate suppression, no session resume, no replyTo, one message at a time, each acknowledged after its reply (the strictSeed fault, see docs/GATEWAY.md)."
    )
    var strictSeed = false

    @Option(help: "Log level.")
    var logLevel: Logger.Level = .info

    /// The protocol range `--protocols` names.
    private var protocolRange: ClosedRange<Int>? {
        guard let protocols, !protocols.isEmpty, protocols != "release" else { return nil }
        let bounds = protocols.split(separator: "-").compactMap { Int($0) }
        guard bounds.count == (protocols.contains("-") ? 2 : 1), let low = bounds.first, let high = bounds.last, low <= high else { return nil }
        return low...high
    }

    func validate() throws {
        guard ["seed", "openclaw"].contains(dialect) else { throw ValidationError("--dialect must be seed or openclaw") }
        guard OpenClawRelease(rawValue: openclaw) != nil else {
            throw ValidationError("--openclaw must be one of \(OpenClawRelease.allCases.map(\.rawValue).joined(separator: ", ")), not '\(openclaw)'")
        }
        if let protocols, !protocols.isEmpty, protocols != "release" {
            guard let lowest = protocolRange?.lowerBound, lowest >= 1 else { throw ValidationError("--protocols must be like 3-4, 3 or 4") }
        }
        guard tickInterval > 0, dedupeWindow >= 0 else { throw ValidationError("--tick-interval must be positive and --dedupe-window not negative") }
        guard (4096...(1 << 30)).contains(maxPayload) else { throw ValidationError("--max-payload must be from 4096 bytes to 1 GiB") }
        guard modelRetryDelay >= 0, followUpDelay >= 0, queueCap >= 1, approvalTimeout > 0 else {
            throw ValidationError(
                "--model-retry-delay and --follow-up-delay must not be negative, --queue-cap must be at least 1, and --approval-timeout must be positive")
        }
        guard ["off", "on", "full"].contains(verboseDefault) else { throw ValidationError("--verbose-default must be off, on or full") }
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
            tls: tlsCert.flatMap { certificate in tlsKey.map { (certificate, $0) } },
            openClaw: dialect == "openclaw"
                ? OpenClawGatewaySettings(
                    release: OpenClawRelease(rawValue: openclaw) ?? .current, protocols: protocolRange, tickInterval: .seconds(tickInterval),
                    stateDirectory: stateDir,
                    dedupeWindow: .seconds(dedupeWindow), maximumPayload: maxPayload, followUpDelay: .seconds(followUpDelay), queueCap: queueCap,
                    modelRetryDelay: .seconds(modelRetryDelay), approvalTimeout: .seconds(approvalTimeout),
                    verboseDefault: verboseDefault) : nil)
        let logger = Logger(label: "tether-gateway")
        let app = try DevGateway.makeApplication(configuration: configuration, logger: logger)
        // Started by a compose supervisor, it stops when the supervisor is gone.
        try await BusProgram.run([app], logger: logger)
    }
}
