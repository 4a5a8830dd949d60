import ComposeSupervisor
import ConnectionManager
import Foundation
import Testing
import TetherTesting

@Suite struct ComposeFileTests {
    @Test func defaultComposeFileLoads() throws {
        let file = try ComposeFile.load(path: Programs.packageRoot + "/compose/default.yaml")
        #expect(file.programs.map(\.name) == ["bus", "gateway", "netmon", "snapd", "protod", "connd", "notify"])
        let connd = try #require(file.programs.first { $0.name == "connd" })
        #expect(connd.dependsOn == ["bus", "gateway"])
        #expect(connd.restart == .always)
        #expect(connd.ready == .topic("conn.state"))
        #expect(connd.restartLimit == RestartBudget(limit: 10, window: 60))
        #expect(file.programs[0].ready == .heartbeat)
        #expect(file.programs[1].ready == .tcp("127.0.0.1:${TETHER_GATEWAY_PORT}"))
        let notify = try #require(file.programs.last)
        #expect(notify.command == ["tether-notify", "--notifications", "${TETHER_NOTIFICATIONS}"] && notify.dependsOn == ["bus"])
        #expect(notify.ready == .heartbeat)
    }

    @Test func everyComposeFileLoads() throws {
        let folder = Programs.packageRoot + "/compose"
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".yaml") }.sorted()
        #expect(names == ["default.yaml", "gateway.yaml", "headless.yaml", "openclaw.yaml", "python.yaml", "web.yaml"])
        for name in names {
            let file = try ComposeFile.load(path: folder + "/" + name)
            #expect(file.programs.contains { $0.name == "connd" }, "\(name)")
        }
        let headless = try ComposeFile.load(path: folder + "/headless.yaml")
        #expect(headless.programs.last?.command == ["tether", "watch", "--json"])
        let python = try ComposeFile.load(path: folder + "/python.yaml")
        #expect(python.programs.last?.ready == .topic("frontend.presence"))
        let web = try ComposeFile.load(path: folder + "/web.yaml")
        #expect(web.programs.last?.command.first == "tether-web")
        #expect(web.programs.last?.ready == .tcp("127.0.0.1:${TETHER_WEB_PORT}"))
    }

    @Test func restartBudgetAllowsSoManyWithinItsWindow() {
        var budget = RestartBudget(limit: 3, window: 10)
        let spent = [0, 1, 2, 3, 9.9, 10.5].map { budget.spend(at: $0) }
        #expect(spent == [true, true, true, false, false, true], "a fourth restart within 10 s is refused until the first leaves the window")
        var none = RestartBudget(limit: 0, window: 60)
        let refused = none.spend(at: 0)
        #expect(!refused)
    }

    @Test func expansion() throws {
        let variables = ["RUN": "/tmp/x", "EMPTY": ""]
        #expect(try ComposeFile.expand("${RUN}/token", variables: variables) == "/tmp/x/token")
        #expect(try ComposeFile.expand("port ${PORT:-8765}", variables: variables) == "port 8765")
        #expect(try ComposeFile.expand("${EMPTY:-fallback}", variables: variables) == "fallback")
        #expect(throws: ComposeError.self) { try ComposeFile.expand("${MISSING}", variables: variables) }
        #expect(throws: ComposeError.self) { try ComposeFile.expand("${RUN", variables: variables) }
    }

    @Test func badFilesAreRefusedInWords() throws {
        let run = try TestRunDirectory()
        let cases = [
            ("programs:\n  - name: a\n    command: [x]\n    depends_on: [b]\n", "depends on 'b'"),
            ("programs:\n  - name: a\n    command: []\n", "empty command"),
            ("programs:\n  - name: a\n    command: [x]\n    ready: soon\n", "ready must be"),
            ("programs:\n  - name: a\n    command: [x]\n    ready: 'topic:'\n", "ready must be"),
            ("programs:\n  - name: a\n    command: [x]\n    max_restarts: -1\n", "max_restarts must be"),
            ("programs: [", "not valid"),
        ]
        for (index, (text, expected)) in cases.enumerated() {
            let path = run.path + "/bad\(index).yaml"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            do {
                _ = try ComposeFile.load(path: path)
                Issue.record("\(text) loaded")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
        #expect(throws: ComposeError.self) { try ComposeFile.load(path: run.path + "/missing.yaml") }
    }

    @Test func restartPolicies() {
        #expect(RestartPolicy.always.restarts(afterExitStatus: 0))
        #expect(RestartPolicy.onFailure.restarts(afterExitStatus: 1))
        #expect(!RestartPolicy.onFailure.restarts(afterExitStatus: 0))
        #expect(RestartPolicy.onFailure.restarts(afterExitStatus: nil))
        #expect(!RestartPolicy.no.restarts(afterExitStatus: 1))
    }

    @Test func backoffGrowsToItsCapWithinItsJitter() {
        let backoff = Backoff(base: .seconds(1), cap: .seconds(30), jitter: 0.2)
        #expect(backoff.delay(forAttempt: 1, random: 0) == .seconds(1))
        #expect(backoff.delay(forAttempt: 3, random: 0) == .seconds(4))
        #expect(backoff.delay(forAttempt: 10, random: 0) == .seconds(30))
        let longest = backoff.delay(forAttempt: 2, random: 1)
        let shortest = backoff.delay(forAttempt: 2, random: -1)
        #expect(longest > .milliseconds(2399) && longest < .milliseconds(2401))
        #expect(shortest > .milliseconds(1599) && shortest < .milliseconds(1601))
        for attempt in 1...20 {
            let delay = backoff.delay(forAttempt: attempt)
            #expect(delay >= .seconds(0.8) && delay <= .seconds(36))
        }
    }
}
