public import ArgumentParser
import FoundationEssentials
public import Logging
import Synchronization
public import TetherBus
public import TetherSchema

/// Options every Tether program takes.
public struct ProgramOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("run-dir"),
        help: "The run directory with the bus endpoints (default: $TETHER_RUN, else $XDG_RUNTIME_DIR/tether, else /tmp/tether-$UID).")
    public var runDirectory: String?

    @Option(
        name: .customLong("state-dir"),
        help:
            "Where the stores that must last are kept (default: $TETHER_STATE, else the run directory when one is named, else $XDG_STATE_HOME/tether, else ~/.local/state/tether)."
    )
    public var stateDirectory: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error or critical.")
    public var logLevel: Logger.Level = .info

    public init() {}

    /// The run directory these options name.
    public var resolvedRunDirectory: RunDirectory {
        RunDirectory.resolve(runDirectory)
    }

    /// The state directory these options name (``StateDirectory``).
    public var resolvedStateDirectory: StateDirectory {
        StateDirectory.resolve(stateDirectory, runDirectory: runDirectory)
    }

    /// Sends log lines to standard error at the chosen level, once per process.
    public func bootstrapLogging() {
        LoggingBootstrap.bootstrap(level: logLevel)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// `--retry default|patient|none`: a wrong name is refused by the parser, with the names.
extension RetryPolicy: ExpressibleByArgument {
    public init?(argument: String) {
        guard let policy = RetryPolicy.named(argument) else { return nil }
        self = policy
    }

    public static var allValueStrings: [String] { byName.map(\.key) }

    public var defaultValueDescription: String { name ?? "\(attempts) attempts" }
}

/// Sets up swift-log once per process (swift-log stops a process that bootstraps it twice).
public enum LoggingBootstrap {
    private static let done = Atomic(false)

    /// Logs to standard error at `level`; a second call changes nothing.
    public static func bootstrap(level: Logger.Level) {
        guard done.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
