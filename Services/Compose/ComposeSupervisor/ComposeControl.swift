#if canImport(Glibc)
import Glibc
#endif
import CLinux
public import Foundation
import TetherService

/// What `ps`, `down` and `logs` do with a set's files, from another process than the supervisor.
public struct ComposeControl: Sendable {
    public let paths: ComposePaths

    public init(runDirectory: String) {
        paths = ComposePaths(runDirectory: runDirectory)
    }

    /// Whether the supervisor that wrote the state still runs.
    public func supervisorIsRunning(_ state: ComposeState) -> Bool {
        isAlive(state.supervisorPID)
    }

    /// The `ps` table.
    public func table(now: Date = Date()) -> String {
        guard let state = paths.readState() else { return "no set has run in \(paths.directory)" }
        let supervisor = supervisorIsRunning(state) ? "running (pid \(state.supervisorPID))" : "not running"
        var table = TextTable(header: ["NAME", "STATE", "PID", "READY", "RESTARTS", "UPTIME", "LAST EXIT"])
        for program in state.programs {
            let alive = program.pid.map(isAlive) ?? false
            let phase = supervisorIsRunning(state) ? program.phase.rawValue : (alive ? "orphaned" : "stopped")
            let uptime = program.startedAt.map { alive ? uptimeWords(now.timeIntervalSince($0)) : "-" } ?? "-"
            table.append([
                program.name, phase, program.pid.map(String.init) ?? "-", program.ready ? "yes" : "no", "\(program.restarts)", uptime,
                program.lastExit ?? "-",
            ])
        }
        let lines = ["supervisor: \(supervisor), file \(state.file)", table.render()]
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
        guard rc == 0 else { throw ComposeError("cannot start \(executable): \(String(cString: strerror(rc)))") }
        return pid
    }
}
