import ArgumentParser
import BusProxy
import FoundationEssentials
import Logging
import TetherBus
import TetherService

#if canImport(Glibc)
import Glibc
#endif

@main
struct BusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-bus",
        abstract: "The Tether bus: a ZeroMQ XSUB/XPUB proxy on bus.in and bus.out in the run directory.",
        version: TetherVersion.current,
        subcommands: [Run.self, Key.self],
        defaultSubcommand: Run.self
    )
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the bus (the default).",
        discussion: """
            With --tcp HOST:PORT the bus also listens for programs on other hosts: bus.in on PORT, \
            bus.out on PORT+1, and on PORT+2 a relay that takes their commands (send, transcript, snapshot, \
            connection…) to the owners in this run directory. Those programs authenticate with CURVE (tether-tap --bus, --bus-server-key, \
            --bus-key) and only the public keys in the --allowed-keys file get in; the file is read at \
            every connection, so a key added or removed counts from the next one.
            """
    )

    @OptionGroup var options: ProgramOptions

    @Option(help: "Also listen for other hosts on HOST:PORT (bus.in), HOST:PORT+1 (bus.out) and HOST:PORT+2 (commands), with CURVE (default: $TETHER_BUS_TCP).")
    var tcp: String?

    @Option(
        help:
            "The bus's CURVE secret key file (0600), made there if missing; 'tether-bus key FILE' prints its public key. Needed with --tcp (default: $TETHER_BUS_CURVE_KEY)."
    )
    var curveKey: String?

    @Option(help: "The public keys allowed in over --tcp: one a line, optionally followed by a name. Needed with --tcp (default: $TETHER_BUS_ALLOWED_KEYS).")
    var allowedKeys: String?

    /// An option, else its environment variable (a compose file's programs inherit the supervisor's environment).
    private static func option(_ value: String?, _ variable: String) -> String? {
        value ?? ProcessInfo.processInfo.environment[variable].flatMap { $0.isEmpty ? nil : $0 }
    }
    private var tcpAddress: String? { Self.option(tcp, "TETHER_BUS_TCP") }
    private var curveKeyFile: String? { Self.option(curveKey, "TETHER_BUS_CURVE_KEY") }
    private var allowedKeysFile: String? { Self.option(allowedKeys, "TETHER_BUS_ALLOWED_KEYS") }

    func validate() throws {
        let (tcp, curveKey, allowedKeys) = (tcpAddress, curveKeyFile, allowedKeysFile)
        guard let tcp else {
            if curveKey != nil || allowedKeys != nil { throw ValidationError("--curve-key and --allowed-keys go with --tcp") }
            return
        }
        _ = try RemoteBus.parse(tcp)
        guard curveKey != nil else { throw ValidationError("--tcp needs --curve-key FILE: the bus's secret key") }
        guard let allowedKeys else { throw ValidationError("--tcp needs --allowed-keys FILE: the public keys of the programs allowed in") }
        guard CurveKeyPair.isSupported else { throw ValidationError("this libzmq was built without CURVE, which --tcp requires") }
        _ = try AllowedKeys.load(allowedKeys)
    }

    func run() async throws {
        ProcessMemory.limitArenas()
        options.bootstrapLogging()
        let logger = Logger(label: "tether-bus")
        let runDirectory = options.resolvedRunDirectory
        var listener: BusProxy.TCPListener?
        if let tcp = tcpAddress, let curveKey = curveKeyFile, let allowedKeys = allowedKeysFile {
            let (host, port) = try RemoteBus.parse(tcp)
            let (keys, created) = try CurveKeyFile.readOrCreate(curveKey)
            if created { logger.notice("made a new bus key", metadata: ["bus.key.file": "\(curveKey)", "bus.key": "\(keys.publicKey)"]) }
            listener = BusProxy.TCPListener(host: host, port: port, keys: keys, allowListPath: allowedKeys)
        }
        let bus = try BusClient(source: "tether-bus", runDirectory: runDirectory, logger: logger)
        // The proxy starts first and stops last; its own heartbeat goes through itself.
        try await BusProgram.run(
            [
                BusProxy(runDirectory: runDirectory, listener: listener, logger: logger),
                BusClientService(bus: bus),
                HeartbeatService(bus: bus, program: "tether-bus"),
            ],
            logger: logger)
    }
}

struct Key: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the CURVE public key of the secret key in FILE, making a new key pair there (0600) if FILE does not exist.",
        discussion: """
            For the bus (tether-bus --curve-key FILE) and for each program that joins it from another \
            host (tether-tap --bus-key FILE): give the bus's public key to those programs, and put \
            theirs in the bus's --allowed-keys file.
            """
    )

    @Argument(help: "The secret key file.")
    var file: String

    func run() throws {
        let (keys, created) = try CurveKeyFile.readOrCreate(file)
        if created { _ = Array("tether-bus: made a new key pair in \(file)\n".utf8).withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) } }
        print(keys.publicKey)
    }
}
