import CLinux
public import FoundationEssentials
import Synchronization
public import TetherBus

#if canImport(Glibc)
import Glibc
#endif

/// How a program's process ended.
public enum ExitStatus: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    /// The status as `waitpid` reports it.
    init(waitStatus raw: Int32) {
        self = (raw & 0x7f) == 0 ? .exited((raw >> 8) & 0xff) : .signaled(raw & 0x7f)
    }

    /// In words, for the log and `ps`.
    public var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .signaled(let signal): "was killed by signal \(signal)\(signal == SIGKILL ? " (SIGKILL)" : "")"
        }
    }
}

/// Why a program could not be started.
public typealias ProgramStartError = CodedError<ProgramStartErrorCode>

/// What kept a program from starting.
public enum ProgramStartErrorCode: String, ErrorCode {
    /// No pipe for its output.
    case pipe
    /// The process could not be spawned (no such executable, no permission, no memory).
    case spawn
}

/// One run of a program (a supervised Tether program, a helper such as dbus-monitor or
/// secret-tool): its standard output, and its standard error or not, on one pipe, and a
/// thread of its own that waits on that pipe and on the process's pidfd together. Nothing
/// wakes while the program runs quietly: no ticker, no polling, one blocked thread per
/// program. (swift-subprocess, used before, keeps a task per running process that wakes
/// every second.)
public final class ProgramProcess: Sendable {
    /// Where the program runs.
    public enum Group: Sendable {
        /// A process group of its own: a terminal's Ctrl-C reaches the starter only, and a
        /// stop (``signalGroup(_:)``) reaches whatever the program started.
        case own
        /// The starter's: whatever stops the starter's group stops it too.
        case starters
    }

    /// What the waiting thread reports, in order: output lines, then the exit, last.
    public enum Event: Sendable, Equatable {
        case line(String)
        case exited(ExitStatus)
    }

    /// The process, and its process group.
    public let pid: Int32
    /// The output lines and the exit; finishes after the exit.
    public let events: AsyncStream<Event>
    private let group: Group
    /// Set once the process is reaped: from then on its pid may name another process.
    private let reaped = Atomic<Bool>(false)

    /// A line longer than this is passed on in pieces: a program writing without newlines
    /// must not make the supervisor hold its output without bound.
    static let longestLine = 64 * 1024

