import ArgumentParser
import Logging
import SnapshotStore
import TetherBus
import TetherSchema
import TetherService
import TetherStorage

@main
struct SnapdCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-snapd",
        abstract: "The snapshot store: the transcript, display snapshots and connection identity in SQLite, for a front end's first frame.",
        version: TetherVersion.current,
    )

    @OptionGroup var options: ProgramOptions

    @Option(help: "The transcript database (default: snapd.sqlite in the state directory).")
    var database: String?

    @Option(help: "The most transcript entries kept; the oldest are removed beyond it.")
    var maxEntries = 100_000

    func validate() throws {
        guard maxEntries >= 10 else { throw ValidationError("--max-entries must be at least 10") }
    }

    func run() async throws {
        let state = options.resolvedStateDirectory
        let path = database ?? state.file("snapd.sqlite")
        try await BusProgram.run("tether-snapd", options: options) { bus, logger in
            try state.prepare()
            if database == nil {
                let moves = try StoreRelocation.moveStores(
                    [.init("snapd.sqlite", what: "the transcript")], into: state.path, from: state.legacyDirectories(runDirectory: options.resolvedRunDirectory)
                )
                StoreRelocation.log(moves, to: logger)
            }
            let (store, replaced) = try await ConfigurationProblem.guarding("tether-snapd") {
                try await TranscriptStore.openChecked(path: path, maximumEntries: maxEntries)
            }
            if let replaced { logger.error("\(replaced.words)") }
            return [
                SnapshotService(
                    bus: bus, store: store, storage: StorageCondition(program: "tether-snapd", path: path, replaced: replaced.map { [$0] } ?? []),
                    logger: logger)
            ]
        }
    }
}
