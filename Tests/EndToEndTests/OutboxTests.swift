import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// The outbox's limits, strategies, health and diagnostics through the whole set.
@Suite(.serialized) struct OutboxBehaviourTests {
    private func client(_ set: ComposedSet) throws -> BusClient {
        try BusClient(source: "outbox-test", runDirectory: set.run.runDirectory, logger: Logger(label: "outbox-test"))
    }

    @Test func queueFullExpiryAndCancelProduceTheirEvents() async throws {
        let set = try await ComposedSet(environment: ["TETHER_OUTBOX_LIMIT": "3", "TETHER_OUTBOX_EXPIRY": "3"])
        defer { set.stop() }
        let bus = try client(set)
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        let diagnostics = try await BusRecorder<DiagnosticEvent>(bus: bus, topic: .diagnostic)
        let suggestions = try await BusRecorder<RecoverySuggestion>(bus: bus, topic: .suggestion)
        #expect(try set.tether(["suspend"]).status == 0)

        let ids = (1...3).map { _ in MessageID.random() }
        for (index, id) in ids.enumerated() {
            _ = try await bus.request(SendMessageCommand.self, .init(id: id, content: "waiting \(index + 1)"))
        }
        // Full: a fourth is refused at once, in words, and nothing already queued is dropped.
        let refused = MessageID.random()
        do {
            _ = try await bus.request(SendMessageCommand.self, .init(id: refused, content: "one too many"))
            Issue.record("a fourth message was accepted into an outbox of 3")
        } catch {
            #expect("\(error)".contains("the outbox is full"), "\(error)")
        }
        let send = try set.tether(["send", "--timeout", "2", "also", "too", "many"])
        #expect(send.status == 5, "refused at send time has its own exit code")
        #expect(send.standardError.contains("outbox is full"), "\(send.standardError)")
        _ = try await diagnostics.waitFor { $0.kind == .queueOverflow }
        _ = try await suggestions.waitFor { $0.severity == .minor && $0.text.contains("outbox is full") }
        #expect(await !deliveries.entries.contains { $0.value.status == .failed }, "a queued message was dropped")
        #expect(await !deliveries.entries.contains { $0.value.id == refused }, "the refused message was queued")

        // Cancel one, then all.
        let one = try await bus.request(CancelCommand.self, .init(id: ids[0]))
        #expect(one.cancelled == [ids[0]])
        let cancel = try set.tether(["cancel", "--all"])
        #expect(cancel.standardOutput.contains("cancelled 2 messages"), "\(cancel.standardOutput) \(cancel.standardError)")
        for id in ids {
            _ = try await deliveries.waitFor { $0.id == id && $0.status == .cancelled }
        }

        // Expiry: not delivered within 3 s.
        let late = MessageID.random()
        _ = try await bus.request(SendMessageCommand.self, .init(id: late, content: "too late"))
        let expired = try await deliveries.waitFor(timeout: .seconds(10)) { $0.id == late && $0.status == .expired }
        #expect(expired.value.detail?.contains("not delivered within") == true)
        #expect(try set.tether(["resume"]).status == 0)
        try await Task.sleep(for: .seconds(1))
        #expect(set.gatewayRecord().isEmpty, "a refused, cancelled or expired message reached the gateway")
        await bus.close()
    }

    @Test func strategies() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        #expect(try set.tether(["suspend"]).status == 0)
        let immediate = try set.tether(["send", "--strategy", "immediate", "--timeout", "2", "now", "or", "never"])
        #expect(immediate.status == 1)
        #expect(immediate.standardError.contains("failed"), "\(immediate.standardError)")
        let waited = try set.tether(["send", "--wait", "1", "after", "a", "wait"])
        #expect(waited.status == 1)
        #expect(waited.standardError.contains("no connection"))

