import Foundation
import Testing
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

/// A desktop user's set, which names no directory: its stores on disk in `$XDG_STATE_HOME`,
/// its sockets in `$XDG_RUNTIME_DIR`, which logout and reboot empty. What was queued and the
/// transcript outlive both; stores an earlier Tether kept in the run directory are moved once.
@Suite(.serialized) struct DesktopStoresTests {
    /// Suspends the connection and sends each text, which then waits in the outbox.
    static func queue(_ texts: [String], in set: ComposedSet) throws {
        #expect(try set.tether(["suspend"]).status == 0)
        for text in texts {
            let queued = try set.tether(["send", "--timeout", "1", text])
            #expect(queued.standardError.contains("queued"), "\(text): \(queued.standardError)")
        }
    }

    /// Waits until the gateway has each text, and then checks that it has each exactly once.
    static func expectDeliveredOnce(_ texts: [String], by set: ComposedSet, also earlier: [String: Int] = [:]) async {
        let arrived = await eventually(timeout: .seconds(30)) { texts.allSatisfy { set.receipts()[$0, default: 0] >= 1 } }
        #expect(arrived, "not all of \(texts) arrived: \(set.receipts())")
        for text in texts {
            #expect(set.receipts()[text, default: 0] + earlier[text, default: 0] == 1, "\(text) received \(set.receipts()[text, default: 0]) times")
        }
    }

    /// The conversation as `tether watch` prints it from the stored transcript, once it holds every one of `lines`.
    static func transcript(of set: ComposedSet, holding lines: [String]) async throws -> String {
        let watch = try ChildProcess(
            Programs.path("tether"), ["watch", "--history", "100", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "watch")
        defer { watch.stop() }
        _ = await eventually(timeout: .seconds(15)) { lines.allSatisfy { watch.standardOutput.contains($0) } }
        return watch.standardOutput
    }

    @Test func queuedMessagesAndTheTranscriptOutliveALogoutAndAReboot() async throws {
        let home = try DesktopHome()
        let first = try await ComposedSet(desktop: home)
        #expect(try first.tether(["send", "before the logout"]).status == 0)
        let logout = (1...3).map { "queued before the logout \($0)" }
        try Self.queue(logout, in: first)
        first.stop()
        for store in ["protod.sqlite", "conversation.sqlite", "snapd.sqlite"] {
            #expect(FileManager.default.fileExists(atPath: home.state + "/" + store), "\(store) is not in the state directory")
            #expect(!FileManager.default.fileExists(atPath: home.run + "/" + store), "\(store) is in the run directory")
        }

        // Logout: the set stopped, the runtime directory gone.
        try home.emptyRuntime()
        let second = try await ComposedSet(reusing: first)
        await Self.expectDeliveredOnce(logout, by: second)
        // Their replies are in before the connection is suspended again.
        _ = try await Self.transcript(of: second, holding: logout.map { "You said: \($0)" })
        let reboot = (1...2).map { "queued before the reboot \($0)" }
        try Self.queue(reboot, in: second)

        // Reboot: every program and the supervisor killed where they stood, the runtime directory gone.
        let state = try #require(second.state())
        kill(state.supervisorPID, SIGKILL)
        for program in state.programs { if let pid = program.pid { kill(-pid, SIGKILL) } }
        _ = await eventually(timeout: .seconds(10)) { state.programs.compactMap(\.pid).allSatisfy { kill($0, 0) != 0 } }
        try home.emptyRuntime()
        let third = try await ComposedSet(reusing: second)
        defer { third.stop() }
        await Self.expectDeliveredOnce(logout + reboot, by: third)
        #expect(try third.tether(["send", "after the reboot"]).status == 0)

        let everything = ["before the logout"] + logout + reboot + ["after the reboot"]
        let said = try await Self.transcript(of: third, holding: everything.map { "You said: \($0)" })
        for text in everything {
            #expect(said.contains("You said: \(text)"), "the transcript lacks the reply to \(text):\n\(said)")
        }
    }

    @Test func storesAnEarlierTetherKeptInTheRunDirectoryAreMovedOnceAndNothingIsLost() async throws {
        let home = try DesktopHome()
        // An earlier Tether: everything in the run directory.
        let old = try await ComposedSet(environment: ["TETHER_STATE": home.run], desktop: home)
        #expect(try old.tether(["send", "said to the earlier Tether"]).status == 0)
        let queued = (1...3).map { "queued in the earlier Tether \($0)" }
        try Self.queue(queued, in: old)
        old.stop()
        #expect(FileManager.default.fileExists(atPath: home.run + "/protod.sqlite"))
        let sentBefore = old.receipts()

        let new = try await ComposedSet(reusing: old)
        defer { new.stop() }
        for (store, what) in [("protod.sqlite", "the outbox"), ("conversation.sqlite", "the conversation journal"), ("snapd.sqlite", "the transcript")] {
            #expect(FileManager.default.fileExists(atPath: home.state + "/" + store), "\(store) was not moved")
            #expect(!FileManager.default.fileExists(atPath: home.run + "/" + store), "\(store) is still in the old place")
            let log = new.log(of: store == "snapd.sqlite" ? "snapd" : "protod")
            #expect(log.contains("moved \(what) from \(home.run)/\(store), which logout and reboot empty, to \(home.state)/\(store)"), "\(log)")
        }
        await Self.expectDeliveredOnce(queued, by: new, also: sentBefore)
        let said = try await Self.transcript(of: new, holding: ["You said: said to the earlier Tether"] + queued.map { "You said: \($0)" })
        for text in ["said to the earlier Tether"] + queued {
            #expect(said.contains("You said: \(text)"), "the transcript lacks \(text):\n\(said)")
        }
    }
}
