import ArgumentParser
import ComposeSupervisor
import Foundation
import Logging
import TetherBus
import TetherService

@main
struct ComposeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-compose",
        abstract: "Start, supervise and stop the set of Tether programs a compose file describes.",
        version: TetherVersion.current,
        subcommands: [Up.self, Down.self, Ps.self, Logs.self, Restart.self, Kill.self]
    )
}

/// The run directory and the directory of the program executables.
struct SetOptions: ParsableArguments {
    @Option(name: .customLong("run-dir"), help: "The run directory (default: $TETHER_RUN, else $XDG_RUNTIME_DIR/tether, else /tmp/tether-$UID).")
    var runDirectory: String?

    var resolved: RunDirectory { RunDirectory.resolve(runDirectory) }
}

/// Where the set keeps what must last.
struct StateOptions: ParsableArguments {
    @Option(
        name: .customLong("state-dir"),
        help:
            "Where the programs keep what must last (default: $TETHER_STATE, else the run directory when one is named, else $XDG_STATE_HOME/tether, else ~/.local/state/tether)."
    )
    var stateDirectory: String?
}

struct Up: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Start the set and supervise it until SIGTERM or Ctrl-C.")

    @OptionGroup var set: SetOptions

    @OptionGroup var state: StateOptions

    @Option(
        name: .shortAndLong,
        help: ArgumentHelp(
            "The compose file: a path, or the name of one of Tether's (default, openclaw, gateway, headless, web, python), from compose/ here or as installed "
                + "(default: TETHER_COMPOSE_FILE, from the environment or the settings tether setup writes, else default).")
    )
    var file: String?

    @Option(help: "Where the program executables are (default: beside tether-compose).")
    var binDir: String?

    @Flag(name: .shortAndLong, help: "Run in the background; return once every program is ready.")
    var detach = false

    @Option(help: "With --detach: seconds to wait for every program to be ready.")
    var readyTimeout: Double = 60

    func run() async throws {
        ProcessMemory.limitArenas()
        LoggingBootstrap.bootstrap(level: .warning)
        let runDirectory = set.resolved
        let stateDirectory = StateDirectory.resolve(state.stateDirectory, runDirectory: set.runDirectory)
        // The settings tether setup wrote: below the environment, above the compose file's own.
        let settings = try await ConfigurationProblem.guarding("tether-compose") { try SettingsFile.user().values() }
        let file = self.file ?? ProcessInfo.processInfo.environment["TETHER_COMPOSE_FILE"] ?? settings["TETHER_COMPOSE_FILE"] ?? "compose/default.yaml"
        let programs = URL(fileURLWithPath: CommandLine.executablePath).deletingLastPathComponent().path
        guard let located = ComposeFile.locate(file, programDirectory: programs, fileExists: { FileManager.default.fileExists(atPath: $0) }) else {
            throw ValidationError("no compose file \(file), here or among the installed ones (\(programs)/../../share/tether/compose)")
        }
        let composeFile = URL(fileURLWithPath: located).standardizedFileURL.path
        let binaries = binDir ?? programs
        // A set whose supervisor died: what it left running goes first, said in words.
        let control = ComposeControl(runDirectory: runDirectory.path)
        if let state = control.paths.readState(), !control.supervisorIsRunning(state) {
            let stopped = await control.stopWhatADeadSupervisorLeft()
            if !stopped.isEmpty {
                FileHandle.standardError.write(
                    Data(
                        "tether-compose: the last set's supervisor (pid \(state.supervisorPID)) had died; stopped what it left running: \(stopped.joined(separator: ", "))\n"
                            .utf8))
            }
        }
        let options = Supervisor.Options(
            composeFile: composeFile, runDirectory: runDirectory, stateDirectory: stateDirectory, binaryDirectory: binaries, attached: !detach,
            settings: settings)
        // A variable a program needs and nobody set: said now, and nothing started.
        let loaded = try ComposeFile.load(path: composeFile)
        let unset = loaded.unsetSettings(variables: Supervisor.variables(of: loaded, options: options))
        if !unset.isEmpty {
            throw ConfigurationProblem.exit(
                "tether-compose",
                "\(file) cannot start as configured: \(unset.joined(separator: "; ")); set \(unset.count == 1 ? "it" : "them") in the environment of tether-compose up"
            )
        }
        if detach {
            try await startDetached(runDirectory: runDirectory, stateDirectory: stateDirectory, composeFile: composeFile, binaries: binaries)
            return
        }
        let supervisor = try Supervisor(options: options, logger: Logger(label: "tether-compose"))
        try await supervisor.run()
    }

    private func startDetached(runDirectory: RunDirectory, stateDirectory: StateDirectory, composeFile: String, binaries: String) async throws {
        try runDirectory.prepare()
        let control = ComposeControl(runDirectory: runDirectory.path)
        if let state = control.paths.readState(), control.supervisorIsRunning(state) {
            throw ComposeError(.alreadyRunning, "a set is already running in \(runDirectory.path) (supervisor pid \(state.supervisorPID)); stop it with down")
        }
        try FileManager.default.createDirectory(atPath: control.paths.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try? FileManager.default.removeItem(atPath: control.paths.state)
        let pid = try ComposeControl.spawnDetached(
            executable: CommandLine.executablePath,
            arguments: ["up", "--file", composeFile, "--bin-dir", binaries, "--run-dir", runDirectory.path, "--state-dir", stateDirectory.path],
            logPath: control.paths.supervisorLog)
        let deadline = ContinuousClock.now + .seconds(readyTimeout)
        while ContinuousClock.now < deadline {
            if let state = control.paths.readState(), state.supervisorPID == pid, state.programs.allSatisfy(\.ready) {
                print(await control.table())
                return
            }
            // A program that cannot run as configured will not be ready: said at once.
            if let state = control.paths.readState(), state.supervisorPID == pid,
                let stuck = state.programs.first(where: { $0.phase == .misconfigured })
            {
                print(await control.table())
                throw ConfigurationProblem.exit(
                    "tether-compose",
                    "\(stuck.name) cannot run as configured: \(stuck.problem ?? "see its log"); the rest of the set runs; fix it, then tether-compose restart \(stuck.name)"
                )
            }
            if kill(pid, 0) != 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        print(await control.table())
        throw ComposeError(.notReady, "the set is not ready after \(readyTimeout) s; see \(control.paths.supervisorLog) and the logs command")
    }
}

struct Down: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Stop the set: SIGTERM, then SIGKILL after a deadline.")

    @OptionGroup var set: SetOptions

    @Option(help: "Seconds to wait before killing.")
    var timeout: Double = 30

    func run() async throws {
        print(await ComposeControl(runDirectory: set.resolved.path).down(deadline: .seconds(timeout)))
    }
}

