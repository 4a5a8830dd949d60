import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// Today's gateway restarts as the real one does: it refuses new work `UNAVAILABLE`
/// (`gateway-restarting`, `retryAfterMs`) while it drains, says `shutdown` with the time it
/// expects, and closes with 1012. Through the whole set: nothing sent meanwhile is "failed",
/// each message is in the gateway's transcript once, and the connection says why it waits.
@Suite(.serialized) struct GatewayRestartEndToEndTests {
    @Test func messagesSentWhileTheGatewayRestartsWaitAndAreDeliveredOnce() async throws {
        let set = try await ComposedSet.openClaw(release: "current", protocols: "release")
        defer { set.stop() }
        let first = try set.tether(["send", "before the restart"])
        #expect(first.status == 0, "exit \(first.status ?? -1): \(first.standardError)")
        let bus = try set.busClient("restart-test")
        defer { Task { await bus.close() } }
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        try await postToGateway(port: set.port, token: try set.gatewayToken, path: "/admin/restart", "{}")
        let texts = (1...3).map { "during the restart \($0)" }
        var ids: [MessageID] = []
        for text in texts {
            let id = MessageID.random()
            ids.append(id)
            _ = try await bus.request(SendMessageCommand.self, .init(id: id, content: text))
        }
        let delivered = await eventually(timeout: .seconds(40)) {
            let updates = await deliveries.entries.map(\.value)
            return ids.allSatisfy { id in updates.contains { $0.id == id && $0.status == .delivered } }
        }
        let updates = await deliveries.entries.map(\.value)
        #expect(delivered, "\(updates.map { "\($0.id.value.prefix(6)) \($0.status) \($0.detail ?? "")" })")
        #expect(!updates.contains { $0.status == .failed }, "said failed: \(updates.filter { $0.status == .failed })")
        let notTaken = updates.filter { $0.detail?.hasPrefix("not taken: the gateway is restarting") == true }
        #expect(!notTaken.isEmpty, "no message was written during the drain: \(updates.map { "\($0.status) \($0.detail ?? "")" })")
        let said = await states.entries.compactMap(\.value.lastError)
        #expect(
            said.contains { $0.contains("the gateway is restarting (gateway restarting): it expects to be back in 1.5 s") },
            "the connection did not say why it waited: \(Set(said))")
        let replied = await eventually(timeout: .seconds(20)) {
            let transcript = set.openClawTranscript()
            return texts.allSatisfy { text in transcript.contains { $0.role == "assistant" && $0.text == "You said: \(text)" } }
        }
        #expect(replied)
        let transcript = set.openClawTranscript()
        for text in texts {
            #expect(
                transcript.count { $0.role == "user" && $0.text == text } == 1, "\(text) is in the transcript \(transcript.count { $0.text == text }) times")
        }
    }
}
