import Foundation
import TetherService

/// The compose supervisor's decisions: which program starts when, what an exit leads to
/// (a restart after a backoff, a program left stopped or failed), a restart asked for, and
/// the stop of the whole set in reverse order. Events in, actions out, time passed in; the
/// ``Supervisor`` starts and signals the processes, runs the one timer and writes the state.
struct SupervisorMachine {
    /// What happened.
    enum Event: Equatable {
        /// The supervisor is up: the first programs may start.
        case begin
        /// `spawn` started the program as `pid`; `at` is the wall-clock time, for `ps`.
        case spawned(String, pid: Int32, at: Date)
        /// `spawn` could not start the program, for the reason given; `configuration` when the
        /// compose file's command for it cannot be made (a variable unset).
        case spawnFailed(String, reason: String, configuration: Bool = false)
        /// The program's run `pid` ended; `said` is what it said of its configuration, if it did.
        case exited(String, pid: Int32, status: ExitStatus, said: String? = nil)
        /// A heartbeat from the executable named `program`, run as `pid`.
        case heartbeat(program: String, pid: Int32)
        /// `pid` published on `topic`.
        case published(topic: String, pid: Int32)
        /// A `checkConnections` found the program's address taking connections.
        case acceptsConnections(String, pid: Int32)
        /// `restart NAME`: stop it and start it again, whatever its policy.
        case restartRequested(String)
        /// SIGTERM or SIGINT: stop the set.
        case stopRequested
        /// The time is now: a restart or a SIGKILL may be due, or a readiness check.
        case timePassed
    }

    /// What the supervisor does, in order.
    enum Action: Equatable {
        /// Start the program (then report `spawned` or `spawnFailed`).
        case spawn(String)
        /// Send `signal` to the process group of the program's run `pid`.
        case signal(String, pid: Int32, signal: Int32)
        /// See whether the program's TCP address takes connections (then report `acceptsConnections`).
        case checkConnections(String, pid: Int32)
        /// Say this in the supervisor's log.
        case log(String)
        /// Follow the readiness topics (`ready: topic:…`), or stop following them: they are
        /// followed only while a program that is ready by one runs, or is about to, and is not
        /// ready yet, since each publication on them (`outbox.summary` at every message) would
        /// wake the supervisor for nothing. Its owner publishes again for a new subscriber.
        case followReadiness(Bool)
        /// The set is stopped: nothing is left running.
        case finished
    }

    /// The backoff before the first restart by policy, and again after a run of more than
    /// ``steadyRun``.
    static let firstDelay = Duration.milliseconds(500)
    static let longestDelay = Duration.seconds(10)
    static let steadyRun = Duration.seconds(10)
    /// How often a TCP readiness check is made while one is awaited.
    static let connectionCheckInterval = Duration.milliseconds(50)
    /// After this long waiting for its dependencies, a program's wait is said in the log.
    static let dependencyPatience = Duration.seconds(60)

    private struct Program {
        let spec: ProgramSpec
        var status: ProgramStatus
        var budget: RestartBudget
        var delay = SupervisorMachine.firstDelay
        /// When the current run started.
        var runStarted: ContinuousClock.Instant?
        /// In backoff: when it starts again.
        var restartDue: ContinuousClock.Instant?
        /// Stopping: when SIGKILL follows the SIGTERM.
        var killDue: ContinuousClock.Instant?
        /// Stopping because `restart` asked: the exit is not judged by the policy.
        var restartRequested = false
        /// Has a process or waits to restart: it counts as supervised.
        var supervised = false
    }

    private var programs: [Program]
    private let stopDeadline: Duration
    private let origin: ContinuousClock.Instant
    /// The programs are launched in file order: the index of the next one.
    private var nextLaunch = 0
    private var waitingSince: ContinuousClock.Instant?
    private var warnedAboutWaiting = false
    private var shuttingDown = false
    private var announcedReady = false
    private var finished = false
    private var nextConnectionCheck: ContinuousClock.Instant?
    /// The pid of the latest heartbeat seen from each executable.
    private var heartbeats: [String: Int32] = [:]
    /// For each readiness topic, the pids that published on it.
    private var publishers: [String: Set<Int32>] = [:]
    /// Whether the readiness topics are followed (``Action/followReadiness(_:)``).
    private var followingReadiness = false