    /// Starts `executable` with `arguments` and exactly `environment`; its standard input is
    /// /dev/null and it inherits no other descriptor of the starter's.
    /// - Parameters:
    ///   - standardError: whether the program's standard error joins its output (else /dev/null).
    public init(
        executable: String, arguments: [String], environment: [String: String], group: Group = .own, standardError: Bool = true
    ) throws(ProgramStartError) {
        self.group = group
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else { throw ProgramStartError(.pipe, "cannot make a pipe for \(executable): \(Self.errorText(errno))") }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        // Neither end goes to a program started later (each spawn also closes all but 0-2).
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
        if standardError {
            posix_spawn_file_actions_adddup2(&actions, writeEnd, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        tether_posix_spawn_close_from(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Tether's programs trap SIGTERM and SIGINT (ignored, read from a signal source) and
        // run on threads with signals blocked: the program starts with neither.
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        let groupFlag = group == .own ? POSIX_SPAWN_SETPGROUP : 0
        posix_spawnattr_setflags(&attributes, Int16(groupFlag | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        posix_spawnattr_setpgroup(&attributes, 0)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(writeEnd)
        guard result == 0 else {
            close(readEnd)
            throw ProgramStartError(.spawn, "cannot start \(executable): \(Self.errorText(result))")
        }
        self.pid = pid
        let (events, continuation) = AsyncStream.makeStream(of: Event.self)
        self.events = events
        // Opened while the child is unreaped, so the pid cannot name another process yet.
        let exitDescriptor = tether_pidfd_open(pid)
        startDetachedThread(name: "program-\(pid)") { self.follow(output: readEnd, exit: exitDescriptor, continuation: continuation) }
    }

    /// Sends `signal` to the program (to its whole process group when it has its own),
    /// unless the program was already reaped.
    public func signalGroup(_ signal: Int32) {
        guard !reaped.load(ordering: .acquiring) else { return }
        kill(group == .own ? -pid : pid, signal)
    }

    /// Runs the program to its end and returns its exit and its output: for a short helper
    /// (secret-tool) whose caller waits for it in any case. A caller cancelled meanwhile
    /// stops it (SIGTERM) rather than leave it running.
    public static func output(
        of executable: String, arguments: [String], environment: [String: String], standardError: Bool = false
    ) async throws(ProgramStartError) -> (status: ExitStatus, output: String) {
        let process = try ProgramProcess(
            executable: executable, arguments: arguments, environment: environment, group: .starters, standardError: standardError)
        return await withTaskCancellationHandler {
            var lines: [String] = []
            var status = ExitStatus.exited(-1)
            for await event in process.events {
                switch event {
                case .line(let line): lines.append(line)
                case .exited(let exit): status = exit
                }
            }
            return (status, lines.joined(separator: "\n"))
        } onCancel: {
            process.signalGroup(SIGTERM)
        }
    }

    /// The waiting thread: passes on output lines until the process ends (its pidfd is
    /// readable) or, on a kernel without pidfds, until the output closes; then what is left
    /// of the output, then reaps it and reports its exit.
    private func follow(output: Int32, exit: Int32, continuation: AsyncStream<Event>.Continuation) {
        var lines = LineSplitter(longest: Self.longestLine)
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var outputOpen = true
        func readOutput() -> Bool {
            let count = buffer.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { return true }
            guard count > 0 else { return false }
            for line in lines.append(buffer[..<count]) { continuation.yield(.line(line)) }
            return true
        }
        var watched = [pollfd(fd: output, events: Int16(POLLIN), revents: 0)]
        if exit >= 0 { watched.append(pollfd(fd: exit, events: Int16(POLLIN), revents: 0)) }
        waiting: while true {
            if poll(&watched, nfds_t(watched.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            if outputOpen, watched[0].revents != 0 {
                outputOpen = readOutput()
                if !outputOpen {
                    // Closed output: with a pidfd, the exit is still to come; without, this is the end.
                    watched[0].fd = -1
                    if exit < 0 { break waiting }
                }
            }
            if exit >= 0, watched[1].revents != 0 { break waiting }
        }
        // The process has ended: what it wrote before is in the pipe. Whatever it left running
        // in its group may keep the pipe open, so this reads only what is there now.
        if outputOpen {
            _ = fcntl(output, F_SETFL, fcntl(output, F_GETFL) | O_NONBLOCK)
            while readOutput() {}
        }
        close(output)
        if let last = lines.rest() { continuation.yield(.line(last)) }
        var raw: Int32 = 0
        var waited: pid_t
        repeat { waited = waitpid(pid, &raw, 0) } while waited < 0 && errno == EINTR
        reaped.store(true, ordering: .releasing)
        if exit >= 0 { close(exit) }
        continuation.yield(.exited(waited == pid ? ExitStatus(waitStatus: raw) : .exited(-1)))
        continuation.finish()
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}

/// Cuts a byte stream into lines (without their newline), passing on a line longer than
/// `longest` in pieces; invalid UTF-8 is repaired rather than dropped.
struct LineSplitter {
    let longest: Int
    private var pending: [UInt8] = []

    init(longest: Int) {
        self.longest = longest
    }

    /// The lines `bytes` completes.
    mutating func append(_ bytes: some Collection<UInt8>) -> [String] {
        var lines: [String] = []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                lines.append(String(decoding: pending, as: UTF8.self))
                pending.removeAll(keepingCapacity: true)
            } else {
                pending.append(byte)
                if pending.count >= longest {
                    lines.append(String(decoding: pending, as: UTF8.self))
                    pending.removeAll(keepingCapacity: true)
                }
            }
        }
        return lines
    }

    /// What is left after the last newline, if anything: the end of output without one.
    mutating func rest() -> String? {
        defer { pending.removeAll() }
        return pending.isEmpty ? nil : String(decoding: pending, as: UTF8.self)
    }
}

extension ProgramProcess {
    /// The executable `command` names: a path as it is, else the first of that name on `PATH`;
    /// nil when there is none.
    public static func find(_ command: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if command.contains("/") { return command }
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(command)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs `command` (a path, or a name on `PATH`) to its end, its output discarded, in this
    /// process's environment; its exit status: 127 when it cannot be started, 128 when a
    /// signal ended it. The process is reaped here, not through SIGCHLD, which a starter with
    /// signals blocked never passes on (as Foundation's Process waits for it).
    public static func runToEnd(_ command: String, arguments: [String]) async -> Int32 {
        guard let executable = find(command),
            let process = try? ProgramProcess(executable: executable, arguments: arguments, environment: ProcessInfo.processInfo.environment)
        else { return 127 }
        for await event in process.events {
            guard case .exited(let status) = event else { continue }
            if case .exited(let code) = status { return code }
            return 128
        }
        return 128
    }
}
