import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// Today's gateway (`--openclaw current`) says by key what it kept of a message whose fate a
/// restart left unknown: through the whole set, protod decides by the receipt and the turn's
/// key, never by texts, and the gateway's own record shows each message once.
@Suite(.serialized) struct ReceiptEndToEndTests {
    /// protod is SIGKILLed after it wrote a message and before the gateway's acknowledgement
    /// came: the protod after it asks the gateway's receipts, finds the turn by its key, and
    /// neither writes the message again nor matches a text.
    @Test func aProtodKilledBeforeTheAcknowledgementLearnsTheMessagesFateByItsKey() async throws {
        let set = try await ComposedSet.openClaw(
            release: "current", protocols: "release", faults: #"{"acknowledgementDelayMilliseconds": 4000}"#, environment: ["TETHER_CHUNK_DELAY": "2500"])
        defer { set.stop() }
        // An existing session: today's gateway keeps an input to it before it acknowledges it.
        // Its reply's first words come 2.5 s after its turn starts: the protod after the kill
        // asks before any event of the run could tell it.
        let first = try set.tether(["send", "--timeout", "30", "morning"], timeout: .seconds(40))
        #expect(first.status == 0, "exit \(first.status ?? -1): \(first.standardError)")
        let bus = try set.busClient("receipt-test")
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        let diagnostics = try await BusRecorder<DiagnosticEvent>(bus: bus, topic: .diagnostic)
        let id = MessageID.random()
        _ = try await bus.request(SendMessageCommand.self, .init(id: id, content: "second"))
        // Written, and its outbox row says so (a protod killed before that writes it again
        // unasked, which the gateway's idempotency answers `in_flight`).
        let written = await eventually(timeout: .seconds(20)) {
            let sent = await deliveries.entries.contains { $0.value.id == id && $0.value.status == .sent }
            return sent && set.receipts()["second"] == 1
        }
        #expect(written, "the gateway never received it")
        // Its acknowledgement is 4 s late: protod dies before it.
        #expect(try await set.killAndAwaitRestart("protod"))
        let delivered = await eventually(timeout: .seconds(30)) { await deliveries.entries.contains { $0.value.id == id && $0.value.status == .delivered } }
        let updates = await deliveries.entries.filter { $0.value.id == id }.map(\.value)
        #expect(delivered, "\(updates)")
        let replied = await eventually(timeout: .seconds(30)) {
            set.openClawTranscript().contains { $0.role == "assistant" && $0.text == "You said: second" }
        }
        #expect(replied)
        try await Task.sleep(for: .seconds(2))
        #expect(set.receipts()["second"] == 1, "written twice: \(set.receipts())")
        #expect(set.openClawTranscript().count { $0.role == "user" && $0.text == "second" } == 1)
        #expect(set.openClawTranscript().count { $0.role == "assistant" && $0.text == "You said: second" } == 1)
        let status = try set.tether(["status"]).standardOutput
        let said = await diagnostics.entries.compactMap(\.value.detail)
        print("what protod said: \(said)")
        // Decided by its receipt when its outbox row said written before the kill; else written
        // again unasked under its key, which the gateway answers `in_flight`: never by texts.
        #expect(status.contains("the gateway answers receipts by key;") && status.contains(", 0 by matching texts"), "\(status)\n\(said)")
        #expect(status.contains("release tether-gateway-dev (OpenClaw current)"), "\(status)")
        await bus.close()
    }
}
