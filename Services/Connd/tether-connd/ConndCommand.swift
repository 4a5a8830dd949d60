import ArgumentParser
import ConnectionManager
import FoundationEssentials
import TetherBus
import TetherSchema
import TetherService

@main
struct ConndCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-connd",
        abstract: "Keeps the WebSocket to the gateway open and carries its frames over the bus.",
        discussion: """
            The token comes from --token-file (mode 0600), else --secret-service, else $TETHER_TOKEN. \
            Reconnects follow --preset (default: 1 s base, 30 s cap, 5 attempts, 0.2 jitter, 30 s \
            heartbeat; aggressive: 0.5 s, 10 s, 10, 0.1, 15 s), each value overridable.
            """,
        version: TetherVersion.current,
    )

    @OptionGroup var options: ProgramOptions

    @Option(help: "The gateway's WebSocket URL (ws:// or wss://).")
    var url = "ws://127.0.0.1:8765/ws"

    @Option(help: "A file holding the bearer token; it must be mode 0600.")
    var tokenFile: String?

    @Flag(help: "Read the token from the desktop secret service (secret-tool lookup service tether gateway URL).")
    var secretService = false

    @Option(help: "A CA certificate (PEM) to trust for wss://, besides the system's.")
    var caFile: String?

    @Option(help: "Reconnect preset: default or aggressive.")
    var preset = "default"

    @Option(help: "Seconds before the first retry.")
    var backoffBase: Double?

    @Option(help: "Largest retry delay, in seconds.")
    var backoffCap: Double?

    @Option(help: "Jitter: how far a delay may stray, as a fraction (0.2 is ±20%).")
    var jitter: Double?

    @Option(help: "Attempts before giving up.")
    var maxAttempts: Int?

    @Option(help: "Seconds between pings; a pong must arrive before the next ping is due.")
    var heartbeat: Double?

    @Option(help: "Seconds a graceful close (suspend, shutdown) may take.")
    var closeDeadline: Double = 5

    @Option(help: "Seconds an attempt may take to connect and complete the WebSocket upgrade (TLS included).")
    var upgradeDeadline: Double = 5

    @Option(help: "Seconds between knocks at the gateway's port once attempts are used up (failed); 0 never.")
    var failedKnock: Double = 30

    @Option(help: "Seconds after the last front end left before the connection is suspended; 0 never.")
    var idleSuspend: Double = 30

    @Option(
        help: "The gateway's dialect: seed, openclaw (protocol 3 and 4), or auto (openclaw when the gateway sends connect.challenge within 1 s of the upgrade)."
    )
    var dialect = "seed"

    @Option(help: "OpenClaw: where the device key and device tokens are kept (mode 0700; default $XDG_CONFIG_HOME/tether, else ~/.config/tether).")
    var configDir: String?

    @Option(help: "OpenClaw: seconds between checks whether a device waiting for approval was approved.")
    var pairingCheck: Double = 5

    @Option(
        help:
            "OpenClaw: on asks for the scope operator.approvals, to see and answer the gateway's exec and plugin approvals (a device paired without it must be approved again), and, once the gateway grants it, keeps the connection while no front end runs; off asks for the chat scopes only."
    )
    var approvals = "on"

    @Option(help: "Follow the machine's sleep through logind: auto (when logind runs here), off, system, or a D-Bus address.")
    var logind = "auto"

    func validate() throws {
        guard url.hasPrefix("ws://") || url.hasPrefix("wss://"), let host = URLComponents(string: url)?.host, !host.isEmpty else {
            throw ValidationError("--url must be a ws:// or wss:// URL with a host")
        }
        if url.hasPrefix("wss://") && (host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }) {
            throw ValidationError("wss:// needs a host name, not an address (\(host)): TLS verifies the certificate against the name")
        }
        guard ReconnectPolicy.preset(named: preset) != nil else { throw ValidationError("--preset must be default or aggressive") }
        for (name, value) in [
            ("--backoff-base", backoffBase), ("--backoff-cap", backoffCap), ("--heartbeat", heartbeat), ("--close-deadline", closeDeadline),
            ("--upgrade-deadline", upgradeDeadline),
        ] {
            if let value, value <= 0 { throw ValidationError("\(name) must be positive") }
        }
        if let jitter, !(0...1).contains(jitter) { throw ValidationError("--jitter must be between 0 and 1") }
        if let maxAttempts, maxAttempts < 1 { throw ValidationError("--max-attempts must be at least 1") }
        guard idleSuspend >= 0 else { throw ValidationError("--idle-suspend must be 0 or more") }
        guard ["seed", "openclaw", "auto"].contains(dialect) else { throw ValidationError("--dialect must be seed, openclaw or auto") }
        guard pairingCheck > 0 else { throw ValidationError("--pairing-check must be positive") }
        guard ["on", "off"].contains(approvals) else { throw ValidationError("--approvals must be on or off") }
        guard failedKnock >= 0 else { throw ValidationError("--failed-knock must be 0 or more") }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) { throw ValidationError("cannot read the CA file \(caFile)") }
    }

    private var logindBus: LogindBus? {
        switch logind {
        case "auto": LogindBus.detect()
        case "off": nil
        case "system": .system
        default: .address(logind)
        }
    }

    func run() async throws {
        ConnectionService.useOneEventLoop()
        let credential: CredentialSource =
            if let tokenFile { .file(tokenFile) } else if secretService { .secretService(url: url) } else { .environment("TETHER_TOKEN") }
        // Refuse a credential that cannot be read now rather than start a set that cannot connect.
        try await ConfigurationProblem.guarding("tether-connd") { _ = try await credential.read() }
        var policy = ReconnectPolicy.preset(named: preset) ?? .default
        if let backoffBase { policy.backoff.base = .seconds(backoffBase) }
        if let backoffCap { policy.backoff.cap = .seconds(backoffCap) }
        if let jitter { policy.backoff.jitter = jitter }
        if let maxAttempts { policy.maxAttempts = maxAttempts }
        if let heartbeat { policy.heartbeat = .seconds(heartbeat) }
        let configuration = ConnectionConfiguration(
            url: url, credential: credential, policy: policy, caFile: caFile, closeDeadline: .seconds(closeDeadline),
            upgradeDeadline: .seconds(upgradeDeadline),
            failedKnockInterval: failedKnock > 0 ? .seconds(failedKnock) : nil,
            dialect: WireDialect(rawValue: dialect), deviceKeys: DeviceKeyStore(directory: configDir ?? DeviceKeyStore.defaultDirectory),
            pairingCheckInterval: .seconds(pairingCheck), approvals: approvals == "on")
        let lifecycle = LifecycleSettings(
            idleSuspendAfter: idleSuspend > 0 ? .seconds(idleSuspend) : nil, logind: logindBus)
        let phase = ConnectionPhaseBox()
        try await BusProgram.run("tether-connd", options: options, state: phase.read, stateChanged: phase.changed) { bus, logger in
            [ConnectionService(bus: bus, configuration: configuration, lifecycle: lifecycle, phase: phase, logger: logger)]
        }
    }
}