    init(programs: [ProgramSpec], stopDeadline: Duration, now: ContinuousClock.Instant) {
        self.programs = programs.map { Program(spec: $0, status: ProgramStatus(name: $0.name), budget: $0.restartLimit) }
        self.stopDeadline = stopDeadline
        self.origin = now
    }

    /// Every program's status, in file order, for the state file and `ps`.
    var statuses: [ProgramStatus] { programs.map(\.status) }

    /// When `timePassed` is next due, if anything waits for the time.
    var nextDeadline: ContinuousClock.Instant? {
        let dues = programs.flatMap { [$0.restartDue, $0.killDue] } + [nextConnectionCheck, waitingDeadline]
        return dues.compactMap(\.self).min()
    }

    private var waitingDeadline: ContinuousClock.Instant? {
        guard !warnedAboutWaiting, let waitingSince else { return nil }
        return waitingSince + Self.dependencyPatience
    }

    /// Feeds an event that happened at `now`; returns the actions to carry out.
    mutating func handle(_ event: Event, now: ContinuousClock.Instant) -> [Action] {
        guard !finished else { return [] }
        var actions: [Action] = []
        switch event {
        case .begin:
            break
        case .spawned(let name, let pid, let date):
            update(name) {
                $0.status.phase = .running
                $0.status.pid = pid
                $0.status.ready = $0.spec.ready == .none
                $0.status.startedAt = date
                $0.runStarted = now
            }
            actions.append(.log("started \(name) (pid \(pid))"))
            // Started just as the stop began: it is stopped like the others, in its turn.
            if shuttingDown { actions += stopNext(now: now) }
        case .spawnFailed(let name, let reason, let configuration):
            if configuration {
                actions += misconfigured(name, description: "could not be started", problem: reason)
                break
            }
            actions.append(.log("\(name): \(reason)"))
            // Judged by its policy as a failure.
            actions += ended(name, description: "could not be started", exitCode: 1, now: now)
        case .exited(let name, let pid, let status, let said):
            guard programs.first(where: { $0.spec.name == name })?.status.pid == pid else { break }
            let exitCode: Int32? = if case .exited(let code) = status { code } else { nil }
            if let exitCode, TetherExitCode.isConfigurationProblem(exitCode), !shuttingDown,
                programs.first(where: { $0.spec.name == name })?.restartRequested != true
            {
                let problem = said ?? "it exited with status \(exitCode), which says its configuration or command line is wrong; see its log"
                actions += misconfigured(name, description: status.description, problem: problem)
                break
            }
            actions += ended(name, description: status.description, exitCode: exitCode, now: now)
        case .heartbeat(let program, let pid):
            heartbeats[program] = pid
        case .published(let topic, let pid):
            publishers[topic, default: []].insert(pid)
        case .acceptsConnections(let name, let pid):
            update(name) { if $0.status.pid == pid { $0.status.ready = true } }
        case .restartRequested(let name):
            actions += restart(name, now: now)
        case .stopRequested:
            guard !shuttingDown else { break }
            shuttingDown = true
            actions += stopNext(now: now)
        case .timePassed:
            actions += timePassed(now: now)
        }
        markReady()
        if !shuttingDown { actions += launchWhatIsDue(now: now) }
        if !announcedReady && programs.allSatisfy(\.status.ready) {
            announcedReady = true
            actions.append(.log("all \(programs.count) programs are ready"))
        }
        scheduleConnectionChecks(now: now)
        let awaited =
            !shuttingDown
            && programs.contains { program in
                guard case .topic = program.spec.ready else { return false }
                return program.supervised && !program.status.ready
            }
        if awaited != followingReadiness {
            followingReadiness = awaited
            // Before the program starts, when it starts now; after whatever ended the wait.
            if awaited { actions.insert(.followReadiness(true), at: 0) } else { actions.append(.followReadiness(false)) }
        }
        return actions
    }

    // MARK: Starting

