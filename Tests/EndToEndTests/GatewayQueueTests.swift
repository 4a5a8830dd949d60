import Foundation
import Logging
import OpenClawWire
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// A message of Tether's in the gateway's own queue, in memory: what a crash or the queue's cap
/// of 20 does to it, and what Tether says. Tether writes nothing while a run is under way in the
/// session, so the test puts one there the way a race does: connd is paused with Tether's
/// message in hand while another client's run starts, and goes on once the gateway is busy.
@Suite(.serialized) struct GatewayQueueTests {
    struct Scene {
        let set: ComposedSet
        let bus: BusClient
        let other: OtherOpenClawClient
        let deliveries: BusRecorder<DeliveryUpdate>
        /// `tether send` of the message that waits in the gateway's queue.
        let send: ChildProcess
        let text: String

        /// After the gateway's restart: the send printed its reply, the message is in the
        /// gateway's transcript once, and it was never said delivered while the transcript lacked it.
        func expectDeliveredOnceAfterTheRestart() async throws {
            let status = try send.waitForExit(timeout: .seconds(130))
            #expect(status == 0 && send.standardOutput == "You said: \(text)\n", "exit \(status): \(send.standardError)")
            let stored = storedTimes()
            #expect(stored == 1, "\(stored) times in the gateway's transcript: \(set.openClawTranscript().map { "\($0.role): \($0.text.prefix(60))" })")
            let untrue = await GatewayQueueTests.deliveredButMissing(self)
            #expect(!untrue, "said delivered while the gateway's transcript lacks it")
        }

        /// How many of the gateway's user entries hold the message: as written, or as the last part
        /// of the entry a gateway restarted in the middle of a run writes in its place (the orphaned
        /// message and this one, merged).
        func storedTimes() -> Int {
            set.openClawTranscript().filter { $0.role == "user" && OpenClawProtocol.rewriteParts(of: $0.text).last == text }.count
        }

        func finish() async {
            other.stop()
            await bus.close()
        }
    }

