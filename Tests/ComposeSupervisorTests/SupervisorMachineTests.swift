import Foundation
import Testing
import TetherService
import TetherTesting

@testable import ComposeSupervisor

/// The compose supervisor's decisions, event by event, with time passed in: no processes, no sleeps.
@Suite struct SupervisorMachineTests {
    typealias Event = SupervisorMachine.Event
    typealias Action = SupervisorMachine.Action

    /// A machine over the programs of a compose file written from `yaml`, and the time it is at.
    struct Driver {
        var machine: SupervisorMachine
        var now = ContinuousClock.now
        let date = Date(timeIntervalSince1970: 1_800_000_000)

        init(_ yaml: String, stopDeadline: Duration = .seconds(5)) throws {
            let run = try TestRunDirectory()
            let path = run.path + "/compose.yaml"
            try yaml.write(toFile: path, atomically: true, encoding: .utf8)
            machine = SupervisorMachine(programs: try ComposeFile.load(path: path).programs, stopDeadline: stopDeadline, now: now)
        }

        mutating func handle(_ event: Event) -> [Action] { machine.handle(event, now: now) }

        /// Lets `duration` pass and handles the time, when something was due.
        mutating func wait(_ duration: Duration) -> [Action] {
            now += duration
            return machine.handle(.timePassed, now: now)
        }

        func status(_ name: String) -> ProgramStatus? { machine.statuses.first { $0.name == name } }

        /// Only the actions on the programs: not log lines, nor the following of readiness topics.
        static func deeds(_ actions: [Action]) -> [Action] {
            actions.filter {
                switch $0 {
                case .log, .followReadiness: false
                default: true
                }
            }
        }

        /// Whether the readiness topics are to be followed from these actions on (nil: unchanged).
        static func following(_ actions: [Action]) -> Bool? {
            actions.compactMap { if case .followReadiness(let follow) = $0 { follow } else { nil } }.last
        }

        static func logs(_ actions: [Action]) -> [String] {
            actions.compactMap { if case .log(let line) = $0 { line } else { nil } }
        }
    }

    static let chain = """
        programs:
          - name: bus
            command: [tether-bus]
          - name: gateway
            command: [tether-gateway]
            ready: tcp:127.0.0.1:8765
          - name: connd
            command: [/usr/bin/tether-connd]
            depends_on: [bus, gateway]
            ready: topic:conn.state
        """

    /// The chain's three programs started and ready, as pids 10, 20 and 30.
    static func started() throws -> Driver {
        var driver = try Driver(chain)
        _ = driver.handle(.begin)
        _ = driver.handle(.spawned("bus", pid: 10, at: driver.date))
        _ = driver.handle(.heartbeat(program: "tether-bus", pid: 10))
        _ = driver.handle(.spawned("gateway", pid: 20, at: driver.date))
        _ = driver.handle(.acceptsConnections("gateway", pid: 20))
        _ = driver.handle(.spawned("connd", pid: 30, at: driver.date))
        _ = driver.handle(.published(topic: "conn.state", pid: 30))
        return driver
    }

    @Test func programsStartInOrderEachOnceItsDependenciesAreReady() throws {
        var driver = try Driver(Self.chain)
        #expect(driver.machine.statuses.map(\.phase) == [.waiting, .waiting, .waiting])
        // bus and gateway have no dependencies; connd waits for both to be ready.
        #expect(Driver.deeds(driver.handle(.begin)) == [.spawn("bus"), .spawn("gateway")])
        #expect(driver.status("bus")?.phase == .starting)
        let started = driver.handle(.spawned("bus", pid: 10, at: driver.date))
        #expect(Driver.logs(started) == ["started bus (pid 10)"])
        #expect(driver.status("bus")?.pid == 10 && driver.status("bus")?.startedAt == driver.date && driver.status("bus")?.ready == false)
        // A heartbeat from another run of the bus, or from another program, is not this run's.
        #expect(driver.handle(.heartbeat(program: "tether-bus", pid: 9)).isEmpty)
        #expect(driver.handle(.heartbeat(program: "tether-netmon", pid: 10)).isEmpty)
        #expect(driver.status("bus")?.ready == false)
        _ = driver.handle(.heartbeat(program: "tether-bus", pid: 10))
        #expect(driver.status("bus")?.ready == true)
        // The gateway is ready when its address takes connections: checked now, then every 50 ms.
        #expect(driver.handle(.spawned("gateway", pid: 20, at: driver.date)).count == 1)
        #expect(driver.machine.nextDeadline == driver.now)
        #expect(Driver.deeds(driver.wait(.zero)) == [.checkConnections("gateway", pid: 20)])
        #expect(driver.machine.nextDeadline == driver.now + .milliseconds(50))
        #expect(driver.wait(.milliseconds(49)).isEmpty)
        #expect(driver.wait(.milliseconds(1)) == [.checkConnections("gateway", pid: 20)])
        #expect(Driver.deeds(driver.handle(.acceptsConnections("gateway", pid: 20))) == [.spawn("connd")])
        #expect(driver.machine.nextDeadline == nil, "nothing waits for the time")
        _ = driver.handle(.spawned("connd", pid: 30, at: driver.date))
        // connd is ready once it published on its topic; the heartbeat does not make it ready.
        _ = driver.handle(.heartbeat(program: "tether-connd", pid: 30))
        #expect(driver.status("connd")?.ready == false)
        let ready = driver.handle(.published(topic: "conn.state", pid: 30))
        #expect(Driver.logs(ready) == ["all 3 programs are ready"])
        #expect(Driver.logs(driver.handle(.heartbeat(program: "tether-bus", pid: 10))).isEmpty, "said once")
    }

