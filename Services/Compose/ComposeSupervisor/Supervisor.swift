import Foundation
public import Logging
public import TetherBus
import TetherSchema
import TetherService
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// Starts the programs of a compose file in order, each in its own process group, restarts
/// those that exit by their policy, and stops them in reverse order on SIGTERM or SIGINT:
/// SIGTERM to the group, then SIGKILL after a deadline.
public actor Supervisor {
    /// How the supervisor runs.
    public struct Options: Sendable {
        public var composeFile: String
        public var runDirectory: RunDirectory
        /// Where the programs keep what must last (`TETHER_STATE` in their environment).
        public var stateDirectory: StateDirectory
        /// Where program executables are looked up.
        public var binaryDirectory: String
        /// Copy each program's output to standard output, prefixed with its name.
        public var attached: Bool
        /// How long a program has to exit after SIGTERM before it gets SIGKILL.
        public var stopDeadline: Duration
        /// The user's settings (``SettingsFile``): variables below the environment and above the file's own.
        public var settings: [String: String]

        public init(
            composeFile: String, runDirectory: RunDirectory, stateDirectory: StateDirectory, binaryDirectory: String, attached: Bool,
            stopDeadline: Duration = .seconds(5), settings: [String: String] = [:]
        ) {
            self.settings = settings
            self.composeFile = composeFile
            self.runDirectory = runDirectory
            self.stateDirectory = stateDirectory
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
    private let output = OutputWriter()
    /// What decides, run by ``driver``; everything below carries out its actions.
    private let initial: SupervisorMachine
    private let driver = MachineDriver<SupervisorMachine, ContinuousClock>(clock: ContinuousClock())
    /// The programs' statuses after the last round of events: what `ps` and `restart` answer.
    private var statuses: [ProgramStatus]
    /// The statuses last written to the state file.
    private var written: [ProgramStatus] = []
    /// The bus, while the set runs: the programs held back are said on it.
    private var bus: BusClient?
    /// The readiness topics' subscription and its reader, while they are followed.
    private var readiness: Task<Void, Never>?
    /// The programs held back as last said on `sys.misconfigured`.
    private var saidMisconfigured: [MisconfiguredPrograms.Program] = []
    /// Each program's current run.
    private var processes: [String: ProgramProcess] = [:]
    /// Runs started, whose output and exit are to be followed.
    private let newRuns: AsyncStream<(name: String, process: ProgramProcess)>
    private let follow: AsyncStream<(name: String, process: ProgramProcess)>.Continuation
    /// Said once the machine has stopped the set.
    private let stopped: AsyncStream<Void>
    private let stop: AsyncStream<Void>.Continuation
    private var finished = false

    public init(options: Options, logger: Logger) throws {
        self.options = options
        self.file = try ComposeFile.load(path: options.composeFile)
        self.paths = ComposePaths(runDirectory: options.runDirectory.path)
        self.logger = logger
        self.variables = Self.variables(of: file, options: options)
        self.initial = SupervisorMachine(programs: file.programs, stopDeadline: options.stopDeadline, now: .now)
        statuses = initial.statuses
        (newRuns, follow) = AsyncStream.makeStream()
        (stopped, stop) = AsyncStream.makeStream()
    }

    /// The variables the compose file's `${NAME}`s are made from: its `environment:`, then the
    /// user's settings, then the supervisor's own environment, then the run and state
    /// directories and the file's folder.
    public static func variables(of file: ComposeFile, options: Options) -> [String: String] {
        var variables = file.environment.merging(options.settings) { $1 }
        for (key, value) in ProcessInfo.processInfo.environment { variables[key] = value }
        variables["TETHER_RUN"] = options.runDirectory.path
        variables[StateDirectory.environmentVariable] = options.stateDirectory.path
        variables["TETHER_COMPOSE_DIR"] = URL(fileURLWithPath: options.composeFile).deletingLastPathComponent().path
        return variables
    }

    /// Runs the set until SIGTERM or SIGINT, then stops it.
    public func run() async throws {
        try options.runDirectory.prepare()
        try options.stateDirectory.prepare()
        try FileManager.default.createDirectory(atPath: paths.directory + "/logs", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let lock = try LockFile(path: paths.lock, name: "a compose supervisor for \(options.runDirectory.path)")
        try createTokens()
        writeState()

        let bus = try BusClient(source: "tether-compose", runDirectory: options.runDirectory, logger: logger)
        self.bus = bus
        let beats = try await bus.subscribe(to: [Topic.heartbeat.name])
        let commands = try await bus.serve(endpoint: ComposeCommands.endpoint)
        let dispatcher = controlCommands(bus: bus)
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let (driver, initial, newRuns, stopped) = (self.driver, self.initial, self.newRuns, self.stopped)

        await withTaskGroup(of: Void.self) { group in
            group.addTask { await driver.run(initial, perform: { await self.carryOut($0) }, observe: { await self.observed($0) }) }
            group.addTask { await Self.forwardReadiness(beats, to: driver) }
            group.addTask { await dispatcher.run(commands) }
            group.addTask {
                for await signal in signals {
                    await self.log("received \(signal): stopping the set")
                    driver.send(.stopRequested)
                }
            }
            group.addTask {
                await withDiscardingTaskGroup { runs in
                    for await run in newRuns { runs.addTask { await self.follow(run.name, run.process) } }
                }
            }
            driver.send(.begin)
            for await _ in stopped { break }
            group.cancelAll()
        }
        readiness?.cancel()
        self.bus = nil
        await bus.close()
        writeState()
        withExtendedLifetime(lock) {}
    }

    /// Carries out one of the machine's actions.
    private func carryOut(_ action: SupervisorMachine.Action) {
        switch action {
        case .spawn(let name): spawn(name)
        case .signal(let name, let pid, let signal):
            if let process = processes[name], process.pid == pid { process.signalGroup(signal) }
        case .checkConnections(let name, let pid): checkConnections(name, pid: pid)
        case .log(let message): log(message)
        case .followReadiness(let follow): followReadiness(follow)
        case .finished: finished = true
        }
    }

    /// Subscribes to the readiness topics, or drops the subscription (which unsubscribes it).
    private func followReadiness(_ follow: Bool) {
        readiness?.cancel()
        readiness = nil
        let topics = file.programs.compactMap { program -> String? in
            if case .topic(let topic) = program.ready { topic } else { nil }
        }
        guard follow, let bus, !topics.isEmpty else { return }
        let driver = self.driver
        readiness = Task {
            guard let messages = try? await bus.subscribe(to: topics) else { return }
            await Self.forwardReadiness(messages, to: driver)
        }
    }

    /// After each round of events: the state file follows the statuses, and the set's end is said.
    private func observed(_ machine: SupervisorMachine) {
        statuses = machine.statuses
        if statuses != written { writeState() }
        sayMisconfigured()
        if finished { stop.yield() }
    }

    /// A run exited: it is no longer the program's, and the machine hears of it.
    private func exited(_ name: String, _ pid: Int32, status: ExitStatus, said: String?) {
        if processes[name]?.pid == pid { processes[name] = nil }
        driver.send(.exited(name, pid: pid, status: status, said: said))
    }

    /// What a line of a program's output says of its configuration: a Tether program's
    /// `PROGRAM: configuration: WORDS` (``ConfigurationProblem``), or the argument parser's
    /// `Error: WORDS` for a command line it refused.
    static func configurationWords(in line: String) -> String? {
        if let marker = line.range(of: ": " + ConfigurationProblem.marker), line.hasPrefix("tether") {
            return String(line[marker.upperBound...])
        }
        if line.hasPrefix("Error: ") { return String(line.dropFirst("Error: ".count)) }
        return nil
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

    /// Starts one run of the program and tells the machine how that went, at once: its exit
    /// can only be reported after that.
    private func spawn(_ name: String) {
        guard let program = file.programs.first(where: { $0.name == name }) else { return }
        let process: ProgramProcess
        let command: [String]
        do {
            command = try program.command.map { try ComposeFile.expand($0, variables: variables) }
        } catch {
            driver.send(.spawnFailed(name, reason: "\(error)", configuration: true))
            return
        }
        do {
            var environment = ProcessInfo.processInfo.environment
            environment["TETHER_RUN"] = options.runDirectory.path
            environment[StateDirectory.environmentVariable] = options.stateDirectory.path
            environment[SupervisorWatch.environmentVariable] = "\(getpid())"
            process = try ProgramProcess(
                executable: Self.locate(command[0], binaryDirectory: options.binaryDirectory), arguments: Array(command.dropFirst()),
                environment: environment)
        } catch {
            driver.send(.spawnFailed(name, reason: "\(error)"))
            return
        }
        processes[name] = process
        // Heard before anything the run does: its exit is followed only from here.
        driver.send(.spawned(name, pid: process.pid, at: Date()))
        follow.yield((name, process))
    }

    /// Copies a run's output to its log (and to standard output when attached) and reports its exit.
    private nonisolated func follow(_ name: String, _ process: ProgramProcess) async {
        let logFile = LogFile(path: paths.log(name))
        var said: String?
        for await event in process.events {
            switch event {
            case .line(let line):
                logFile.write(line)
                if options.attached { output.write(name, line) }
                if let words = Self.configurationWords(in: line) { said = words }
            case .exited(let status):
                await exited(name, process.pid, status: status, said: said)
            }
        }
    }

    /// A path as it is; a name from the binary directory (Tether's programs), else from PATH.
    static func locate(_ command: String, binaryDirectory: String) -> String {
        if command.contains("/") { return command }
        let beside = binaryDirectory + "/" + command
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        return ProgramProcess.find(command) ?? beside
    }

    // MARK: Control

    /// `ps`, `restart` and `kill`, on the supervisor's own endpoint (``ComposeCommands``).
    private nonisolated func controlCommands(bus: BusClient) -> CommandDispatcher {
        var dispatcher = CommandDispatcher(bus: bus, logger: logger)
        dispatcher.on(ComposeCommands.Status.self) { _ in await self.state }
        dispatcher.on(ComposeCommands.Restart.self) { try await self.restart($0.program) }
        dispatcher.on(ComposeCommands.Kill.self) { try await self.kill($0.program, signal: $0.signal) }
        return dispatcher
    }

    private var state: ComposeState {
        ComposeState(supervisorPID: getpid(), file: options.composeFile, startedAt: startedAt, programs: statuses)
    }

    /// Hands a restart to the machine; answers with the program as it is now.
    private func restart(_ name: String) throws -> ProgramStatus {
        guard let status = statuses.first(where: { $0.name == name }) else { throw unknownProgram(name) }
        driver.send(.restartRequested(name))
        return status
    }

    /// Signals the program's current run, as a crash or an operator would.
    private func kill(_ name: String, signal: Int32) throws -> ComposeCommands.Kill.Reply {
        guard let status = statuses.first(where: { $0.name == name }) else { throw unknownProgram(name) }
        guard let process = processes[name], status.pid == process.pid else {
            throw CommandError("\(name) is not running (\(status.phase.rawValue))")
        }
        process.signalGroup(signal)
        log("sent \(ComposeControl.signalName(signal)) to \(name) (pid \(process.pid)), as asked")
        return .init(words: "sent \(ComposeControl.signalName(signal)) to \(name) (pid \(process.pid))")
    }

    private func unknownProgram(_ name: String) -> CommandError {
        CommandError("no program named '\(name)' in the set (\(file.programs.map(\.name).joined(separator: ", ")))")
    }

    // MARK: Readiness

    /// Heartbeats, and publications on the readiness topics while they are followed, as events for the machine.
    private static func forwardReadiness(_ messages: BusSubscription, to driver: MachineDriver<SupervisorMachine, ContinuousClock>) async {
        for await message in messages {
            if message.topic == .heartbeat {
                guard let beat = try? message.decode(Heartbeat.self) else { continue }
                driver.send(.heartbeat(program: beat.program, pid: beat.pid))
            } else if let pid = message.header.pid {
                driver.send(.published(topic: message.topic.name, pid: pid))
            }
        }
    }

    /// Tries a TCP connection to the program's address off the actor, and reports one that is taken.
    private func checkConnections(_ name: String, pid: Int32) {
        guard case .tcp(let template) = file.programs.first(where: { $0.name == name })?.ready,
            let address = try? ComposeFile.expand(template, variables: variables)
        else { return }
        let driver = self.driver
        Task.detached {
            if Self.acceptsConnections(address) { driver.send(.acceptsConnections(name, pid: pid)) }
        }
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

    // MARK: State

    /// Retains on `sys.misconfigured` the programs held back, when they change, so that every
    /// front end can name the setting to fix.
    private func sayMisconfigured() {
        let held = statuses.filter { $0.phase == .misconfigured }.map { MisconfiguredPrograms.Program(name: $0.name, problem: $0.problem ?? "see its log") }
        guard held != saidMisconfigured, let bus else { return }
        do {
            try bus.retain(MisconfiguredPrograms(programs: held), on: .misconfigured)
            saidMisconfigured = held
        } catch {
            logger.warning("cannot say on the bus which programs cannot run as configured", metadata: ["bus.error": "\(error)"])
        }
    }

    private func writeState() {
        written = statuses
        paths.write(ComposeState(supervisorPID: getpid(), file: options.composeFile, startedAt: startedAt, programs: written))
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
