import Foundation
import GRDB
import Testing
import TetherTesting

/// A store that a newer Tether wrote (after a downgrade) is refused in words, at once, and
/// left as it is: the set does not start protod with a new outbox, nor set the old one aside.
@Suite(.serialized) struct NewerStoreTests {
    @Test func aDowngradedSetRefusesTheNewerOutboxInWordsAndLeavesItWhole() async throws {
        let first = try await ComposedSet()
        #expect(try first.tether(["send", "before the downgrade"]).status == 0)
        #expect(try first.tether(["suspend"]).status == 0)
        #expect(try first.tether(["send", "--timeout", "1", "waiting through the downgrade"]).standardError.contains("queued"))
        first.stop()
        let path = first.statePath + "/protod.sqlite"
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('from a later release')") }
        try queue.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let began = ContinuousClock.now
        let up = try ConfigurationErrorTests.compose(
            ["up", "--detach", "--file", Programs.packageRoot + "/compose/default.yaml", "--bin-dir", Programs.directory], run: first.run,
            environment: ["TETHER_GATEWAY_PORT": "\(first.port)", "TETHER_IDLE_SUSPEND": "0"])
        defer { _ = try? ConfigurationErrorTests.compose(["down"], run: first.run) }
        let words = "protod cannot run as configured: the outbox (\(path)) was written by a newer version of Tether than this one"
        #expect(up.status == 78, "\(up.standardOutput)\n\(up.standardError)")
        #expect(up.standardError.contains(words), "\(up.standardError)")
        #expect(up.standardError.contains("it is left as it is: install that version again (or a newer one) to use it"), "\(up.standardError)")
        #expect(ContinuousClock.now - began < .seconds(30), "said at once, not after the ready timeout")
        let status = try first.tether(["status"])
        #expect(status.standardOutput.contains(words), "\(status.standardOutput)\(status.standardError)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the outbox was changed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: first.statePath).allSatisfy { !$0.contains(".damaged-") })
        _ = try ConfigurationErrorTests.compose(["down"], run: first.run)

        // The newer version again (here: the change it made taken out): the waiting message goes out once.
        let again = try DatabaseQueue(path: path)
        try await again.write { db in try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'from a later release'") }
        try again.close()
        let set = try await ComposedSet(reusing: first)
        defer { set.stop() }
        let arrived = await eventually(timeout: .seconds(30)) { set.receipts()["waiting through the downgrade", default: 0] >= 1 }
        #expect(arrived, "\(set.receipts())")
        #expect(set.receipts()["waiting through the downgrade"] == 1)
    }
}
