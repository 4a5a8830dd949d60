#if canImport(Glibc)
import Glibc
#endif
import Foundation
public import Logging
public import TetherBus
import TetherSchema
import TetherService
import UnixSignals

/// Starts the programs of a compose file in order, each in its own process group, restarts
/// those that exit by their policy, and stops them in reverse order on SIGTERM or SIGINT:
/// SIGTERM to the group, then SIGKILL after a deadline.
public actor Supervisor {
    /// How the supervisor runs.
    public struct Options: Sendable {
        public var composeFile: String
        public var runDirectory: RunDirectory
        /// Where program executables are looked up.
        public var binaryDirectory: String
        /// Copy each program's output to standard output, prefixed with its name.
        public var attached: Bool
        /// How long a program has to exit after SIGTERM before it gets SIGKILL.
        public var stopDeadline: Duration

        public init(composeFile: String, runDirectory: RunDirectory, binaryDirectory: String, attached: Bool, stopDeadline: Duration = .seconds(5)) {
            self.composeFile = composeFile
            self.runDirectory = runDirectory
            self.binaryDirectory = binaryDirectory
            self.attached = attached
            self.stopDeadline = stopDeadline
        }
    }

    private let options: Options
    private let file: ComposeFile
    private let paths: ComposePaths
    private let logger: Logger
    private let variables: [String: String]
    private let startedAt = Date()
    private var statuses: [String: ProgramStatus] = [:]
    private var stopRequests: [String: AsyncStream<Void>.Continuation] = [:]
    /// The pid of the latest heartbeat seen from each program.
    private var heartbeats: [String: Int32] = [:]
    /// For each readiness topic, the pids that published on it.
    private var publishers: [String: Set<Int32>] = [:]
    /// Programs with a supervising task (running, starting or waiting to restart).
    private var supervised: Set<String> = []
    /// Programs being restarted on request: their next exit is not judged by their policy.
    private var restartRequested: Set<String> = []
    private var shuttingDown = false
    private var announcedReady = false
    private let output = OutputWriter()
    /// Programs to supervise: every program once, and again when `restart` asks for one that stopped.
    private let launches: AsyncStream<ProgramSpec>.Continuation
    private let launchRequests: AsyncStream<ProgramSpec>

    public init(options: Options, logger: Logger) throws {
        self.options = options
        self.file = try ComposeFile.load(path: options.composeFile)
        self.paths = ComposePaths(runDirectory: options.runDirectory.path)
        self.logger = logger
        var variables = file.environment
        for (key, value) in ProcessInfo.processInfo.environment { variables[key] = value }
        variables["TETHER_RUN"] = options.runDirectory.path
        variables["TETHER_COMPOSE_DIR"] = URL(fileURLWithPath: options.composeFile).deletingLastPathComponent().path
        self.variables = variables
        for program in file.programs { statuses[program.name] = ProgramStatus(name: program.name) }
        (launchRequests, launches) = AsyncStream<ProgramSpec>.makeStream()
    }

    /// Runs the set until SIGTERM or SIGINT, then stops it.
    public func run() async throws {
        try options.runDirectory.prepare()
        try FileManager.default.createDirectory(atPath: paths.directory + "/logs", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let lock = try LockFile(path: paths.lock, name: "a compose supervisor for \(options.runDirectory.path)")
        try createTokens()
        writeState()

        let bus = try BusClient(source: "tether-compose", runDirectory: options.runDirectory, logger: logger)
        let readinessTopics = file.programs.compactMap { program -> String? in
            if case .topic(let topic) = program.ready { topic } else { nil }
        }
        let beats = try await bus.subscribe(to: [Topic.heartbeat.name] + readinessTopics)
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint, .sigusr1)

        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.watchReadiness(beats) }
            group.addTask {
                for await signal in signals {
                    if signal == .sigusr1 {
                        await self.handleRequests()
                        continue
                    }
                    await self.log("received \(signal): stopping the set")
                    await self.beginShutdown()
                    return
                }
            }
            group.addTask {
                for program in self.file.programs {
                    guard await self.waitForDependencies(of: program) else { return }
                    await self.launch(program)
                }
            }
            for await program in launchRequests {
                group.addTask { await self.supervise(program) }
            }
            await stopAll()
            group.cancelAll()
        }
        await bus.close()
        writeState()
        withExtendedLifetime(lock) {}
    }

    // MARK: Starting

    private func createTokens() throws {
        for template in file.tokens {
            let path = try ComposeFile.expand(template, variables: variables)
            guard !FileManager.default.fileExists(atPath: path) else { continue }
            try SecretFile.write(SecretFile.newToken(), to: path)
            log("generated a token in \(path)")
        }
    }

    /// Waits until every dependency is ready; false when the set is shutting down meanwhile.
    private func waitForDependencies(of program: ProgramSpec) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        var warned = false
        while !shuttingDown {
            let waiting = program.dependsOn.filter { statuses[$0]?.ready != true }
            if waiting.isEmpty { return true }
            if ContinuousClock.now > deadline && !warned {
                log("\(program.name) still waits for \(waiting.joined(separator: ", ")) to be ready")
                warned = true
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    private func launch(_ program: ProgramSpec) {
        guard !shuttingDown, supervised.insert(program.name).inserted else { return }
        launches.yield(program)
    }

    private func beginShutdown() {
        shuttingDown = true
        launches.finish()
    }

    // MARK: Requests

    /// Carries out the requests `tether-compose restart` left in the requests folder.
    private func handleRequests() {
        let folder = paths.requests
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        for name in names.sorted() {
            let path = folder + "/" + name
            let request = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            try? FileManager.default.removeItem(atPath: path)
            let words = request.split(separator: " ").map(String.init)
            guard words.count == 2, words[0] == "restart", let program = file.programs.first(where: { $0.name == words[1] }) else {
                log("ignored a request: '\(request)'")
                continue
            }
            restart(program)
        }
    }

    /// Stops the program (SIGTERM, then SIGKILL after the deadline) and starts it again,
    /// whatever its policy; starts it if it had stopped for good.
    private func restart(_ program: ProgramSpec) {
        log("restart of \(program.name) requested")
        if let stop = stopRequests[program.name] {
            restartRequested.insert(program.name)
            update(program.name) { $0.phase = .stopping }
            stop.yield()
        } else if !supervised.contains(program.name) {
            update(program.name) { $0.restarts += 1 }
            launch(program)
        }
        // Otherwise it is waiting out its backoff and starts shortly anyway.
    }

    // MARK: Supervising one program

    private func supervise(_ program: ProgramSpec) async {
        var delay = Duration.milliseconds(500)
        var budget = program.restartLimit
        let clock = ContinuousClock()
        let origin = clock.now
        var finalPhase = ProgramStatus.Phase.stopped
        while !shuttingDown {
            let started = clock.now
            let status = await run(program)
            let description = status?.description ?? "could not be started"
            update(program.name) {
                $0.phase = .exited
                $0.pid = nil
                $0.ready = false
                $0.lastExit = description
            }
            guard !shuttingDown else { break }
            if restartRequested.remove(program.name) != nil {
                log("\(program.name) \(description); restarting it as asked")
                update(program.name) { $0.restarts += 1 }
                delay = .milliseconds(500)
                continue
            }
            let exitCode: Int32? = if case .exited(let code) = status { code } else { nil }
            guard program.restart.restarts(afterExitStatus: status == nil ? 1 : exitCode) else {
                log("\(program.name) \(description); restart policy '\(program.restart.rawValue)' leaves it stopped")
                finalPhase = .exited
                break
            }
            let elapsed = origin.duration(to: clock.now)
            guard budget.spend(at: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) else {
                log("\(program.name) \(description); it was restarted \(budget.limit) times within \(Int(budget.window)) s: giving up (restart it with 'restart \(program.name)')")
                finalPhase = .failed
                break
            }
            // A program that ran a while gets a fresh backoff; one that keeps dying waits longer each time.
            if started.duration(to: clock.now) > .seconds(10) { delay = .milliseconds(500) }
            log("\(program.name) \(description); restarting in \(delay)")
            update(program.name) { $0.phase = .backoff }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(10))
            update(program.name) { $0.restarts += 1 }
        }
        supervised.remove(program.name)
        update(program.name) { $0.phase = finalPhase }
    }

    /// Runs the program once; its exit status, or nil when it could not be started.
    private func run(_ program: ProgramSpec) async -> ExitStatus? {
        let command: [String]
        do {
            command = try program.command.map { try ComposeFile.expand($0, variables: variables) }
        } catch {
            log("\(program.name): \(error)")
            return nil
        }
        let executable = Self.locate(command[0], binaryDirectory: options.binaryDirectory)
        update(program.name) {
            $0.phase = .starting
            $0.startedAt = Date()
        }
        var environment = ProcessInfo.processInfo.environment
        environment["TETHER_RUN"] = options.runDirectory.path
        environment[SupervisorWatch.environmentVariable] = "\(getpid())"
        let process: ProgramProcess
        do {
            process = try ProgramProcess(executable: executable, arguments: Array(command.dropFirst()), environment: environment)
        } catch {
            log("\(program.name): \(error)")
            return nil
        }
        let (stopStream, stopContinuation) = AsyncStream<Void>.makeStream()
        stopRequests[program.name] = stopContinuation
        started(program, pid: process.pid)
        let logFile = LogFile(path: paths.log(program.name))
        let output = self.output
        let attached = options.attached
        let deadline = options.stopDeadline
        let status = await withTaskGroup(of: Void.self) { group -> ExitStatus in
            group.addTask {
                for await _ in stopStream {
                    process.signalGroup(SIGTERM)
                    try? await Task.sleep(for: deadline)
                    process.signalGroup(SIGKILL)
                    return
                }
            }
            group.addTask { await self.awaitReadiness(program, pid: process.pid) }
            var status = ExitStatus.exited(-1)
            for await event in process.events {
                switch event {
                case .line(let line):
                    logFile.write(line)
                    if attached { output.write(program.name, line) }
                case .exited(let exit):
                    status = exit
                }
            }
            group.cancelAll()
            return status
        }
        stopRequests[program.name] = nil
        return status
    }

    private func started(_ program: ProgramSpec, pid: Int32) {
        log("started \(program.name) (pid \(pid))")
        update(program.name) {
            $0.phase = .running
            $0.pid = pid
            $0.ready = program.ready == .none
        }
    }

    /// A path as it is; a name from the binary directory (Tether's programs), else from PATH.
    static func locate(_ command: String, binaryDirectory: String) -> String {
        if command.contains("/") { return command }
        let beside = binaryDirectory + "/" + command
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(directory)/\(command)") {
            return "\(directory)/\(command)"
        }
        return beside
    }

    // MARK: Readiness

    private func awaitReadiness(_ program: ProgramSpec, pid: Int32) async {
        while !Task.isCancelled {
            let ready: Bool =
                switch program.ready {
                case .none: true
                case .heartbeat: heartbeats[Self.programName(program)] == pid
                case .topic(let topic): publishers[topic]?.contains(pid) == true
                case .tcp(let address): (try? ComposeFile.expand(address, variables: variables)).map(Self.acceptsConnections) ?? false
                }
            if ready {
                update(program.name) { if $0.pid == pid { $0.ready = true } }
                return
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    private func watchReadiness(_ messages: BusSubscription) async {
        for await message in messages {
            if message.topic == .heartbeat {
                guard let beat = try? message.decode(Heartbeat.self) else { continue }
                heartbeats[beat.program] = beat.pid
            } else if let pid = message.header.pid {
                publishers[message.topic.name, default: []].insert(pid)
            }
        }
    }

    /// The name a program's heartbeat carries: its executable's name.
    private static func programName(_ program: ProgramSpec) -> String {
        String(program.command[0].split(separator: "/").last ?? "")
    }

    private static func acceptsConnections(_ address: String) -> Bool {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else { return false }
        let host = String(address[..<colon])
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &socketAddress.sin_addr) == 1 else { return false }
        return withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    // MARK: Stopping

    /// Stops the programs in reverse start order, each within the stop deadline.
    private func stopAll() async {
        for program in file.programs.reversed() {
            guard let stop = stopRequests[program.name] else { continue }
            log("stopping \(program.name)")
            update(program.name) { $0.phase = .stopping }
            stop.yield()
            while stopRequests[program.name] != nil {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    // MARK: State

    private func update(_ name: String, _ change: (inout ProgramStatus) -> Void) {
        guard var status = statuses[name] else { return }
        change(&status)
        statuses[name] = status
        writeState()
        if !announcedReady && statuses.values.allSatisfy(\.ready) {
            announcedReady = true
            log("all \(statuses.count) programs are ready")
        }
    }

    private func writeState() {
        paths.write(
            ComposeState(
                supervisorPID: getpid(), file: options.composeFile, startedAt: startedAt,
                programs: file.programs.compactMap { statuses[$0.name] }))
    }

    private func log(_ message: String) {
        output.write("compose", message)
    }
}

/// Appends lines to a program's log file.
struct LogFile: Sendable {
    private let handle: FileHandle?

    init(path: String) {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        handle = FileHandle(forWritingAtPath: path)
        _ = try? handle?.seekToEnd()
    }

    func write(_ line: String) {
        try? handle?.write(contentsOf: Data((line + "\n").utf8))
    }
}

/// Writes `name | line` to standard output, one whole line at a time.
///
/// A line that cannot be written (a full disk under a detached supervisor's log) is lost,
/// and only the line: a log is not worth a dead set.
final class OutputWriter: Sendable {
    func write(_ name: String, _ line: String) {
        let padded = name.count >= 8 ? name : name + String(repeating: " ", count: 8 - name.count)
        try? FileHandle.standardOutput.write(contentsOf: Data("\(padded) | \(line)\n".utf8))
    }
}
