import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// How soon a connection that stopped answering is found dead, in both dialects, and that
/// what was sent into it arrives once. Timed, so one test at a time with nothing beside it.
@Suite(.serialized) struct DeadConnectionTests {
    static func client(_ set: ComposedSet) throws -> BusClient {
        try BusClient(source: "dead-connection-test", runDirectory: set.run.runDirectory, logger: Logger(label: "dead-connection-test"))
    }

    /// Against a gateway without Tether's additions (a seed-only peer: no duplicate
    /// suppression, no session resume, no `replyTo`).
    @Test func aSilentSeedGatewayWithAMessageWaitingIsFoundWithinSecondsAndGetsTheMessageOnce() async throws {
        let set = try await ComposedSet.seedPeer(environment: ["TETHER_RECONNECT_PRESET": "aggressive"])
        defer { set.stop() }
        let bus = try Self.client(set)
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        _ = try await states.waitFor { $0.phase == .connected }
        try await set.faults(#"{"silent": true}"#)
        let id = MessageID.random()
        let sent = ContinuousClock.now
        _ = try await bus.request(SendMessageCommand.self, .init(id: id, content: "into the silence"))
        let lost = try await states.waitFor(since: sent) { $0.phase != .connected }
        let detection = sent.duration(to: lost.receivedAt)
        print("silent gateway: found \(detection) after the message was written (\(lost.value.phase.rawValue))")
        #expect(detection < .seconds(5))
        // Silent while connd connects to it again three times, each found dead in turn, with
        // the message waiting; then back.
        let reconnectedThrice = await eventually(timeout: .seconds(60)) {
            await states.entries.filter { $0.value.phase == .connected && $0.receivedAt > lost.receivedAt }.count >= 3
        }
        #expect(reconnectedThrice, "connd did not connect to the silent gateway again three times")
        try await set.faults(#"{"silent": false}"#)
        let back = ContinuousClock.now
        let delivered = try await deliveries.waitFor(timeout: .seconds(30)) { $0.id == id && $0.status == .delivered }
        print("silent gateway: \(sent.duration(to: back)) silent; delivered \(back.duration(to: delivered.receivedAt)) after it answered again")
        // A second copy would come within the gateway's answer time: wait past it.
        try await Task.sleep(for: .seconds(1))
        let received = set.receipts()["into the silence"] ?? 0
        #expect(received == 1, "received \(received) times")
        await bus.close()
    }

    /// OpenClaw's own liveness: the gateway's `tick` events.
    @Test func whenOpenClawTicksStopTheConnectionIsDeadWithinTwoIntervalsAndNothingIsLost() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_GATEWAY_TICK": "1", "TETHER_RECONNECT_PRESET": "aggressive"])
        defer { set.stop() }
        let bus = try Self.client(set)
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        let connected = try await states.waitFor { $0.phase == .connected }
        try await Task.sleep(for: .seconds(3))
        // conn.state from before the connection (the set is ready once connd says anything) does not count.
        #expect(await !states.entries.contains { $0.receivedAt > connected.receivedAt && $0.value.phase != .connected }, "dropped while ticks came")
        try await set.faults(#"{"stopTicking": true}"#)
        let stopped = ContinuousClock.now
        let dead = try await states.waitFor(timeout: .seconds(10), since: stopped) { $0.phase != .connected }
        let detection = stopped.duration(to: dead.receivedAt)
        print("ticks stopped: the connection was found dead after \(detection) (interval 1 s): \(dead.value.lastError ?? "")")
        #expect(detection < .seconds(3.5), "dead after \(detection), more than two intervals")
        #expect(dead.value.lastError?.contains("two tick intervals") == true, "\(String(describing: dead.value.lastError))")
        let id = MessageID.random()
        _ = try await bus.request(SendMessageCommand.self, .init(id: id, content: "while the ticks were gone"))
        try await set.faults(#"{"stopTicking": false}"#)
        _ = try await deliveries.waitFor(timeout: .seconds(20)) { $0.id == id && $0.status == .delivered }
        try await Task.sleep(for: .seconds(1))
        #expect(set.openClawTranscript().filter { $0.role == "user" }.map(\.text) == ["while the ticks were gone"])
        await bus.close()
    }
}