    /// Launches, in file order, each program whose dependencies are ready.
    private mutating func launchWhatIsDue(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        while nextLaunch < programs.count {
            let program = programs[nextLaunch]
            let waiting = program.spec.dependsOn.filter { name in programs.first { $0.spec.name == name }?.status.ready != true }
            guard waiting.isEmpty else {
                if waitingSince == nil { waitingSince = now }
                if let due = waitingDeadline, now >= due {
                    warnedAboutWaiting = true
                    actions.append(.log("\(program.spec.name) still waits for \(waiting.joined(separator: ", ")) to be ready"))
                }
                return actions
            }
            nextLaunch += 1
            waitingSince = nil
            warnedAboutWaiting = false
            actions += start(program.spec.name)
        }
        return actions
    }

    private mutating func start(_ name: String) -> [Action] {
        update(name) {
            $0.supervised = true
            $0.restartDue = nil
            $0.status.problem = nil
            $0.status.phase = .starting
        }
        return [.spawn(name)]
    }

    /// Marks ready each running program whose heartbeat or topic came from its current run.
    private mutating func markReady() {
        for index in programs.indices where !programs[index].status.ready {
            guard let pid = programs[index].status.pid, programs[index].status.phase == .running else { continue }
            let ready =
                switch programs[index].spec.ready {
                case .none: true
                case .heartbeat: heartbeats[Self.executableName(programs[index].spec)] == pid
                case .topic(let topic): publishers[topic]?.contains(pid) == true
                case .tcp: false
                }
            if ready { programs[index].status.ready = true }
        }
    }

    /// A TCP readiness check every ``connectionCheckInterval`` while a running program awaits one.
    private mutating func scheduleConnectionChecks(now: ContinuousClock.Instant) {
        let awaiting = programs.contains { program in
            if case .tcp = program.spec.ready { return program.status.phase == .running && !program.status.ready }
            return false
        }
        if !awaiting {
            nextConnectionCheck = nil
        } else if nextConnectionCheck == nil {
            nextConnectionCheck = now
        }
    }

    /// The name a program's heartbeat carries: its executable's name.
    static func executableName(_ program: ProgramSpec) -> String {
        String(program.command.first?.split(separator: "/").last ?? "")
    }

    // MARK: Exits and restarts

    /// A run ended (or could not start): the policy, a requested restart or the stop decides
    /// what follows. `exitCode` is nil for a run a signal ended.
    private mutating func ended(_ name: String, description: String, exitCode: Int32?, now: ContinuousClock.Instant) -> [Action] {
        guard let index = index(of: name) else { return [] }
        let ranFor = programs[index].runStarted.map { $0.duration(to: now) } ?? .zero
        update(name) {
            $0.status.phase = .exited
            $0.status.pid = nil
            $0.status.ready = false
            $0.status.lastExit = description
            $0.runStarted = nil
            $0.killDue = nil
        }
        if shuttingDown {
            update(name) {
                $0.supervised = false
                $0.restartRequested = false
                $0.status.phase = .stopped
            }
            return stopNext(now: now)
        }
        let program = programs[index]
        if program.restartRequested {
            update(name) {
                $0.restartRequested = false
                $0.status.restarts += 1
                $0.delay = Self.firstDelay
            }
            return [.log("\(name) \(description); restarting it as asked")] + start(name)
        }
        guard program.spec.restart.restarts(afterExitStatus: exitCode) else {
            update(name) { $0.supervised = false }
            return [.log("\(name) \(description); restart policy '\(program.spec.restart.rawValue)' leaves it stopped")]
        }
        let elapsed = origin.duration(to: now)
        guard programs[index].budget.spend(at: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) else {
            update(name) {
                $0.supervised = false
                $0.status.phase = .failed
            }
            return [
                .log(
                    "\(name) \(description); it was restarted \(program.budget.limit) times within \(Int(program.budget.window)) s: giving up (restart it with 'restart \(name)')"
                )
            ]
        }
        // A program that ran a while gets a fresh backoff; one that keeps dying waits longer each time.
        let delay = ranFor > Self.steadyRun ? Self.firstDelay : program.delay
        update(name) {
            $0.status.phase = .backoff
            $0.restartDue = now + delay
            $0.delay = min(delay * 2, Self.longestDelay)
        }
        return [.log("\(name) \(description); restarting in \(delay)")]
    }

