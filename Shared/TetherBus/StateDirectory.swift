public import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The private directory where what must outlive the session lives: the outbox, the
/// conversation journal, the transcript and display snapshot, the development gateway's
/// history. Unlike the run directory (``RunDirectory``, a tmpfs under `$XDG_RUNTIME_DIR` that
/// logout and reboot empty), it is on disk and lasts.
///
/// Chosen in this order:
/// 1. `--state-dir`;
/// 2. `$TETHER_STATE` (the compose supervisor gives it to every program it starts);
/// 3. a run directory named on purpose (`--run-dir` or `$TETHER_RUN`): everything in that one
///    directory, as tests want;
/// 4. `$XDG_STATE_HOME/tether` (the XDG Base Directory specification's place for state that
///    should persist between restarts);
/// 5. `~/.local/state/tether`, the specification's default for it.
public struct StateDirectory: Sendable, Hashable, CustomStringConvertible {
    /// The directory's absolute path.
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// The name of the variable that names the state directory.
    public static let environmentVariable = "TETHER_STATE"

    /// The state directory named by `explicit`, else by the environment; `runDirectory` is the
    /// `--run-dir` given, if any.
    public static func resolve(
        _ explicit: String? = nil, runDirectory: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> StateDirectory {
        if let explicit, !explicit.isEmpty { return StateDirectory(path: explicit) }
        if let state = environment[environmentVariable], !state.isEmpty { return StateDirectory(path: state) }
        if let runDirectory, !runDirectory.isEmpty { return StateDirectory(path: runDirectory) }
        if let run = environment["TETHER_RUN"], !run.isEmpty { return StateDirectory(path: run) }
        return StateDirectory(path: userDefault(environment: environment))
    }

    /// `$XDG_STATE_HOME/tether`, else `$HOME/.local/state/tether`: where the stores go when
    /// nothing names a directory. A relative `XDG_STATE_HOME` is ignored, as the
    /// specification says.
    public static func userDefault(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/tether" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        return home + "/.local/state/tether"
    }

    /// The directories where a Tether before this one kept its stores, when they are not this
    /// directory: the run directory in use and the run directory's default place (which an
    /// earlier Tether used for everything). A store found there is moved here
    /// (`StoreRelocation`). None when this is the run directory itself: everything in one
    /// directory was asked for.
    public func legacyDirectories(runDirectory: RunDirectory, environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        guard runDirectory.path != path else { return [] }
        var seen: Set<String> = [path]
        var environment = environment
        environment["TETHER_RUN"] = nil
        return [runDirectory.path, RunDirectory.resolve(environment: environment).path].filter { seen.insert($0).inserted }
    }

    public var description: String { path }

    /// The path of a file in the directory.
    public func file(_ name: String) -> String {
        path + "/" + name
    }

    /// Creates the directory and its missing parents, owner-only (0700), and refuses one that
    /// is not a directory or belongs to another user; one open to others is closed.
    public func prepare() throws(BusError) {
        try RunDirectory(path: path).prepare()
    }
}