    /// The set, another client, and Tether's message waiting in the gateway's queue behind that
    /// client's run.
    static func queuedBehindAnotherRun(release: String = "2026.4", environment: [String: String] = [:]) async throws -> Scene {
        let set = try await ComposedSet.openClaw(
            release: release, protocols: release == "2026.4" ? "3" : "release", environment: ["TETHER_CHUNK_DELAY": "60"].merging(environment) { $1 })
        // protod writes nothing until its history lookup on the new connection is answered: a
        // message answered first shows the lookup done, so pausing connd cannot hold it up.
        let warmUp = try set.tether(["send", "--timeout", "60", "before the queue"], timeout: .seconds(70))
        #expect(warmUp.status == 0, "\(warmUp.standardError)")
        let bus = try BusClient(source: "gateway-queue-test", runDirectory: set.run.runDirectory, logger: Logger(label: "gateway-queue-test"))
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        let other = try await OtherOpenClawClient(port: set.port, token: try set.gatewayToken)
        let connd = try #require(set.pid(of: "connd"))
        kill(connd, SIGSTOP)
        let text = "waiting in the gateway's queue"
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "120", "--run-dir", set.run.path] + text.split(separator: " ").map(String.init),
            outputDirectory: set.run.path, name: "send")
        let written = await eventually { await deliveries.entries.contains { $0.value.status == .sent } }
        #expect(written, "protod did not write the message")
        other.send((1...40).map { "word\($0)" }.joined(separator: " "))
        try await Task.sleep(for: .milliseconds(500))
        kill(connd, SIGCONT)
        let accepted = await eventually(timeout: .seconds(15)) { await deliveries.entries.contains { $0.value.status == .accepted } }
        let seen = await deliveries.entries.map { "\($0.value.status)" }
        #expect(accepted, "the message never waited in the gateway's queue: \(seen)")
        return Scene(set: set, bus: bus, other: other, deliveries: deliveries, send: send, text: text)
    }

    /// Whether a delivered mark was said for a message whose text the gateway's transcript lacks.
    static func deliveredButMissing(_ scene: Scene) async -> Bool {
        let delivered = await scene.deliveries.entries.contains { $0.value.status == .delivered }
        return delivered && scene.storedTimes() == 0
    }

    @Test func theGatewayKilledWithTetherMessageInItsQueueLosesItAndTetherWritesItAgain() async throws {
        let scene = try await Self.queuedBehindAnotherRun()
        defer { scene.set.stop() }
        let untrueBefore = await Self.deliveredButMissing(scene)
        #expect(!untrueBefore, "said delivered while the gateway's transcript lacks it")
        #expect(try await scene.set.killAndAwaitRestart("gateway"))
        try await scene.expectDeliveredOnceAfterTheRestart()
        await scene.finish()
    }

    /// Today's gateway keeps the queued input (its receipt says pending, queued): Tether says so
    /// and never writes it again while it is kept; killed, the gateway brings it back
    /// `interrupted`, and Tether writes it again under its key: stored once, answered once.
    @Test func theGatewayKilledWithTetherMessageInItsQueueOnTodaysGatewayRunsItOnce() async throws {
        let scene = try await Self.queuedBehindAnotherRun(release: "current")
        defer { scene.set.stop() }
        let said = await scene.deliveries.entries.compactMap(\.value.detail)
        #expect(said.contains { $0.contains("gateway's queue") }, "\(said)")
        #expect(try await scene.set.killAndAwaitRestart("gateway"))
        try await scene.expectDeliveredOnceAfterTheRestart()
        // Written before the crash and once after it, when its receipt said the wait was interrupted.
        #expect(scene.set.receipts()[scene.text] == 2, "\(scene.set.receipts())")
        await scene.finish()
    }

    @Test func protodRestartedWhileTheMessageWaitsInTheGatewaysQueueStillNeverSaysItDelivered() async throws {
        let scene = try await Self.queuedBehindAnotherRun()
        defer { scene.set.stop() }
        // protod restarts and reconnects while the gateway still holds the message in memory.
        #expect(try await scene.set.killAndAwaitRestart("protod"))
        try await Task.sleep(for: .seconds(2))
        let untrue = await Self.deliveredButMissing(scene)
        let seen = await scene.deliveries.entries.map { "\($0.value.status)" }
        #expect(!untrue, "said delivered after protod's restart while only the gateway's memory had it: \(seen)")
        #expect(try await scene.set.killAndAwaitRestart("gateway"))
        try await scene.expectDeliveredOnceAfterTheRestart()
        await scene.finish()
    }

    @Test func aMessageTheFullQueueDroppedIsSaidDroppedAndNeverDelivered() async throws {
        let scene = try await Self.queuedBehindAnotherRun(environment: ["TETHER_GATEWAY_FOLLOW_UP": "0.1"])
        defer { scene.set.stop() }
        // Twenty more behind it: the queue keeps 20, the oldest (Tether's) is dropped.
        for index in 1...20 { scene.other.send("q\(index)") }
        let status = try scene.send.waitForExit(timeout: .seconds(130))
        #expect(status == 1, "exit \(status): \(scene.send.standardOutput) \(scene.send.standardError)")
        #expect(scene.send.standardError.contains("dropped by the gateway"), "\(scene.send.standardError)")
        let delivered = await scene.deliveries.entries.contains { $0.value.status == .delivered }
        #expect(!delivered, "said delivered")
        let summary = scene.set.openClawTranscript().filter { $0.role == "user" && $0.text.contains("[Queue overflow] Dropped 1 messages due to cap.") }
        #expect(summary.count == 1 && summary.first?.text.hasSuffix("] \(scene.text)") == true, "\(summary)")
        await scene.finish()
    }

    @Test func theGatewayKilledWithItsQueueOverItsCapLosesNothingTetherSaidDelivered() async throws {
        let scene = try await Self.queuedBehindAnotherRun()
        defer { scene.set.stop() }
        for index in 1...20 { scene.other.send("q\(index)") }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await scene.set.killAndAwaitRestart("gateway"))
        try await scene.expectDeliveredOnceAfterTheRestart()
        await scene.finish()
    }
}
