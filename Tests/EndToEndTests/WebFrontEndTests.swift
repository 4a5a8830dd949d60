import Foundation
import Testing
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// tether-web's page in a real browser: headless Chromium through WebDriver (Python's
/// selenium), against the whole set of compose/web.yaml. The checks are in Tests/Browser.
@Suite(.serialized) struct WebFrontEndTests {
    private static let script = Programs.packageRoot + "/Tests/Browser/web_page.py"

    @Test func thePageInARealBrowser() async throws {
        try await runBrowserChecks(environment: ["TETHER_CHUNK_DELAY": "150"])
    }

    /// Against the development gateway speaking OpenClaw: a session chosen elsewhere, an approval answered on the page, an
    /// image attached, a tool call shown as one line with its output and thinking collapsed, /steer.
    @Test func thePageFollowsTheSessionChosenAndAnswersApprovals() async throws {
        try await runBrowserChecks(
            environment: ["TETHER_DIALECT": "openclaw", "TETHER_APPROVALS": "on", "TETHER_CHUNK_DELAY": "0"], only: ["sessions", Programs.path("tether")])
    }

    /// Starts compose/web.yaml, stores a message, opens the page and runs Tests/Browser's checks
    /// (`only` chooses some).
    private func runBrowserChecks(environment: [String: String], only: [String] = []) async throws {
        let webPort = try freePort()
        let set = try await ComposedSet(file: "web.yaml", environment: environment.merging(["TETHER_WEB_PORT": "\(webPort)"]) { $1 })
        defer { set.stop() }
        let check = try ChildProcess("/usr/bin/env", ["python3", "-c", "import selenium"], outputDirectory: set.run.path, name: "selenium")
        if try check.waitForExit(timeout: .seconds(30)) != 0 {
            throw TestFailure(
                "python3 cannot import selenium (scripts/bootstrap --tests installs it, with chromium and chromium-driver): \(check.standardError)")
        }
        // Something stored before the page opens: the first frame must show it.
        #expect(try set.tether(["send", "stored before the page"]).status == 0)
        let web = try set.tether(["web"])
        #expect(web.status == 0, "\(web.standardError)")
        let url = web.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(url.hasPrefix("http://127.0.0.1:\(webPort)/?token="), "\(url)")

        // Kept after the run (the run directory is not): a failed check's screenshot is read there.
        let shots = ProcessInfo.processInfo.environment["TETHER_SCREENSHOTS"] ?? Programs.packageRoot + "/.build/test-screenshots"
        try FileManager.default.createDirectory(atPath: shots, withIntermediateDirectories: true)
        let started = ContinuousClock.now
        let browser = try ChildProcess(
            "/usr/bin/env", ["python3", Self.script, url, set.run.path, shots] + only, environment: ["TETHER_GATEWAY_PORT": "\(set.port)"],
            outputDirectory: set.outputs.path, name: "browser")
        let status = try browser.waitForExit(timeout: .seconds(300))
        let elapsed = started.duration(to: .now)
        print("browser checks took \(elapsed):\n\(browser.standardOutput)")
        #expect(status == 0, "\(browser.standardOutput)\n\(browser.standardError.suffix(3000))")
    }
}
