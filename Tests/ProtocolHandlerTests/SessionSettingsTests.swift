import Foundation
import OpenClawWire
import ProtocolHandler
import Testing
import TetherSchema

/// protod learns the session's settings and usage from the gateway's `sessions.list`, and
/// checks a change before it sends the gateway's text commands.
@Suite struct SessionSettingsTests {
    static let t0 = Date(timeIntervalSince1970: 1_776_060_000)
    static func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }
    let codec = OpenClawCodec()

    /// The `sessions.list` requests among the frames written, by request id.
    private func settingsRequests(_ actions: [DeliveryStateMachine.Action]) -> [String] {
        actions.compactMap { action -> String? in
            guard case .write(let frame) = action, case .request(let id, "sessions.list", _)? = try? codec.decode(frame.text) else { return nil }
            return id
        }
    }

    private func retained(_ actions: [DeliveryStateMachine.Action]) -> [SessionSettings] {
        actions.compactMap { if case .retainSettings(let settings) = $0 { settings } else { nil } }
    }

    private func answer(_ id: String, _ result: SessionsListResult) throws -> OpenClawFrame {
        try codec.decode(codec.encode(.response(id: id, ok: true, payload: try JSONValue(encoding: result), error: nil)))
    }

    @Test func theSessionsRowIsAskedForOnConnectingAndAfterEachRunAndRetained() throws {
        var machine = DeliveryStateMachine(settings: .init(streamInterval: 0), now: Self.t0)
        let started = machine.handle(.started(pending: [], session: .init(sessionID: nil, lastSequence: 0)), now: Self.at(0))
        #expect(retained(started).first?.unavailable == "not connected to a gateway yet")
        let gateway = GatewayInfo(dialect: .openclaw, protocolVersion: 3, mainSessionKey: "agent:main:main", scopes: ["operator.read", "operator.write"])
        _ = machine.handle(.wirePath(heard: true), now: Self.at(1))
        let up = machine.handle(.connectionUp(epoch: 1, id: "c1", gateway: gateway), now: Self.at(1))
        let first = try #require(settingsRequests(up).first, "no sessions.list on connecting")
        let methods = up.compactMap { action -> String? in
            guard case .write(let frame) = action, case .request(_, let method, _)? = try? codec.decode(frame.text) else { return nil }
            return method
        }
        #expect(methods == ["chat.history", "sessions.list"], "the conversation's history first")

        // The row of the session chatted in, found by its key as the gateway lists it.
        let rows = SessionsListResult(
            sessions: [
                .init(key: "agent:main:side", displayName: nil, updatedAt: 2, model: "other"),
                .init(
                    key: "agent:main:main", displayName: nil, updatedAt: 1, sessionId: "s1", thinkingLevel: "high", modelProvider: "anthropic",
                    model: "claude-sonnet-4-5", inputTokens: 1200, outputTokens: 340, totalTokens: 15400, contextTokens: 200_000, estimatedCostUsd: 0.031),
            ],
            defaults: .init(modelProvider: "anthropic", model: "claude-sonnet-4-5", contextTokens: 200_000))
        let learnt = retained(machine.handle(.openClawFrame(try answer(first, rows)), now: Self.at(2)))
        let settings = try #require(learnt.first)
        #expect(settings.sessionKey == "agent:main:main" && settings.sessionID == "s1" && settings.thinkingLevel == "high")
        #expect(settings.modelName == "anthropic/claude-sonnet-4-5" && settings.totalTokens == 15400 && settings.contextTokens == 200_000)
        #expect(retained(machine.handle(.openClawFrame(try answer(first, rows)), now: Self.at(3))).isEmpty, "the same again is not retained again")

        // A run of the session ends (a directive's answer, here): asked for again.
        let final = ChatEventPayload(
            runId: "other-run", sessionKey: "agent:main:main", seq: 1, state: .final,
            message: ChatTranscriptMessage(role: "assistant", text: "Thinking level set to low.", timestamp: 1))
        let ended = machine.handle(
            .openClawFrame(try codec.decode(codec.encode(.event(name: "chat", payload: try JSONValue(encoding: final), seq: 1)))), now: Self.at(4))
        #expect(settingsRequests(ended).count == 1)
    }

    @Test func aSessionTheGatewayDoesNotListYetHasItsDefaults() {
        let result = SessionsListResult(sessions: [], defaults: .init(modelProvider: "tether", model: "echo", contextTokens: 32000))
        let settings = DeliveryStateMachine.learnedSettings(of: "agent:main:new", in: result, mainSessionKey: "agent:main:main")
        #expect(settings == SessionSettings(sessionKey: "agent:main:new", modelProvider: "tether", model: "echo", contextTokens: 32000))
    }

    @Test func aSeedGatewayHasNoneAndSaysSoInWords() {
        var machine = DeliveryStateMachine(settings: .init(streamInterval: 0), now: Self.t0)
        _ = machine.handle(.started(pending: [], session: .init(sessionID: nil, lastSequence: 0)), now: Self.at(0))
        _ = machine.handle(.wirePath(heard: true), now: Self.at(1))
        let up = machine.handle(.connectionUp(epoch: 1, id: "c1", gateway: nil), now: Self.at(1))
        #expect(retained(up).first?.unavailable?.hasPrefix("not available with this gateway") == true)
        #expect(settingsRequests(up).isEmpty)
    }

    @Test func aChangeIsCheckedThenSentAsTheGatewaysTextCommands() throws {
        let models = [ModelChoice(id: "claude-sonnet-4-5", provider: "anthropic", alias: "sonnet"), ModelChoice(id: "gpt-5", provider: "openai")]
        let both = try SettingsChange.messages(model: "sonnet", thinking: "MAX", models: models).get()
        #expect(both.map(\.text) == ["/model anthropic/claude-sonnet-4-5", "/think high"])
        #expect(both.map(\.setting) == ["model", "thinking"])
        #expect(try SettingsChange.messages(model: "OpenAI/GPT-5", thinking: nil, models: models).get().map(\.text) == ["/model openai/gpt-5"])
        // Unchecked when the gateway could not list its models: it judges the name itself.
        #expect(try SettingsChange.messages(model: "x/y", thinking: nil, models: nil).get().map(\.text) == ["/model x/y"])
        guard case .failure(let unknown) = SettingsChange.messages(model: "gpt-4", thinking: "high", models: models) else {
            Issue.record("an unknown model was accepted")
            return
        }
        #expect(unknown.description == "the gateway has no model gpt-4: it has anthropic/claude-sonnet-4-5, openai/gpt-5 (/models lists them)")
        guard case .failure(let level) = SettingsChange.messages(model: nil, thinking: "extreme", models: nil) else {
            Issue.record("an unknown level was accepted")
            return
        }
        #expect(level.description.hasPrefix("extreme is no thinking level: use off, minimal, low, medium, high, xhigh, adaptive"))
    }

    @Test func theWordsSayTheChangeWaitsWhenTetherIsNotConnected() {
        let texts = ["/model openai/gpt-5", "/think high"]
        #expect(
            SessionSetCommand.Reply.detail(for: texts, connected: true, unchecked: nil)
                == "sent /model openai/gpt-5 and /think high to the gateway; it answers in the conversation")
        let waiting = SessionSetCommand.Reply.detail(for: texts, connected: false, unchecked: "not connected")
        #expect(
            waiting
                == "/model openai/gpt-5 and /think high wait in the outbox (the model is not checked: not connected): Tether is not connected to the gateway; they are sent once it is (tether status says why not), and the gateway answers in the conversation"
        )
        #expect(!waiting.contains("sent /"))
        #expect(SessionSetCommand.Reply.detail(for: ["/think low"], connected: false, unchecked: nil).hasPrefix("/think low waits in the outbox: "))
    }
}