        let bus = try client(set)
        _ = try await bus.request(SendMessageCommand.self, .init(id: .random(), content: "fell back", strategy: .immediate, fallback: .queued))
        for word in ["typing 1", "typing 2", "typing 3"] {
            _ = try await bus.request(SendMessageCommand.self, .init(id: .random(), content: word, strategy: .latestOnly, kind: "typing"))
        }
        #expect(try set.tether(["resume"]).status == 0)
        let delivered = await eventually { set.gatewayRecord().count >= 2 }
        #expect(delivered)
        try await Task.sleep(for: .seconds(1))
        let contents = set.gatewayRecord().compactMap { $0["content"] as? String }
        #expect(contents == ["fell back", "typing 3"], "only the newest of a kind, and the fallback: \(contents)")
        await bus.close()
    }

    @Test func healthDegradesUnderFailuresAndRecovers() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let bus = try client(set)
        let health = try await BusRecorder<HealthReport>(bus: bus, topic: .health)
        let suggestions = try await BusRecorder<RecoverySuggestion>(bus: bus, topic: .suggestion)
        let diagnostics = try await BusRecorder<DiagnosticEvent>(bus: bus, topic: .diagnostic)
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        _ = try await health.waitFor { $0.state == .healthy }

        // Acknowledgements come 2 s late; these messages call them late after 300 ms.
        try await set.faults(#"{"frameDelayMilliseconds": 2000}"#)
        let impatient = RetryPolicy(attempts: 1, delayMilliseconds: 0, timeoutMilliseconds: 300)
        for index in 1...3 {
            _ = try await bus.request(SendMessageCommand.self, .init(id: .random(), content: "impatient \(index)", retry: impatient))
        }
        _ = try await health.waitFor { $0.state == .degraded }
        _ = try await health.waitFor { $0.state == .unhealthy }
        // Each recorder reads its own subscription: give the others a moment to catch up.
        _ = await eventually { await diagnostics.entries.filter { $0.value.kind == .acknowledgementOverdue }.count >= 3 }
        _ = await eventually { await !suggestions.entries.isEmpty }
        try await Task.sleep(for: .milliseconds(300))
        let late = await diagnostics.entries.filter { $0.value.kind == .acknowledgementOverdue }
        #expect(late.count == 3, "one late acknowledgement a message: \(late.count)")
        let repeated = await suggestions.entries.filter { $0.value.text.contains("slow to acknowledge") }
        #expect(repeated.count == 1, "the same suggestion within 30 s: \(repeated.count) times")
        // Late is not lost: each is delivered once the acknowledgement comes.
        let settled = await eventually(timeout: .seconds(20)) { await deliveries.entries.filter { $0.value.status == .delivered }.count >= 3 }
        #expect(settled)
        #expect(await !deliveries.entries.contains { $0.value.status == .failed }, "a message the gateway had was said to have failed")

        try await set.faults("{}", method: "DELETE")
        // Then succeed five times.
        for index in 1...5 {
            let send = try set.tether(["send", "patient \(index)"])
            #expect(send.status == 0, "\(send.standardError)")
        }
        _ = try await health.waitFor { $0.state == .healthy && $0.recentFailures == 0 }
        // Each recorder reads its own subscription: the diagnostics may trail the health report a little.
        let allSent = await eventually { await diagnostics.entries.filter { $0.value.kind == .messageSent }.count >= 5 }
        #expect(allSent)
        let sent = await diagnostics.entries.filter { $0.value.kind == .messageSent }
        #expect(sent.allSatisfy { $0.value.durationMilliseconds != nil })
        _ = try await diagnostics.waitFor { $0.kind == .healthChanged && $0.detail == "healthy" }
        await bus.close()
    }

    @Test func recoveryAsksConndToReconnect() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let bus = try client(set)
        let diagnostics = try await BusRecorder<DiagnosticEvent>(bus: bus, topic: .diagnostic)
        let reply = try await bus.request(RecoverCommand.self, .init())
        #expect(reply.reconnecting)
        _ = try await diagnostics.waitFor { $0.kind == .recoveryAttempted }
        _ = try await diagnostics.waitFor { $0.kind == .recoverySucceeded }
        let send = try set.tether(["send", "after", "recovery"])
        #expect(send.status == 0)
        await bus.close()
    }
}
