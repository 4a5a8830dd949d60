import Foundation
import Testing
import TetherTesting

/// A setting that is wrong is said at once, naming the setting and how to fix it, by `up`,
/// `restart` and `ps`: never retried with backoff as if it were a crash.
@Suite(.serialized) struct ConfigurationErrorTests {
    static let openClaw = Programs.packageRoot + "/compose/openclaw.yaml"

    /// `tether-compose ARGUMENTS` in `run`, waited for.
    static func compose(
        _ arguments: [String], run: TestRunDirectory, environment: [String: String] = [:], timeout: Duration = .seconds(90)
    )
        throws -> ChildProcess
    {
        let process = try ChildProcess(
            Programs.path("tether-compose"), arguments + ["--run-dir", run.path],
            environment: ["XDG_CONFIG_HOME": run.path + "/config", "TETHER_NOTIFICATIONS": "off"].merging(environment) { $1 },
            outputDirectory: run.path, name: "compose-\(arguments[0])")
        try process.waitForExit(timeout: timeout)
        return process
    }

    @Test func aVariableTheFileNeedsAndNobodySetIsSaidBeforeAnythingStarts() throws {
        let run = try TestRunDirectory()
        let began = ContinuousClock.now
        let up = try Self.compose(["up", "--detach", "--file", Self.openClaw, "--bin-dir", Programs.directory], run: run)
        #expect(up.status == 78, "\(up.standardError)")
        #expect(
            up.standardError.contains("cannot start as configured: connd: variable TETHER_OPENCLAW_URL is not set"), "\(up.standardError)")
        #expect(up.standardError.contains("set it in the environment of tether-compose up"), "\(up.standardError)")
        #expect(ContinuousClock.now - began < .seconds(20), "said at once, not after the ready timeout")
        #expect(!FileManager.default.fileExists(atPath: run.path + "/compose/state.json"), "nothing was started")
    }

    @Test func aTokenFileOthersCanReadIsSaidByUpRestartAndPsAndNotRetried() async throws {
        let run = try TestRunDirectory()
        let tokenFile = run.path + "/open.token"
        #expect(FileManager.default.createFile(atPath: tokenFile, contents: Data("t".utf8), attributes: [.posixPermissions: 0o644]))
        let environment = ["TETHER_OPENCLAW_URL": "ws://127.0.0.1:\(try freePort())", "TETHER_TOKEN_FILE": tokenFile]
        defer { _ = try? Self.compose(["down"], run: run) }
        let up = try Self.compose(["up", "--detach", "--file", Self.openClaw, "--bin-dir", Programs.directory], run: run, environment: environment)
        let fix = "connd cannot run as configured: token file \(tokenFile) has permissions 644: it must not be readable by others; run chmod 600 \(tokenFile)"
        #expect(up.status == 78, "\(up.standardOutput)\n\(up.standardError)")
        #expect(up.standardError.contains(fix), "\(up.standardError)")
        #expect(up.standardOutput.contains("misconfigured"), "the table shows it: \(up.standardOutput)")

        let ps = try Self.compose(["ps"], run: run)
        #expect(ps.standardOutput.contains(fix), "\(ps.standardOutput)")
        let status = try ChildProcess(Programs.path("tether"), ["status", "--run-dir", run.path], outputDirectory: run.path, name: "status")
        try status.waitForExit(timeout: .seconds(30))
        #expect(status.standardOutput.contains(fix), "tether status: \(status.standardOutput)\(status.standardError)")
        // The terminal UI names it too, from the supervisor's `sys.misconfigured`, wrapped whole.
        if Tmux.available {
            let ui = try Tmux(
                [Programs.path("tether"), "--run-dir", run.path], columns: 400, rows: 24, directory: run.path,
                environment: ["LANG": "C.UTF-8", "XDG_CONFIG_HOME": run.path + "/config"])
            _ = try await ui.waitFor(fix)
        }
        let restart = try Self.compose(["restart", "connd", "--timeout", "30"], run: run)
        #expect(restart.status == 78, "\(restart.standardError)")
        #expect(restart.standardError.contains(fix), "\(restart.standardError)")
        let log = (try? String(contentsOfFile: run.path + "/compose/supervisor.log", encoding: .utf8)) ?? ""
        #expect(!log.contains("connd exited with status 78; restarting in"), "retried with backoff:\n\(log)")

        // Fixed, and restarted: it runs.
        #expect(chmod(tokenFile, 0o600) == 0)
        let fixed = try Self.compose(["restart", "connd", "--timeout", "30"], run: run)
        #expect(fixed.status == 0, "\(fixed.standardError)")
        let after = try Self.compose(["ps"], run: run)
        #expect(!after.standardOutput.contains("cannot run as configured"), "\(after.standardOutput)")
    }
}
