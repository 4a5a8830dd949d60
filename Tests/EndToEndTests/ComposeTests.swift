import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// tether-compose's commands and restart policies, with real processes.
@Suite(.serialized) struct ComposeTests {
    @Test func restartAndKillFromTheCommandLine() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let connd = try #require(set.pid(of: "connd"))
        let restart = try set.compose(["restart", "connd"])
        #expect(restart.status == 0, "\(restart.standardError)")
        #expect(restart.standardOutput.hasPrefix("connd "), "restart prints the program's ps line: \(restart.standardOutput)")
        let restarted = try #require(set.state()?.programs.first { $0.name == "connd" })
        #expect(restarted.pid != connd && restarted.ready && restarted.restarts == 1)
        #expect(kill(connd, 0) != 0, "the old connd still runs")

        let snapd = try #require(set.pid(of: "snapd"))
        let killed = try set.compose(["kill", "snapd"])
        #expect(killed.standardOutput == "sent SIGKILL to snapd (pid \(snapd))\n")
        let back = await set.awaitRestart(of: "snapd", replacing: snapd)
        #expect(back, "snapd was not restarted after kill")
        let ps = try set.compose(["ps"])
        let snapdLine = ps.standardOutput.split(separator: "\n").first { $0.hasPrefix("snapd") } ?? ""
        #expect(snapdLine.contains(" 1 ") && snapdLine.contains("SIGKILL"), "ps: \(ps.standardOutput)")

        let unknown = try set.compose(["kill", "nosuch"])
        #expect(unknown.status != 0)
        #expect(unknown.standardError.contains("no program named 'nosuch'"))

