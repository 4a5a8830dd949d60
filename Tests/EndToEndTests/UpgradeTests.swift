import Foundation
import Testing
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// An upgrade as a user makes it: the Tether of the commit before stores moved to the state
/// directory (built from a git worktree, run from its build folder as it was run then) holds
/// a transcript and queued messages in the run directory; this build, installed with
/// scripts/install, finds them, moves them, delivers the queued messages once and shows the
/// whole transcript.
@Suite(.serialized) struct UpgradeTests {
    /// The last commit whose Tether kept its stores in the run directory.
    static let earlierRelease = "71cffb5783f5cb2daf612453aa3766f66c473885"

    static func shell(
        _ command: String, environment: [String: String] = [:], in directory: TestRunDirectory, name: String, timeout: Duration
    )
        throws -> ChildProcess
    {
        let process = try ChildProcess("/bin/sh", ["-c", command], environment: environment, outputDirectory: directory.path, name: name)
        try process.waitForExit(timeout: timeout)
        return process
    }

    @Test func anUpgradeOverTheEarlierTetherKeepsItsQueueAndItsTranscript() async throws {
        let home = try DesktopHome()
        let root = Programs.packageRoot
        let known = try Self.shell(
            "cd '\(root)' && git cat-file -e \(Self.earlierRelease)^{commit}", in: home.root, name: "known", timeout: .seconds(30))
        guard known.status == 0 else {
            Issue.record("this checkout lacks the earlier release \(Self.earlierRelease) (a shallow clone?): \(known.standardError)")
            return
        }
        // The earlier Tether, built as its README said, in a worktree of its own; at the lowest
        // priority, so that the suites beside it keep their pace.
        let earlier = home.root.path + "/earlier"
        let worktree = try Self.shell(
            "cd '\(root)' && git worktree add --detach '\(earlier)' \(Self.earlierRelease)", in: home.root, name: "worktree", timeout: .seconds(60))
        #expect(worktree.status == 0, "\(worktree.standardError)")
        defer { _ = try? Self.shell("cd '\(root)' && git worktree remove --force '\(earlier)'", in: home.root, name: "unworktree", timeout: .seconds(60)) }
        let build = try Self.shell("cd '\(earlier)' && nice -n 19 swift build -q 2>&1 | tail -n 20", in: home.root, name: "build", timeout: .seconds(1500))
        let earlierBin = earlier + "/.build/debug"
        #expect(build.status == 0 && FileManager.default.isExecutableFile(atPath: earlierBin + "/tether-compose"), "\(build.standardOutput)")

        let port = try freePort()
        let environment = home.environment.merging(["TETHER_GATEWAY_PORT": "\(port)", "TETHER_NOTIFICATIONS": "off", "TETHER_IDLE_SUSPEND": "0"]) { $1 }
        func earlierTether(_ arguments: String, name: String) throws -> ChildProcess {
            try Self.shell("cd '\(earlier)' && \(earlierBin)/\(arguments)", environment: environment, in: home.root, name: name, timeout: .seconds(90))
        }
        let up = try earlierTether("tether-compose up --detach --file compose/default.yaml", name: "earlier-up")
        #expect(up.status == 0, "\(up.standardOutput)\(up.standardError)")
        #expect(try earlierTether("tether send 'said to the earlier Tether'", name: "earlier-send").status == 0)
        #expect(try earlierTether("tether suspend", name: "earlier-suspend").status == 0)
        let queued = (1...3).map { "queued before the upgrade \($0)" }
        for text in queued {
            let send = try earlierTether("tether send --timeout 1 '\(text)'", name: "earlier-queue")
            #expect(send.standardError.contains("queued"), "\(send.standardError)")
        }
        #expect(try earlierTether("tether-compose down", name: "earlier-down").status == 0)
        #expect(FileManager.default.fileExists(atPath: home.run + "/protod.sqlite"), "the earlier Tether kept its outbox in the run directory")
        let earlierRecord = (try? String(contentsOfFile: home.run + "/gateway-record.jsonl", encoding: .utf8)) ?? ""

        // This build, installed over it.
        let prefix = home.root.path + "/home/.local"
        let install = try Self.shell(
            "cd '\(root)' && scripts/install --build-dir '\(Programs.directory)'", environment: environment, in: home.root, name: "install",
            timeout: .seconds(300))
        #expect(install.status == 0, "\(install.standardError)")
        func installed(_ arguments: String, name: String) throws -> ChildProcess {
            try Self.shell("cd '\(home.root.path)' && \(prefix)/bin/\(arguments)", environment: environment, in: home.root, name: name, timeout: .seconds(90))
        }
        let upgraded = try installed("tether-compose up --detach --file default", name: "up")
        defer { _ = try? installed("tether-compose down", name: "down") }
        #expect(upgraded.status == 0, "\(upgraded.standardOutput)\(upgraded.standardError)")
        for store in ["protod.sqlite", "conversation.sqlite", "snapd.sqlite"] {
            #expect(FileManager.default.fileExists(atPath: home.state + "/" + store), "\(store) was not moved to the state directory")
            #expect(!FileManager.default.fileExists(atPath: home.run + "/" + store), "\(store) is still in the run directory")
        }
        let protodLog = (try? String(contentsOfFile: home.run + "/compose/logs/protod.log", encoding: .utf8)) ?? ""
        #expect(protodLog.contains("moved the outbox from \(home.run)/protod.sqlite"), "\(protodLog)")

        // Each queued message delivered once, counting what the earlier set's gateway received.
        let record = { (try? String(contentsOfFile: home.state + "/gateway-record.jsonl", encoding: .utf8)) ?? "" }
        let delivered = await eventually(timeout: .seconds(30)) { queued.allSatisfy { Self.contents(record()).contains($0) } }
        #expect(delivered, "not delivered after the upgrade: \(record())")
        let received = Self.contents(earlierRecord) + Self.contents(record())
        for text in queued {
            #expect(received.filter { $0 == text }.count == 1, "\(text) received \(received.filter { $0 == text }.count) times")
        }
        // The transcript whole: the earlier reply and those to the queued messages.
        let watch = try ChildProcess(
            prefix + "/bin/tether", ["watch", "--history", "100"], environment: environment, outputDirectory: home.root.path, name: "watch")
        defer { watch.stop() }
        let lines = ["You said: said to the earlier Tether"] + queued.map { "You said: \($0)" }
        let whole = await eventually(timeout: .seconds(20)) { lines.allSatisfy { watch.standardOutput.contains($0) } }
        #expect(whole, "the transcript after the upgrade:\n\(watch.standardOutput)")
    }

    /// The contents a gateway's record says it received, one a line of JSON.
    static func contents(_ record: String) -> [String] {
        record.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["content"] as? String
        }
    }
}
