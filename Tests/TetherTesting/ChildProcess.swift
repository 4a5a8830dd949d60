import CLinux
import Foundation
import TetherService

#if canImport(Glibc)
import Glibc
#endif

/// A program started by a test in its own process group, its output captured in files.
///
/// Stopping it signals the whole group, so whatever it started goes too; `deinit` kills a
/// group still alive, so a failing test leaves nothing behind.
public final class ChildProcess: @unchecked Sendable {
    // Mutable state is guarded by `lock`: tests wait for a child from several tasks.
    private let lock = NSLock()
    public let pid: Int32
    public let name: String
    public let stdoutPath: String
    public let stderrPath: String
    private var exitStatus: Int32?

    /// Starts `executable` with `arguments` and extra `environment` variables; its standard
    /// input reads `standardInput` (a FIFO lets a test type into it; open it for writing
    /// first, with O_CLOEXEC: the spawn waits until the child has opened it).
    public init(
        _ executable: String, _ arguments: [String] = [], environment: [String: String] = [:], outputDirectory: String, name: String? = nil,
        standardInput: String = "/dev/null"
    ) throws {
        let label = name ?? URL(fileURLWithPath: executable).lastPathComponent
        self.name = label
        stdoutPath = "\(outputDirectory)/\(label).\(UUID().uuidString.prefix(6)).out"
        stderrPath = "\(outputDirectory)/\(label).\(UUID().uuidString.prefix(6)).err"

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, standardInput, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // Nothing else of the test process: an inherited socket (a finished test's HTTP
        // connection, say) would show up in the child's /proc and stay open with it.
        tether_posix_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)

        var variables = ProcessInfo.processInfo.environment
        // The test process stands as the child's supervisor: a Tether program stops when it is
        // gone, so a test run killed before its cleanup (a timeout, a closed pipe) leaves none running.
        variables[SupervisorWatch.environmentVariable] = "\(getpid())"
        for (key, value) in environment { variables[key] = value }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else {
            throw TestFailure("cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        self.pid = pid
    }

    deinit {
        if status == nil {
            kill(-pid, SIGKILL)
            _ = try? waitForExit(timeout: .seconds(5))
        }
    }

    /// The exit status once it exited (a signal shows as 128 + its number).
    public var status: Int32? {
        lock.withLock { () -> Int32? in
            if let exitStatus { return exitStatus }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
            let status = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            exitStatus = status
            return status
        }
    }

    public var isRunning: Bool { status == nil }

    /// Sends `signal` to the process group.
    public func signal(_ signal: Int32) {
        if status == nil { kill(-pid, signal) }
    }

    /// Waits for the process to exit and returns its status; throws when `timeout` passes first.
    @discardableResult
    public func waitForExit(timeout: Duration) throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status { return status }
            usleep(10_000)
        }
        throw TestFailure("\(name) (pid \(pid)) did not exit within \(timeout)")
    }

    /// SIGTERM to the group, then SIGKILL after `deadline`.
    public func stop(deadline: Duration = .seconds(10)) {
        signal(SIGTERM)
        if (try? waitForExit(timeout: deadline)) == nil {
            signal(SIGKILL)
            _ = try? waitForExit(timeout: .seconds(5))
        }
    }

    public var standardOutput: String {
        (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? ""
    }

    public var standardError: String {
        (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
    }
}

/// A test failure in words.
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
