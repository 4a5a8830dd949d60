import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// What the gateway's history adds to the transcript through the real programs: another
/// client's messages under their sender's label, and nothing twice however often it is read.
@Suite(.serialized) struct GatewayHistoryTests {
    @Test func anotherClientsMessagesCarryTheirSenderAndReloadsAddNothing() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3")
        defer { set.stop() }
        let other = try await OtherOpenClawClient(port: set.port, token: try set.gatewayToken, displayName: "Phone")
        defer { other.stop() }
        _ = other.send("sent from the phone")
        let answered = await eventually(timeout: .seconds(20)) { set.openClawTranscript().contains { $0.text == "You said: sent from the phone" } }
        #expect(answered, "the other client's message was not answered")
        let send = try set.tether(["send", "sent", "from", "here"])
        #expect(send.status == 0 && send.standardOutput == "You said: sent from here\n", "\(send.status ?? -1) \(send.standardError)")
        // Each reconnect reads the history again.
        for _ in 0..<2 { #expect(try await set.killAndAwaitRestart("connd")) }
        let bus = try set.busClient("history-test")
        defer { Task { await bus.close() } }
        let settled = await eventually(timeout: .seconds(15)) {
            let entries = (try? await bus.request(TranscriptCommand.self, .init(limit: 100)).entries) ?? []
            return entries.contains { $0.author == "Phone (cli)" } && entries.count == 4
        }
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 100)).entries
        #expect(settled, "\(entries.map { "\($0.author ?? "you"): \($0.content)" })")
        let phone = entries.first { $0.content == "sent from the phone" }
        #expect(phone?.author == "Phone (cli)", "another client's message labelled \(phone?.author ?? "you")")
        #expect(entries.first { $0.content == "sent from here" }?.author == nil)
        let contents = entries.map(\.content)
        #expect(Set(contents).count == contents.count, "added twice: \(contents)")
    }
}