struct Ps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the programs of the set: state, pid, readiness, restarts, uptime.")

    @OptionGroup var set: SetOptions

    @Flag(help: "Print the supervisor's state file as JSON.")
    var json = false

    func run() async throws {
        let control = ComposeControl(runDirectory: set.resolved.path)
        if json {
            guard let (state, _) = await control.currentState() else { return print("null") }
            print(String(decoding: try ComposePaths.encode(state), as: UTF8.self))
        } else {
            print(await control.table())
        }
    }
}

struct Logs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a program's log.")

    @OptionGroup var set: SetOptions

    @Argument(help: "The program's name in the compose file (bus, gateway, connd, …), or 'compose' for the supervisor.")
    var name: String

    @Flag(name: .shortAndLong, help: "Keep printing what the program writes.")
    var follow = false

    func run() async throws {
        let paths = ComposePaths(runDirectory: set.resolved.path)
        let path = name == "compose" ? paths.supervisorLog : paths.log(name)
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ComposeError(.notFound, "no log for '\(name)' at \(path)")
        }
        while true {
            let data = handle.readDataToEndOfFile()
            if !data.isEmpty { FileHandle.standardOutput.write(data) }
            guard follow else { return }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

struct Restart: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop a program (SIGTERM, then SIGKILL after the deadline) and start it again, whatever its restart policy.")

    @OptionGroup var set: SetOptions

    @Argument(help: "The program's name in the compose file.")
    var name: String

    @Option(help: "Seconds to wait for it to be ready again.")
    var timeout: Double = 60

    func run() async throws {
        let control = ComposeControl(runDirectory: set.resolved.path)
        print(try await ConfigurationProblem.guarding("tether-compose") { try await control.restart(program: name, timeout: .seconds(timeout)) })
    }
}

struct Kill: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a signal (SIGKILL unless told) to a program, as a crash would; its restart policy applies.")

    @OptionGroup var set: SetOptions

    @Argument(help: "The program's name in the compose file.")
    var name: String

    @Option(name: .shortAndLong, help: "The signal: KILL, TERM, INT, HUP, STOP, CONT or a number.")
    var signal = "KILL"

    func run() async throws {
        let names: [String: Int32] = ["KILL": SIGKILL, "TERM": SIGTERM, "INT": SIGINT, "HUP": SIGHUP, "STOP": SIGSTOP, "CONT": SIGCONT]
        let upper = signal.uppercased()
        guard let number = names[upper.hasPrefix("SIG") ? String(upper.dropFirst(3)) : upper] ?? Int32(signal) else {
            throw ValidationError("unknown signal '\(signal)'")
        }
        print(try await ComposeControl(runDirectory: set.resolved.path).send(signal: number, toProgram: name))
    }
}

extension CommandLine {
    /// This executable's absolute path.
    static var executablePath: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? arguments[0]
    }
}
