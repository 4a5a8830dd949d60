import Foundation
import Testing
import TetherService
import TetherTesting

@testable import ComposeSupervisor

/// A program that exits because a setting is wrong is not retried with backoff: it is left
/// `misconfigured` with its words until `restart`.
@Suite struct MisconfiguredProgramTests {
    typealias Driver = SupervisorMachineTests.Driver

    @Test func anExitForItsConfigurationIsNotRestartedAndKeepsItsWords() throws {
        var driver = try SupervisorMachineTests.started()
        let words = "token file /tmp/t has permissions 644: it must not be readable by others; run chmod 600 /tmp/t"
        let actions = driver.handle(.exited("connd", pid: 30, status: .exited(78), said: words))
        #expect(Driver.deeds(actions).isEmpty, "nothing started again: \(actions)")
        #expect(
            Driver.logs(actions) == [
                "connd cannot run as configured: \(words). It is not started again until you fix that and run 'restart connd'"
            ])
        let status = try #require(driver.status("connd"))
        #expect(status.phase == .misconfigured && status.problem == words && status.pid == nil && !status.ready)
        #expect(driver.machine.nextDeadline == nil, "no backoff waits")
        #expect(driver.wait(.seconds(120)).isEmpty)
        // restart starts it again, and a run that starts clears the words.
        #expect(Driver.deeds(driver.handle(.restartRequested("connd"))) == [.spawn("connd")])
        #expect(driver.status("connd")?.problem == nil && driver.status("connd")?.restarts == 1)
    }

    @Test func aCommandLineRefusedIsAConfigurationProblemToo() throws {
        var driver = try SupervisorMachineTests.started()
        let actions = driver.handle(.exited("gateway", pid: 20, status: .exited(64), said: nil))
        #expect(Driver.deeds(actions).isEmpty)
        #expect(driver.status("gateway")?.phase == .misconfigured)
        #expect(driver.status("gateway")?.problem?.contains("exited with status 64") == true)
    }

    @Test func otherExitsAndSignalsAreStillRetried() throws {
        var driver = try SupervisorMachineTests.started()
        _ = driver.handle(.exited("connd", pid: 30, status: .exited(1), said: "something"))
        #expect(driver.status("connd")?.phase == .backoff)
        var killed = try SupervisorMachineTests.started()
        _ = killed.handle(.exited("connd", pid: 30, status: .signaled(78)))
        #expect(killed.status("connd")?.phase == .backoff, "signal 78 is not status 78")
    }

    @Test func aCommandThatCannotBeMadeIsAConfigurationProblem() throws {
        var driver = try Driver(SupervisorMachineTests.chain)
        _ = driver.handle(.begin)
        let actions = driver.handle(.spawnFailed("bus", reason: "variable X is not set (in '${X}')", configuration: true))
        #expect(Driver.deeds(actions).isEmpty)
        #expect(driver.status("bus")?.phase == .misconfigured && driver.status("bus")?.problem == "variable X is not set (in '${X}')")
    }

    @Test func theStopOfTheSetIsNotAConfigurationProblem() throws {
        var driver = try SupervisorMachineTests.started()
        _ = driver.handle(.stopRequested)
        _ = driver.handle(.exited("connd", pid: 30, status: .exited(78), said: "x"))
        #expect(driver.status("connd")?.phase == .stopped)
    }

    @Test func theSupervisorFindsTheWordsInAProgramsOutput() {
        #expect(Supervisor.configurationWords(in: "tether-connd: configuration: token file x is empty") == "token file x is empty")
        #expect(
            Supervisor.configurationWords(in: "Error: --url must be a ws:// or wss:// URL with a host") == "--url must be a ws:// or wss:// URL with a host")
        #expect(Supervisor.configurationWords(in: "2026-12-02T01:00:00 info tether-connd : connected") == nil)
        #expect(Supervisor.configurationWords(in: "someone else: configuration: x") == nil)
    }

    @Test func composeFilesAreFoundHereOrAsInstalled() {
        let installed = "/opt/t/lib/tether/../../share/tether/compose/openclaw.yaml"
        let files: Set<String> = ["compose/default.yaml", installed, "/etc/mine.yaml"]
        let exists: (String) -> Bool = { files.contains($0) }
        #expect(ComposeFile.locate("compose/default.yaml", programDirectory: "/opt/t/lib/tether", fileExists: exists) == "compose/default.yaml")
        #expect(ComposeFile.locate("default", programDirectory: "/opt/t/lib/tether", fileExists: exists) == "compose/default.yaml")
        #expect(ComposeFile.locate("openclaw", programDirectory: "/opt/t/lib/tether", fileExists: exists) == installed)
        #expect(ComposeFile.locate("compose/openclaw.yaml", programDirectory: "/opt/t/lib/tether", fileExists: exists) == installed)
        #expect(ComposeFile.locate("/etc/mine.yaml", programDirectory: "/opt/t/lib/tether", fileExists: exists) == "/etc/mine.yaml")
        #expect(ComposeFile.locate("/etc/missing.yaml", programDirectory: "/opt/t/lib/tether", fileExists: exists) == nil)
        #expect(ComposeFile.locate("elsewhere/openclaw.yaml", programDirectory: "/opt/t/lib/tether", fileExists: exists) == nil)
    }

    @Test func unsetVariablesAreNamedProgramByProgram() throws {
        let run = try TestRunDirectory()
        let path = run.path + "/c.yaml"
        try """
        tokens:
          - ${TETHER_RUN}/gateway.token
        programs:
          - name: connd
            command: [tether-connd, --url, "${TETHER_OPENCLAW_URL}", --token-file, "${TETHER_TOKEN_FILE}"]
          - name: protod
            command: [tether-protod, --session, "${TETHER_SESSION:-main}"]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let file = try ComposeFile.load(path: path)
        #expect(file.unsetSettings(variables: ["TETHER_RUN": "/r"]) == ["connd: variable TETHER_OPENCLAW_URL is not set (in '${TETHER_OPENCLAW_URL}')"])
        #expect(file.unsetSettings(variables: ["TETHER_RUN": "/r", "TETHER_OPENCLAW_URL": "ws://h", "TETHER_TOKEN_FILE": "/t"]).isEmpty)
        #expect(file.unsetSettings(variables: ["TETHER_OPENCLAW_URL": "ws://h", "TETHER_TOKEN_FILE": "/t"]).first?.hasPrefix("the token file: ") == true)
    }
}
