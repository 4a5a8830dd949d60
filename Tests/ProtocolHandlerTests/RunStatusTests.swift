import Foundation
import OpenClawWire
import ProtocolHandler
import Testing
import TetherSchema
import TetherWire

/// Today's gateways say where a run stands (`status` events: its phase, the model's retries)
/// and why it failed (`error` events with `errorKind`): protod says it in the same words.
extension OpenClawDeliveryTests {
    static func status(_ run: String, phase: String? = nil, retry: ChatEventPayload.Retry? = nil) -> ChatEventPayload {
        ChatEventPayload(runId: run, sessionKey: "agent:main:main", seq: 1, state: .status, phase: phase, retry: retry)
    }

    @Test func aRateLimitedRunShowsItsRetriesThenItsReply() throws {
        var driver = Self.runStarted()
        driver.chat(Self.status("m1", phase: "preparing_workspace"), on: "c1", at: 0.3)
        var thinking = driver.log.compactMap { if case .retainBotState(let state) = $0 { state } else { nil } }.last
        #expect(thinking?.state == .thinking && thinking?.detail == "preparing workspace")
        for attempt in 1...2 {
            driver.chat(Self.status("m1", retry: .init(attempt: attempt, maxAttempts: 5, reason: "rate_limit")), on: "c1", at: 0.3 + Double(attempt))
        }
        thinking = driver.log.compactMap { if case .retainBotState(let state) = $0 { state } else { nil } }.last
        #expect(thinking?.state == .thinking && thinking?.detail == "retrying: rate limit, 2 of 5")
        let said = driver.log.compactMap { if case .diagnose(let event) = $0, event.kind == .replyFailed { event } else { nil } }
        #expect(said.map(\.detail) == ["the gateway is retrying: rate limit, 1 of 5", "the gateway is retrying: rate limit, 2 of 5"])
        #expect(said.allSatisfy { $0.willRetry == true })
        let reply = ChatTranscriptMessage(role: "assistant", text: "at last", timestamp: 3000)
        driver.chat(ChatEventPayload(runId: "m1", sessionKey: "agent:main:main", seq: 4, state: .final, message: reply), on: "c1", at: 3)
        let entry = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(entry.status == .received && entry.content == "at last")
        #expect(driver.botStates.last == .idle)
    }

    @Test func aStatusAfterTheReplyStartedChangesNothingShown() {
        var driver = Self.runStarted()
        driver.chat(ChatEventPayload(runId: "m1", sessionKey: "agent:main:main", seq: 1, state: .delta, deltaText: "Hel"), on: "c1", at: 0.3)
        let before = driver.log.count { if case .retainBotState = $0 { true } else { false } }
        driver.chat(Self.status("m1", phase: "compacting"), on: "c1", at: 0.4)
        #expect(driver.log.count { if case .retainBotState = $0 { true } else { false } } == before)
    }

    @Test(
        arguments: [
            ("rate_limit", "429 Too Many Requests", "the model's rate limit was reached and the gateway gave up: 429 Too Many Requests"),
            ("refusal", nil, "the model refused to answer"),
            ("timeout", "no answer in 600 s", "the model took too long and the gateway gave up (timeout): no answer in 600 s"),
            ("context_length", "prompt is 210,000 tokens", "the conversation is longer than the model's context: prompt is 210,000 tokens"),
            ("unknown", "boom", "the gateway reported an error (unknown): boom"),
            (nil, nil, "the gateway reported an error: no reason given"),
        ] as [(String?, String?, String)])
    func anErrorEndsTheReplyIncompleteInTheGatewaysWords(kind: String?, detail: String?, words: String) throws {
        var driver = Self.runStarted()
        driver.chat(
            ChatEventPayload(runId: "m1", sessionKey: "agent:main:main", seq: 1, state: .error, errorMessage: detail, errorKind: kind, errorDetail: detail),
            on: "c1", at: 0.5)
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.status == .incomplete && reply.detail == words)
        #expect(driver.botStates.last == .idle)
    }

    @Test func aStatusEventDecodesAsTodaysGatewayWritesIt() throws {
        let json = #"{"runId":"r","sessionKey":"agent:main:main","seq":3,"state":"status","retry":{"attempt":2,"maxAttempts":5,"reason":"rate_limit"}}"#
        let event = try JSONDecoder().decode(ChatEventPayload.self, from: Data(json.utf8))
        #expect(event.state == .status && event.retry?.attempt == 2 && event.retry?.maxAttempts == 5)
    }
}