        // The supervisor's endpoint is its own, not the bus's: the bus restarts through it too.
        let bus = try #require(set.pid(of: "bus"))
        let restartBus = try set.compose(["restart", "bus"])
        #expect(restartBus.status == 0, "\(restartBus.standardError)")
        #expect(set.pid(of: "bus") != bus)
        let json = try set.compose(["ps", "--json"])
        let answered = try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any]
        let programs = answered?["programs"] as? [[String: Any]] ?? []
        #expect(programs.map { $0["name"] as? String } == ["bus", "gateway", "netmon", "snapd", "protod", "connd", "notify"], "\(json.standardOutput)")
        #expect(programs.first?["pid"] as? Int == set.pid(of: "bus").map(Int.init))
        let send = try set.tether(["send", "after", "restarts"])
        #expect(send.standardOutput == "You said: after restarts\n", "\(send.standardError)")
    }

    @Test func policiesAndTheRestartLimitLeaveProgramsStoppedUntilRestarted() async throws {
        let run = try TestRunDirectory()
        let file = run.path + "/policies.yaml"
        try """
        programs:
          - name: bus
            command: [tether-bus]
          - name: flaky
            command: [/bin/sh, -c, "exit 3"]
            restart: on-failure
            max_restarts: 2
            restart_window: 60
            ready: none
          - name: sleeper
            command: [/bin/sleep, "300"]
            restart: "no"
            ready: none
          - name: done
            command: [/bin/sh, -c, "exit 0"]
            restart: on-failure
            ready: none
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let supervisor = try ChildProcess(
            Programs.path("tether-compose"), ["up", "--file", file, "--run-dir", run.path, "--bin-dir", Programs.directory],
            outputDirectory: run.path, name: "compose")
        func program(_ name: String) -> ComposeStateFile.Program? {
            guard let data = FileManager.default.contents(atPath: run.path + "/compose/state.json") else { return nil }
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return (try? decoder.decode(ComposeStateFile.self, from: data))?.programs.first { $0.name == name }
        }
        func compose(_ arguments: [String]) throws -> ChildProcess {
            let process = try ChildProcess(Programs.path("tether-compose"), arguments + ["--run-dir", run.path], outputDirectory: run.path)
            try process.waitForExit(timeout: .seconds(30))
            return process
        }
        defer {
            _ = try? compose(["down"])
            supervisor.stop()
        }

        let failed = await eventually(timeout: .seconds(15)) { program("flaky")?.phase == "failed" }
        #expect(failed, "flaky is \(program("flaky")?.phase ?? "?")")
        #expect(program("flaky")?.restarts == 2)
        #expect(supervisor.standardOutput.contains("it was restarted 2 times within 60 s: giving up"), "\(supervisor.standardOutput)")
        let finished = await eventually { program("done")?.phase == "exited" }
        #expect(finished, "a program that exits 0 under on-failure stays stopped")
        #expect(program("done")?.restarts == 0)

        let sleeper = try #require(program("sleeper")?.pid)
        let term = try compose(["kill", "sleeper", "--signal", "TERM"])
        #expect(term.standardOutput == "sent SIGTERM to sleeper (pid \(sleeper))\n", "\(term.standardError)")
        let stopped = await eventually { program("sleeper")?.phase == "exited" }
        #expect(stopped, "restart: no left sleeper \(program("sleeper")?.phase ?? "?")")
        try await Task.sleep(for: .seconds(1))
        #expect(program("sleeper")?.pid == nil, "restart: no restarted it")

        let restart = try compose(["restart", "sleeper"])
        #expect(restart.status == 0, "\(restart.standardError)")
        #expect(program("sleeper")?.phase == "running")
        #expect(program("sleeper")?.restarts == 1)

        let down = try compose(["down"])
        #expect(down.standardOutput.contains("stopped the set"))
        let sleeperAgain = program("sleeper")?.pid
        #expect(sleeperAgain == nil || kill(sleeperAgain!, 0) != 0, "down left sleeper running")
    }
}

/// A supervisor that dies does not strand its set.
@Suite(.serialized) struct SupervisorDeathTests {
    @Test func aKilledSupervisorsProgramsStopAndUpWorksAgain() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let before = try #require(set.state())
        let pids = before.programs.compactMap(\.pid)
        #expect(pids.count == before.programs.count)
        kill(before.supervisorPID, SIGKILL)
        let killed = ContinuousClock.now
        // A process that ended is gone or a zombie waiting for no one.
        func running(_ pid: Int32) -> Bool {
            guard kill(pid, 0) == 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else {
                return false
            }
            return stat[stat.index(close, offsetBy: 2)] != "Z"
        }
        let allStopped = await eventually(timeout: .seconds(5)) { !pids.contains(where: running) }
        print("supervisor SIGKILLed: its \(pids.count) programs stopped within \(killed.duration(to: .now))")
        #expect(allStopped, "still running: \(pids.filter(running))")

        // A program that does not watch for its supervisor (not a Tether program) is stopped
        // by the next up, which says so.
        let file = set.run.path + "/with-sleeper.yaml"
        try """
        name: sleepy
        programs:
          - name: sleeper
            command: [/bin/sleep, "600"]
            ready: none
        """.write(toFile: file, atomically: true, encoding: .utf8)
        // An environment of 64 KB, as a desktop session's can be long: the supervisor's mark
        // in the sleeper's environment is found wherever it lies, not only in the first 4 KB.
        let padding = Dictionary(uniqueKeysWithValues: (0..<16).map { ("TETHER_TEST_PADDING_\($0)", String(repeating: "x", count: 4096)) })
        let first = try ChildProcess(
            Programs.path("tether-compose"), ["up", "--detach", "--file", file, "--run-dir", set.run.path, "--bin-dir", Programs.directory],
            environment: padding, outputDirectory: set.run.path, name: "up-sleeper")
        #expect(try first.waitForExit(timeout: .seconds(30)) == 0, "\(first.standardError)")
        let sleepy = try #require(set.state())
        let sleeper = try #require(sleepy.programs.first?.pid)
        kill(sleepy.supervisorPID, SIGKILL)
        try await Task.sleep(for: .seconds(1))
        #expect(running(sleeper), "the sleeper does not watch its supervisor")
        let again = try ChildProcess(
            Programs.path("tether-compose"),
            ["up", "--detach", "--file", Programs.packageRoot + "/compose/default.yaml", "--run-dir", set.run.path, "--bin-dir", Programs.directory],
            environment: ["TETHER_GATEWAY_PORT": "\(set.port)", "TETHER_IDLE_SUSPEND": "0", "XDG_CONFIG_HOME": set.run.path + "/config"],
            outputDirectory: set.run.path, name: "up-again")
        #expect(try again.waitForExit(timeout: .seconds(60)) == 0, "\(again.standardError)")
        #expect(again.standardError.contains("had died; stopped what it left running: sleeper (pid \(sleeper))"), "\(again.standardError)")
        #expect(!running(sleeper))
        let send = try set.tether(["send", "after", "the", "crash"])
        #expect(send.status == 0 && send.standardOutput == "You said: after the crash\n", "\(send.standardError)")
    }
}

/// compose/gateway.yaml, compose/headless.yaml and compose/openclaw.yaml, pointed at a
/// gateway of their own as a real one would be (for openclaw.yaml, one speaking OpenClaw's protocol).
@Suite(.serialized) struct RealGatewayComposeTests {
    @Test(arguments: ["gateway.yaml", "headless.yaml", "openclaw.yaml"])
    func composeFileForARealGatewayChats(file: String) async throws {
        let gatewayRun = try TestRunDirectory()
        let port = try freePort()
        let tokenFile = gatewayRun.path + "/token"
        let created = FileManager.default.createFile(atPath: tokenFile, contents: Data("a-real-token-\(port)".utf8), attributes: [.posixPermissions: 0o600])
        #expect(created)
        let dialect = file == "openclaw.yaml" ? ["--dialect", "openclaw"] : []
        let gateway = try ChildProcess(
            Programs.path("tether-gateway"), ["--port", "\(port)", "--token-file", tokenFile] + dialect, outputDirectory: gatewayRun.path)
        defer { gateway.stop() }
        let set = try await ComposedSet(
            file: file,
            environment: [
                "TETHER_GATEWAY_URL": "ws://127.0.0.1:\(port)/ws", "TETHER_OPENCLAW_URL": "ws://127.0.0.1:\(port)", "TETHER_TOKEN_FILE": tokenFile,
            ])
        defer { set.stop() }
        #expect(set.state()?.programs.contains { $0.name == "gateway" } == false, "\(file) starts no gateway of its own")
        let send = try set.tether(["send", "through", file])
        #expect(send.status == 0, "\(send.standardError)")
        #expect(send.standardOutput == "You said: through \(file)\n")
        if file == "headless.yaml" {
            let logged = await eventually { set.log(of: "transcript").contains("You said: through headless.yaml") }
            #expect(logged, "the transcript log: \(set.log(of: "transcript"))")
            let firstLine = set.log(of: "transcript").split(separator: "\n").first.map(String.init) ?? ""
            #expect((try? JSONSerialization.jsonObject(with: Data(firstLine.utf8))) != nil, "the transcript is JSON lines: \(firstLine)")
        }
    }

    /// `--dialect auto` takes a gateway that sends `connect.challenge` for OpenClaw and one
    /// that sends nothing first for a seed gateway.
    @Test(arguments: ["seed", "openclaw"])
    func autoDetectionFindsEachDialect(dialect: String) async throws {
        let gatewayRun = try TestRunDirectory()
        let port = try freePort()
        let tokenFile = gatewayRun.path + "/token"
        #expect(FileManager.default.createFile(atPath: tokenFile, contents: Data("an-auto-token-\(port)".utf8), attributes: [.posixPermissions: 0o600]))
        let gateway = try ChildProcess(
            Programs.path("tether-gateway"), ["--port", "\(port)", "--token-file", tokenFile, "--dialect", dialect], outputDirectory: gatewayRun.path)
        defer { gateway.stop() }
        let set = try await ComposedSet(
            file: "gateway.yaml", environment: ["TETHER_GATEWAY_URL": "ws://127.0.0.1:\(port)/ws", "TETHER_TOKEN_FILE": tokenFile, "TETHER_DIALECT": "auto"])
        defer { set.stop() }
        let bus = try BusClient(source: "auto-test", runDirectory: set.run.runDirectory, logger: Logger(label: "auto-test"))
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let connected = try await states.waitFor { $0.phase == .connected }.value
        #expect(connected.gateway?.dialect.rawValue == dialect, "\(String(describing: connected.gateway))")
        let send = try set.tether(["send", "detected", dialect])
        #expect(send.status == 0 && send.standardOutput == "You said: detected \(dialect)\n", "\(send.standardError)")
        await bus.close()
    }
}
