import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// Today's gateways (protocol 4) say where a run stands and why it failed: the development
/// gateway's `rateLimitRetries` and `modelErrorKind` faults send `status` and `error` events as
/// they do, through the whole set.
@Suite(.serialized) struct RunStatusEndToEndTests {
    @Test func aRateLimitedRunShowsItsRetriesThenItsReply() async throws {
        let set = try await ComposedSet.openClaw(
            release: "current", protocols: "release", faults: #"{"rateLimitRetries": 2}"#, environment: ["TETHER_GATEWAY_MODEL_RETRY": "0.5"])
        defer { set.stop() }
        let bus = try set.busClient("run-status-test")
        let bot = try await BusRecorder<BotActivity>(bus: bus, topic: .botState)
        let send = try set.tether(["send", "--timeout", "30", "are", "you", "there"], timeout: .seconds(40))
        #expect(send.status == 0 && send.standardOutput == "You said: are you there\n", "exit \(send.status ?? -1): \(send.standardError)")
        let retries = await bot.entries.compactMap { $0.value.state == .thinking ? $0.value.detail : nil }
        #expect(retries.contains("retrying: rate limit, 1 of 5") && retries.contains("retrying: rate limit, 2 of 5"), "\(retries)")
        // The terminal UI's status line and `tether status` read the same retained state.
        await bus.close()
    }

    @Test func anErrorEventEndsTheReplyIncompleteInItsWordsAndSendExits3() async throws {
        let set = try await ComposedSet.openClaw(release: "2026.5", protocols: "release", faults: #"{"modelErrorKind": "context_length"}"#)
        defer { set.stop() }
        let send = try set.tether(["send", "--timeout", "30", "a", "very", "long", "story"], timeout: .seconds(40))
        #expect(send.status == 3, "exit \(send.status ?? -1): \(send.standardError)")
        #expect(
            send.standardError.contains(
                "the reply is incomplete: the conversation is longer than the model's context: the prompt is longer than the model's context window"),
            "\(send.standardError)")
        // The message reached the gateway and is in its transcript: delivered, never said failed.
        #expect(send.standardError.contains("delivered") || !send.standardError.contains("failed"), "\(send.standardError)")
        #expect(set.openClawTranscript().contains { $0.role == "user" && $0.text == "a very long story" })
    }

    /// `tether status` says which gateway it is from the handshake, and what Tether relies on.
    @Test func theStatusSaysWhichGatewayItIs() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3")
        defer { set.stop() }
        #expect(try set.tether(["send", "hello"]).status == 0)
        let status = try set.tether(["status"]).standardOutput
        #expect(status.contains("gateway: OpenClaw of the 2026.4 line (protocol 3), release tether-gateway-dev (OpenClaw 2026.4)"), "\(status)")
        #expect(status.contains("no delivery receipts, catch-up cursors, queue modes or run status"), "\(status)")
    }
}