    @Test func theReadinessTopicsAreFollowedOnlyWhileAProgramAwaitsOne() throws {
        var driver = try Driver(Self.chain)
        #expect(Driver.following(driver.handle(.begin)) == nil, "connd waits for its dependencies")
        _ = driver.handle(.spawned("bus", pid: 10, at: driver.date))
        _ = driver.handle(.heartbeat(program: "tether-bus", pid: 10))
        _ = driver.handle(.spawned("gateway", pid: 20, at: driver.date))
        // connd starts: the topic is followed, asked for before the start (the retained value
        // is published again for the new subscriber, whenever the subscription arrives).
        let starting = driver.handle(.acceptsConnections("gateway", pid: 20))
        #expect(starting.first == .followReadiness(true) && Driver.deeds(starting) == [.spawn("connd")], "\(starting)")
        _ = driver.handle(.spawned("connd", pid: 30, at: driver.date))
        #expect(Driver.following(driver.handle(.published(topic: "conn.state", pid: 30))) == false)
        #expect(Driver.following(driver.handle(.published(topic: "conn.state", pid: 30))) == nil, "said once")
        // connd dies: while it is restarted and until it publishes again, the topic is followed.
        #expect(Driver.following(driver.handle(.exited("connd", pid: 30, status: .signaled(9)))) == true)
        _ = driver.wait(.seconds(1))
        _ = driver.handle(.spawned("connd", pid: 31, at: driver.date))
        #expect(Driver.following(driver.handle(.published(topic: "conn.state", pid: 30))) == nil, "the run before's publication")
        #expect(Driver.following(driver.handle(.published(topic: "conn.state", pid: 31))) == false)
        // The stop follows nothing.
        _ = driver.handle(.exited("connd", pid: 31, status: .signaled(9)))
        #expect(Driver.following(driver.handle(.stopRequested)) == false)
    }

    @Test func aProgramWaitingLongForItsDependenciesIsSaidOnce() throws {
        var driver = try Driver(Self.chain)
        _ = driver.handle(.begin)
        #expect(driver.machine.nextDeadline == driver.now + .seconds(60))
        #expect(Driver.logs(driver.wait(.seconds(60))) == ["connd still waits for bus, gateway to be ready"])
        #expect(driver.machine.nextDeadline == nil)
    }