    /// The program cannot run as configured: left stopped, with the words, until `restart`.
    private mutating func misconfigured(_ name: String, description: String, problem: String) -> [Action] {
        update(name) {
            $0.status.phase = .misconfigured
            $0.status.pid = nil
            $0.status.ready = false
            $0.status.lastExit = description
            $0.status.problem = problem
            $0.runStarted = nil
            $0.killDue = nil
            $0.supervised = false
        }
        return [.log("\(name) cannot run as configured: \(problem). It is not started again until you fix that and run 'restart \(name)'")]
    }

    /// Stops the program and starts it again, whatever its policy; starts it if it had stopped for good.
    private mutating func restart(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard !shuttingDown, let index = index(of: name) else { return [] }
        var actions: [Action] = [.log("restart of \(name) requested")]
        let program = programs[index]
        switch program.status.phase {
        case .running:
            guard let pid = program.status.pid else { break }
            let killDue = now + stopDeadline
            update(name) {
                $0.restartRequested = true
                $0.status.phase = .stopping
                $0.killDue = killDue
            }
            actions.append(.signal(name, pid: pid, signal: SIGTERM))
        case .exited, .failed, .misconfigured, .stopped:
            // Stopped for good (by its policy or its restart budget): started again.
            guard !program.supervised, index < nextLaunch else { break }
            update(name) { $0.status.restarts += 1 }
            actions += start(name)
        case .waiting, .starting, .stopping, .backoff:
            // Starting, stopping, waiting out its backoff (it starts shortly anyway) or not launched yet.
            break
        }
        return actions
    }

    private mutating func timePassed(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        for index in programs.indices {
            let name = programs[index].spec.name
            if let due = programs[index].killDue, now >= due, let pid = programs[index].status.pid {
                programs[index].killDue = nil
                actions.append(.log("\(name) did not stop within \(stopDeadline) of SIGTERM: killing it (SIGKILL)"))
                actions.append(.signal(name, pid: pid, signal: SIGKILL))
            }
            if let due = programs[index].restartDue, now >= due, !shuttingDown {
                programs[index].status.restarts += 1
                actions += start(name)
            }
        }
        if let due = nextConnectionCheck, now >= due {
            nextConnectionCheck = now + Self.connectionCheckInterval
            for program in programs where !program.status.ready && program.status.phase == .running {
                guard case .tcp = program.spec.ready, let pid = program.status.pid else { continue }
                actions.append(.checkConnections(program.spec.name, pid: pid))
            }
        }
        return actions
    }

    // MARK: Stopping

    /// Stops the set in reverse order, one program at a time: the last one still running gets
    /// SIGTERM, and SIGKILL after the deadline; the one before it is stopped once it has
    /// exited. Programs waiting out a backoff are left stopped; when nothing runs any more,
    /// the set is finished.
    private mutating func stopNext(now: ContinuousClock.Instant) -> [Action] {
        let killDue = now + stopDeadline
        for index in programs.indices.reversed() {
            let program = programs[index]
            let name = program.spec.name
            switch program.status.phase {
            case .stopping:
                // Already stopping (a restart asked for it): its exit moves the stop on.
                update(name) {
                    $0.restartRequested = false
                    if $0.killDue == nil { $0.killDue = killDue }
                }
                return []
            case .running:
                guard let pid = program.status.pid else { continue }
                update(name) {
                    $0.status.phase = .stopping
                    $0.killDue = killDue
                }
                return [.log("stopping \(name)"), .signal(name, pid: pid, signal: SIGTERM)]
            case .starting:
                // Its start is under way: stopped once it reports.
                return []
            case .backoff:
                update(name) {
                    $0.restartDue = nil
                    $0.supervised = false
                    $0.status.phase = .stopped
                }
            case .waiting, .exited, .failed, .misconfigured, .stopped:
                continue
            }
        }
        finished = true
        return [.finished]
    }

    // MARK: Helpers

    private func index(of name: String) -> Int? {
        programs.firstIndex { $0.spec.name == name }
    }

    private mutating func update(_ name: String, _ change: (inout Program) -> Void) {
        guard let index = index(of: name) else { return }
        change(&programs[index])
    }
}

extension SupervisorMachine: DrivenMachine {
    static var timePassed: Event { .timePassed }
}
