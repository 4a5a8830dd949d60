/// What a front end does when it finds no set running in its run directory: `tether`,
/// `tether send` and `tether watch` start the set the user set up (`tether setup`), through
/// the user unit where it is installed, and go on; with nothing set up, or when told not to,
/// they start nothing and say in one line how.
public enum SetStart: Equatable, Sendable {
    /// Start it with `systemctl --user start tether`.
    case unit
    /// Start it with `tether-compose` and these arguments (`up --detach`, the run directory).
    case compose(arguments: [String])
    /// Start nothing; these words say how.
    case explain(String)

    /// The words when nothing is set up.
    public static let notSetUp =
        "tether setup has not been run here, so nothing starts the set by itself: run tether setup (it finds your OpenClaw gateway and starts the set), or tether-compose up --detach for the development gateway"

    /// Decides.
    ///
    /// - Parameters:
    ///   - setUp: a compose file is chosen (`TETHER_COMPOSE_FILE`, which `tether setup` writes to the settings).
    ///   - unitInstalled: the `tether` user unit is installed.
    ///   - runDirectory: the run directory the command names (`--run-dir`, `TETHER_RUN`); the
    ///     unit runs the set in the default one only.
    ///   - autostart: `TETHER_AUTOSTART` is not `0`.
    ///   - remote: the command uses a bus on another host, which it cannot start.
    public static func decide(setUp: Bool, unitInstalled: Bool, runDirectory: String?, autostart: Bool, remote: Bool) -> SetStart {
        let howTo =
            unitInstalled && runDirectory == nil
            ? "start it with systemctl --user start tether (tether setup --enable starts it at every login)"
            : "start it with tether-compose up --detach" + (runDirectory.map { " --run-dir \($0)" } ?? "")
        if remote { return .explain("the bus on the other host does not answer: start the set there") }
        guard setUp else { return .explain(notSetUp) }
        guard autostart else { return .explain(howTo) }
        if unitInstalled && runDirectory == nil { return .unit }
        return .compose(arguments: ["up", "--detach"] + (runDirectory.map { ["--run-dir", $0] } ?? []))
    }
}