    @Test func aProgramThatKeepsDyingWaitsLongerEachTimeAndAfreshAfterASteadyRun() throws {
        var driver = try Self.started()
        var delays: [String] = []
        var pid: Int32 = 30
        for _ in 1...6 {
            let exit = driver.handle(.exited("connd", pid: pid, status: .exited(1)))
            delays += Driver.logs(exit)
            #expect(driver.status("connd")?.phase == .backoff && driver.status("connd")?.pid == nil && driver.status("connd")?.ready == false)
            guard let due = driver.machine.nextDeadline else { break }
            #expect(driver.wait(driver.now.duration(to: due) - .milliseconds(1)).isEmpty)
            #expect(driver.wait(.milliseconds(1)) == [.spawn("connd")])
            pid += 1
            _ = driver.handle(.spawned("connd", pid: pid, at: driver.date))
        }
        #expect(
            delays == [
                "connd exited with status 1; restarting in 0.5 seconds", "connd exited with status 1; restarting in 1.0 seconds",
                "connd exited with status 1; restarting in 2.0 seconds", "connd exited with status 1; restarting in 4.0 seconds",
                "connd exited with status 1; restarting in 8.0 seconds", "connd exited with status 1; restarting in 10.0 seconds",
            ])
        #expect(driver.status("connd")?.restarts == 6)
        #expect(driver.status("connd")?.lastExit == "exited with status 1")
        // A run of more than 10 s: the backoff starts again from 0.5 s.
        driver.now += .seconds(11)
        #expect(
            Driver.logs(driver.handle(.exited("connd", pid: pid, status: .signaled(9)))) == [
                "connd was killed by signal 9 (SIGKILL); restarting in 0.5 seconds"
            ])
    }

    @Test func anExitOfAnEarlierRunIsNotTheCurrentOnes() throws {
        var driver = try Self.started()
        #expect(driver.handle(.exited("connd", pid: 29, status: .exited(1))).isEmpty)
        #expect(driver.status("connd")?.phase == .running && driver.status("connd")?.pid == 30)
    }

    static let policies = """
        programs:
          - name: flaky
            command: [false]
            restart: on-failure
            max_restarts: 2
            restart_window: 60
            ready: none
          - name: done
            command: ["true"]
            restart: on-failure
            ready: none
          - name: once
            command: [sleep, "60"]
            restart: "no"
            ready: none
        """

    @Test func policiesAndTheRestartBudgetDecideWhatAnExitLeadsTo() throws {
        var driver = try Driver(Self.policies)
        #expect(Driver.deeds(driver.handle(.begin)) == [.spawn("flaky"), .spawn("done"), .spawn("once")])
        _ = driver.handle(.spawned("flaky", pid: 1, at: driver.date))
        _ = driver.handle(.spawned("done", pid: 2, at: driver.date))
        _ = driver.handle(.spawned("once", pid: 3, at: driver.date))
        // on-failure: a clean exit is left alone.
        #expect(
            Driver.logs(driver.handle(.exited("done", pid: 2, status: .exited(0)))) == [
                "done exited with status 0; restart policy 'on-failure' leaves it stopped"
            ])
        #expect(driver.status("done")?.phase == .exited)
        // no: whatever the exit.
        #expect(
            Driver.logs(driver.handle(.exited("once", pid: 3, status: .signaled(15)))) == [
                "once was killed by signal 15; restart policy 'no' leaves it stopped"
            ])
        // on-failure, at most 2 restarts within 60 s, then failed until restarted.
        var pid: Int32 = 1
        for _ in 1...2 {
            _ = driver.handle(.exited("flaky", pid: pid, status: .exited(1)))
            _ = driver.wait(.seconds(10))
            pid += 10
            _ = driver.handle(.spawned("flaky", pid: pid, at: driver.date))
        }
        let third = driver.handle(.exited("flaky", pid: pid, status: .exited(1)))
        #expect(Driver.logs(third) == ["flaky exited with status 1; it was restarted 2 times within 60 s: giving up (restart it with 'restart flaky')"])
        #expect(driver.status("flaky")?.phase == .failed && driver.status("flaky")?.restarts == 2)
        #expect(driver.machine.nextDeadline == nil)
        // restart brings a failed or stopped program back, counted as a restart.
        #expect(Driver.deeds(driver.handle(.restartRequested("flaky"))) == [.spawn("flaky")])
        #expect(driver.status("flaky")?.restarts == 3 && driver.status("flaky")?.phase == .starting)
        #expect(Driver.deeds(driver.handle(.restartRequested("once"))) == [.spawn("once")])
    }

    @Test func aProgramThatCannotStartIsAFailureForItsPolicy() throws {
        var driver = try Driver(Self.policies)
        _ = driver.handle(.begin)
        let failed = driver.handle(.spawnFailed("done", reason: "cannot start true: No such file or directory"))
        #expect(Driver.logs(failed) == ["done: cannot start true: No such file or directory", "done could not be started; restarting in 0.5 seconds"])
        #expect(driver.status("done")?.phase == .backoff && driver.status("done")?.lastExit == "could not be started")
        let never = driver.handle(.spawnFailed("once", reason: "no"))
        #expect(Driver.logs(never).last == "once could not be started; restart policy 'no' leaves it stopped")
    }

    @Test func aRequestedRestartStopsTheRunThenStartsAnotherAtOnce() throws {
        var driver = try Self.started()
        #expect(driver.handle(.restartRequested("connd")) == [.log("restart of connd requested"), .signal("connd", pid: 30, signal: SIGTERM)])
        #expect(driver.status("connd")?.phase == .stopping)
        #expect(driver.machine.nextDeadline == driver.now + .seconds(5))
        // Asked again while it stops: nothing more.
        #expect(Driver.deeds(driver.handle(.restartRequested("connd"))).isEmpty)
        // It does not stop within the deadline: SIGKILL.
        #expect(
            driver.wait(.seconds(5)) == [
                .log("connd did not stop within 5.0 seconds of SIGTERM: killing it (SIGKILL)"), .signal("connd", pid: 30, signal: SIGKILL),
            ])
        let exit = driver.handle(.exited("connd", pid: 30, status: .signaled(9)))
        // Its topic is followed again for the new run.
        #expect(exit == [.followReadiness(true), .log("connd was killed by signal 9 (SIGKILL); restarting it as asked"), .spawn("connd")])
        #expect(driver.status("connd")?.restarts == 1)
    }

    @Test func aRestartAskedDuringABackoffOrBeforeTheFirstStartChangesNothing() throws {
        var driver = try Driver(Self.chain)
        _ = driver.handle(.begin)
        #expect(Driver.deeds(driver.handle(.restartRequested("connd"))).isEmpty, "not started yet: it starts when its dependencies are ready")
        #expect(Driver.deeds(driver.handle(.restartRequested("nosuch"))).isEmpty)
        var started = try Self.started()
        _ = started.handle(.exited("bus", pid: 10, status: .exited(1)))
        #expect(Driver.deeds(started.handle(.restartRequested("bus"))).isEmpty, "it starts shortly anyway")
        #expect(started.wait(.milliseconds(500)) == [.spawn("bus")])
    }

    @Test func theSetStopsInReverseOrderOneProgramAtATime() throws {
        var driver = try Self.started()
        _ = driver.handle(.exited("bus", pid: 10, status: .exited(1)))
        #expect(driver.handle(.stopRequested) == [.log("stopping connd"), .signal("connd", pid: 30, signal: SIGTERM)])
        #expect(Driver.deeds(driver.handle(.stopRequested)).isEmpty, "asked twice: stopped once")
        // Nothing restarts while the set stops, not even a program whose backoff ends.
        #expect(driver.wait(.seconds(1)).isEmpty)
        #expect(driver.handle(.exited("connd", pid: 30, status: .exited(0))) == [.log("stopping gateway"), .signal("gateway", pid: 20, signal: SIGTERM)])
        #expect(driver.status("connd")?.phase == .stopped)
        // The gateway ignores SIGTERM: SIGKILL after the deadline.
        #expect(
            driver.wait(.seconds(5)) == [
                .log("gateway did not stop within 5.0 seconds of SIGTERM: killing it (SIGKILL)"), .signal("gateway", pid: 20, signal: SIGKILL),
            ])
        // The bus was waiting out a backoff: left stopped, and the set is finished.
        #expect(driver.handle(.exited("gateway", pid: 20, status: .signaled(9))) == [.finished])
        #expect(driver.machine.statuses.map(\.phase) == [.stopped, .stopped, .stopped])
        #expect(driver.handle(.begin).isEmpty && driver.handle(.restartRequested("bus")).isEmpty, "a finished set does nothing more")
    }

    @Test func aProgramStartingWhenTheStopBeginsIsStoppedOnceItReports() throws {
        var driver = try Self.started()
        _ = driver.handle(.restartRequested("connd"))
        _ = driver.handle(.exited("connd", pid: 30, status: .exited(0)))
        #expect(driver.status("connd")?.phase == .starting)
        #expect(Driver.deeds(driver.handle(.stopRequested)).isEmpty, "its start is under way")
        #expect(
            driver.handle(.spawned("connd", pid: 31, at: driver.date)) == [
                .log("started connd (pid 31)"), .log("stopping connd"), .signal("connd", pid: 31, signal: SIGTERM),
            ])
    }

    @Test func aProgramStoppingForARestartWhenTheStopBeginsIsNotStartedAgain() throws {
        var driver = try Self.started()
        _ = driver.handle(.restartRequested("connd"))
        #expect(driver.handle(.stopRequested).isEmpty, "its SIGTERM was sent already")
        #expect(driver.handle(.exited("connd", pid: 30, status: .exited(0))) == [.log("stopping gateway"), .signal("gateway", pid: 20, signal: SIGTERM)])
    }

    @Test func aProgramThatCrashesWhileTheStopWaitsForAnotherDoesNotEndTheStopEarly() throws {
        var driver = try Self.started()
        _ = driver.handle(.stopRequested)
        // The bus dies while connd is still stopping: the stop waits for connd.
        #expect(driver.handle(.exited("bus", pid: 10, status: .signaled(9))).isEmpty)
        #expect(driver.handle(.exited("connd", pid: 30, status: .exited(0))) == [.log("stopping gateway"), .signal("gateway", pid: 20, signal: SIGTERM)])
        #expect(driver.handle(.exited("gateway", pid: 20, status: .exited(0))) == [.finished])
    }
}
