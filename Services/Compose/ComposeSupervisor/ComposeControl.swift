import CLinux
public import Foundation
import Logging
import TetherBus
import TetherSchema
import TetherService

#if canImport(Glibc)
import Glibc
#endif

/// What `ps`, `restart`, `kill` and `down` do from another process than the supervisor:
/// the first three ask it on its own endpoint (``ComposeCommands``); `down` signals it, and
/// after a supervisor that died, reads the state it wrote.
public struct ComposeControl: Sendable {
    public let paths: ComposePaths
    private let runDirectory: String

    public init(runDirectory: String) {
        self.runDirectory = runDirectory
        paths = ComposePaths(runDirectory: runDirectory)
    }

    /// Whether the supervisor that wrote the state still runs.
    public func supervisorIsRunning(_ state: ComposeState) -> Bool {
        isAlive(state.supervisorPID)
    }

    /// After a supervisor that died (SIGKILL, a crash): stops whatever of its set still runs,
    /// each program's process group (SIGTERM, then SIGKILL after `deadline`), and says what it
    /// stopped. A process is only taken for one of the set when its environment names that
    /// supervisor, so a reused pid is left alone. Nothing when the supervisor runs or no set ran.
    public func stopWhatADeadSupervisorLeft(deadline: Duration = .seconds(5)) async -> [String] {
        guard let state = paths.readState(), !supervisorIsRunning(state) else { return [] }
        let marker = "\(SupervisorWatch.environmentVariable)=\(state.supervisorPID)"
        let left = state.programs.compactMap { program -> (String, Int32)? in
            guard let pid = program.pid, isAlive(pid), let environment = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return nil }
            let variables = environment.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return variables.contains(marker) ? (program.name, pid) : nil
        }
        for (_, pid) in left { kill(-pid, SIGTERM) }
        let end = ContinuousClock.now + deadline
        while left.contains(where: { isAlive($0.1) }), ContinuousClock.now < end {
            try? await Task.sleep(for: .milliseconds(50))
        }
        for (_, pid) in left where isAlive(pid) { kill(-pid, SIGKILL) }
        return left.map { "\($0.0) (pid \($0.1))" }
    }

    /// The set now: the running supervisor's answer, else what the last one wrote when it
    /// died (its programs shown orphaned or stopped); nil when no set has run here.
    public func currentState() async -> (state: ComposeState, supervisorRunning: Bool)? {
        guard let written = paths.readState() else { return nil }
        guard supervisorIsRunning(written) else { return (written, false) }
        let answered = try? await withSupervisor { try await Self.ask($0, ComposeCommands.Status.self, .init(), timeout: .seconds(2)) }
        if let answered { return (answered, true) }
        return (written, true)
    }

    /// The `ps` table.
    public func table(now: Date = Date()) async -> String {
        guard let (state, running) = await currentState() else { return "no set has run in \(paths.directory)" }
        let supervisor = running ? "running (pid \(state.supervisorPID))" : "not running"
        var table = TextTable(header: ["NAME", "STATE", "PID", "READY", "RESTARTS", "UPTIME", "LAST EXIT"])
        for program in state.programs {
            let alive = program.pid.map(isAlive) ?? false
            let phase = running ? program.phase.rawValue : (alive ? "orphaned" : "stopped")
            let uptime = program.startedAt.map { alive ? uptimeWords(now.timeIntervalSince($0)) : "-" } ?? "-"
            table.append([
                program.name, phase, program.pid.map(String.init) ?? "-", program.ready ? "yes" : "no", "\(program.restarts)", uptime,
                program.lastExit ?? "-",
            ])
        }
        let problems = state.programs.compactMap { program in
            program.phase == .misconfigured && running ? "\(program.name) cannot run as configured: \(program.problem ?? "see its log")" : nil
        }
        let lines = ["supervisor: \(supervisor), file \(state.file)", table.render()] + problems
        return lines.joined(separator: "\n")
    }

    /// Stops the set: SIGTERM to the supervisor, which stops its programs in order; after
    /// `deadline`, SIGKILL to it and to every program group it left. Returns what it did, in words.
    public func down(deadline: Duration = .seconds(30)) async -> String {
        guard let state = paths.readState() else { return "nothing to stop: no set has run in \(paths.directory)" }
        var report: [String] = []
        if isAlive(state.supervisorPID) {
            kill(state.supervisorPID, SIGTERM)
            let end = ContinuousClock.now + deadline
            while isAlive(state.supervisorPID) && ContinuousClock.now < end {
                try? await Task.sleep(for: .milliseconds(50))
            }
            if isAlive(state.supervisorPID) {
                kill(state.supervisorPID, SIGKILL)
                report.append("the supervisor did not stop within \(deadline); killed it")
            } else {
                report.append("stopped the set")
            }
        }
        // Programs a supervisor killed with SIGKILL could not stop: their groups go now.
        for program in paths.readState()?.programs ?? state.programs {
            guard let pid = program.pid, isAlive(pid) else { continue }
            kill(-pid, SIGKILL)
            report.append("killed \(program.name) (pid \(pid)), left behind")
        }
        return report.isEmpty ? "the set was not running" : report.joined(separator: "\n")
    }

    /// Asks the supervisor to send `signal` to the program's process group, as a crash or an
    /// operator would; its restart policy then applies. Returns what it did, in words.
    public func send(signal: Int32 = SIGKILL, toProgram name: String) async throws -> String {
        try runningSupervisor()
        return try await withSupervisor { try await Self.ask($0, ComposeCommands.Kill.self, .init(program: name, signal: signal)).words }
    }

    /// Asks the supervisor to stop the program and start it again, and waits until the new
    /// run is ready. Returns the program's `ps` line.
    public func restart(program name: String, timeout: Duration = .seconds(60)) async throws -> String {
        try runningSupervisor()
        let problem: String? = try await withSupervisor { bus in
            let before = try await Self.ask(bus, ComposeCommands.Restart.self, .init(program: name))
            let end = ContinuousClock.now + timeout
            while ContinuousClock.now < end {
                let state = try? await Self.ask(bus, ComposeCommands.Status.self, .init(), timeout: .seconds(2))
                if let program = state?.programs.first(where: { $0.name == name }), program.restarts > before.restarts {
                    if program.ready, program.pid != nil, program.pid != before.pid { return nil }
                    // It ran and said its configuration is wrong: no use waiting.
                    if program.phase == .misconfigured { return program.problem ?? "see its log" }
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw ComposeError(.notReady, "\(name) is not running and ready again after \(timeout); see the logs command")
        }
        if let problem {
            throw ConfigurationProblem("\(name) cannot run as configured: \(problem); fix it, then restart it again")
        }
        return await table().split(separator: "\n").first { $0.hasPrefix(name + " ") }.map(String.init) ?? "restarted \(name)"
    }

    /// Throws when no supervisor runs here.
    private func runningSupervisor() throws {
        guard let state = paths.readState(), supervisorIsRunning(state) else {
            throw ComposeError(.notRunning, "no set is running in \(paths.directory)")
        }
    }

    /// Runs `body` with one bus client for the supervisor's endpoint, closed afterwards.
    private func withSupervisor<Result>(_ body: (BusClient) async throws -> Result) async throws -> Result {
        let bus = try BusClient(source: "tether-compose", runDirectory: RunDirectory(path: runDirectory), logger: Logger(label: "tether-compose"))
        do {
            let result = try await body(bus)
            await bus.close()
            return result
        } catch {
            await bus.close()
            throw error
        }
    }

    /// A command to the running supervisor, on its own endpoint; its refusal in its words.
    private static func ask<Command: BusCommand>(
        _ bus: BusClient, _ command: Command.Type, _ request: Command.Request, timeout: Duration = .seconds(5)
    ) async throws -> Command.Reply {
        do {
            return try await bus.request(command, request, timeout: timeout, attempts: 1)
        } catch {
            if let refusal = error.refusal { throw ComposeError(.supervisor, refusal) }
            if error.wentUnanswered { throw ComposeError(.supervisor, "the supervisor did not answer within \(timeout) (\(ComposeCommands.endpoint))") }
            throw ComposeError(.supervisor, "\(error)")
        }
    }

    static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGKILL: "SIGKILL"
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        case SIGSTOP: "SIGSTOP"
        case SIGCONT: "SIGCONT"
        default: "signal \(signal)"
        }
    }

    private func isAlive(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        if kill(pid, 0) != 0 && errno == ESRCH { return false }
        // A zombie is not alive; /proc tells.
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = status.lastIndex(of: ")")
        else { return true }
        return status[status.index(close, offsetBy: 2)] != "Z"
    }

    /// Starts `arguments` as a new session detached from this terminal, output to `logPath`.
    public static func spawnDetached(executable: String, arguments: [String], logPath: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, tether_posix_spawn_setsid())
        var pid: pid_t = 0
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard rc == 0 else { throw ComposeError(.cannotStart, "cannot start \(executable): \(String(cString: strerror(rc)))") }
        return pid
    }
}
