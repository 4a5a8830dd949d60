import Foundation
import OpenClawWire
import TetherService

/// Session settings and usage as the gateway keeps them: `models.list`, `agents.list`, the
/// usage fields of `sessions.list`, and the text commands a client without `operator.admin`
/// changes a session with (`/model`, `/think`, `/new`, `/reset`), answered as the gateway does.
extension OpenClawGateway {
    /// A session's settings and usage: the stored overrides and the token counters.
    struct SessionState: Sendable {
        /// The model chosen with `/model`; nil: the default.
        var model: ModelsListResult.Model?
        var thinkingLevel: String?
        var inputTokens = 0
        var outputTokens = 0
        /// The tokens of the session's transcript: what its context holds.
        var totalTokens = 0
    }

    /// The gateway's model catalog: its bot under two names.
    static let catalog = [
        ModelsListResult.Model(id: model, name: "Tether dev echo", provider: modelProvider, contextWindow: 32000, reasoning: false),
        ModelsListResult.Model(
            id: "tether-dev-echo-large", name: "Tether dev echo, large", provider: modelProvider, alias: "large", contextWindow: 200_000, reasoning: true),
    ]
    /// The provider of its models.
    static let modelProvider = "tether"

    /// The agents: `main`, whose main session is the gateway's, and `ops`.
    static let agents = AgentsListResult(
        defaultId: "main", mainKey: "main", scope: "per-sender",
        agents: [
            AgentsListResult.Agent(id: "main", name: nil, model: .init(primary: "\(modelProvider)/\(model)")),
            AgentsListResult.Agent(id: "ops", name: "Ops", model: .init(primary: "\(modelProvider)/\(model)")),
        ])

    /// The levels `/think` accepts with the default model, as the gateway lists them.
    static let thinkingLevels = "off, minimal, low, medium, high, adaptive"

    /// A text's tokens, as the gateway's estimate counts them: four characters a token.
    static func tokens(_ text: String) -> Int { max(1, (text.utf8.count + 3) / 4) }

    /// `models.list`, `agents.list` and `sessions.list`; nil for another method.
    func settingsRequest(method: String, on link: OpenClawClientConnection) -> (ok: Bool, payload: JSONValue?, error: GatewayErrorShape?)? {
        switch method {
        case "models.list", "agents.list", "sessions.list":
            guard link.allows("operator.read") else { return (false, nil, Self.missingScope("operator.read")) }
        default:
            return nil
        }
        switch method {
        case "models.list": return (true, try? JSONValue(encoding: ModelsListResult(models: Self.catalog)), nil)
        case "agents.list": return (true, try? JSONValue(encoding: Self.agents), nil)
        default:
            // As the gateway: the most recently updated first.
            let keys = Set(transcripts.keys).union([Self.mainSessionKey]).union(sessionStates.keys)
            let rows = keys.map(sessionRow).sorted { ($0.updatedAt ?? 0, $1.key) > ($1.updatedAt ?? 0, $0.key) }
            let defaults = SessionsListResult.Defaults(modelProvider: Self.modelProvider, model: Self.model, contextTokens: Self.catalog[0].contextWindow)
            return (true, try? JSONValue(encoding: SessionsListResult(sessions: rows, defaults: defaults)), nil)
        }
    }

    /// A session's `sessions.list` row: its model (the default's when none was chosen), its
    /// thinking level when set, its tokens once a run counted some, the model's context window.
    private func sessionRow(_ key: String) -> SessionsListResult.Session {
        let state = sessionStates[key] ?? SessionState()
        let model = state.model ?? Self.catalog[0]
        let counted = state.inputTokens + state.outputTokens > 0
        return SessionsListResult.Session(
            key: key, displayName: nil, updatedAt: transcripts[key]?.last?.timestamp, sessionId: transcripts[key] == nil ? nil : sessionID(key),
            thinkingLevel: state.thinkingLevel, modelProvider: model.provider, model: model.id, inputTokens: counted ? state.inputTokens : nil,
            outputTokens: counted ? state.outputTokens : nil, totalTokens: counted ? state.totalTokens : nil, totalTokensFresh: counted ? true : nil,
            contextTokens: model.contextWindow, lastBusyMessageOutcome: lastBusyOutcomes[key])
    }

    /// The model a session's replies are written by.
    func modelOf(_ session: String) -> String { sessionStates[session]?.model?.id ?? Self.model }

    /// Counts a run's tokens: its message in, its reply out; the context holds both.
    func countTokens(message: String, reply: String, in session: String) {
        var state = sessionStates[session] ?? SessionState()
        let (input, output) = (Self.tokens(message), Self.tokens(reply))
        state.inputTokens += input
        state.outputTokens += output
        state.totalTokens += input + output
        sessionStates[session] = state
    }

    /// Whether a message is a bare `/new` or `/reset` (in any case), or one followed by text.
    static func resetCommand(in text: String) -> (command: String, rest: String)? {
        let words = text.split(separator: " ", maxSplits: 1)
        guard let first = words.first?.lowercased(), first == "/new" || first == "/reset" else { return nil }
        return (first, words.count > 1 ? String(words[1]).trimmingCharacters(in: .whitespaces) : "")
    }

    /// The greeting of a session started anew by a bare `/new` or `/reset`, as its agent is
    /// prompted to give one.
    static func greeting(model: String) -> String {
        "A new session has started (model \(modelProvider)/\(model)). What would you like to do?"
    }

    /// `/new` and `/reset`: the same key, a new session id, an empty transcript and no tokens;
    /// the model and thinking level stay.
    func resetSession(_ session: String) {
        sessionIDs[session] = UUID().uuidString.lowercased()
        clearTranscript(session)
        orphans[session] = nil
        var state = sessionStates[session] ?? SessionState()
        (state.inputTokens, state.outputTokens, state.totalTokens) = (0, 0, 0)
        sessionStates[session] = state
    }

    /// The answer to a directive-only message (`/model NAME`, `/think LEVEL`): nil for another
    /// message. It is applied to the session, and answered without a run.
    func directive(_ text: String, in session: String) -> String? {
        let words = text.split(whereSeparator: \.isWhitespace).map(String.init)
        guard words.count == 2 else { return nil }
        switch words[0].lowercased() {
        case "/model":
            let wanted = words[1].lowercased()
            guard let chosen = Self.catalog.first(where: { [$0.id, "\($0.provider)/\($0.id)", $0.alias].compactMap { $0?.lowercased() }.contains(wanted) })
            else {
                return "Unrecognized model \"\(words[1])\". Use /models to list providers, or /models <provider> to list models."
            }
            let isDefault = chosen.id == Self.model
            sessionStates[session, default: SessionState()].model = isDefault ? nil : chosen
            let label = "\(chosen.provider)/\(chosen.id)"
            let named = chosen.alias.map { "\($0) (\(label))" } ?? label
            return isDefault ? "Model reset to default (\(named))." : "Model set to \(named)."
        case "/think", "/thinking", "/t":
            guard let level = Self.thinkingLevel(words[1]) else {
                return "Unrecognized thinking level \"\(words[1])\". Valid levels: \(Self.thinkingLevels)."
            }
            guard level != "xhigh" else {
                return "Thinking level \"xhigh\" is only supported for provider models that advertise xhigh reasoning."
            }
            sessionStates[session, default: SessionState()].thinkingLevel = level
            return level == "off" ? "Thinking disabled." : "Thinking level set to \(level)."
        default:
            return nil
        }
    }

    /// The level a `/think` argument names, as the gateway's `normalizeThinkLevel` reads it.
    static func thinkingLevel(_ raw: String) -> String? {
        let key = raw.lowercased()
        let collapsed = key.filter { !" _-".contains($0) }
        if collapsed == "adaptive" || collapsed == "auto" { return "adaptive" }
        if collapsed == "xhigh" || collapsed == "extrahigh" { return "xhigh" }
        if key == "off" { return "off" }
        if ["on", "enable", "enabled", "low", "thinkhard", "think-hard", "think_hard"].contains(key) { return "low" }
        if ["min", "minimal", "think"].contains(key) { return "minimal" }
        if ["mid", "med", "medium", "thinkharder", "think-harder", "harder"].contains(key) { return "medium" }
        if ["high", "ultra", "ultrathink", "thinkhardest", "highest", "max"].contains(key) { return "high" }
        return nil
    }

    /// Answers a directive-only message as the gateway does when no agent run started
    /// (`chat.send`'s `!agentRunStarted` branch): the answer alone joins the transcript, as an
    /// assistant note of the gateway's own (`model: gateway-injected`), and one `chat` final
    /// carries it; no run, no lifecycle events. The user's message is not written: the gateway
    /// only tells live subscribers of it.
    func answerDirective(_ answer: String, runID: String, in session: String) async {
        let now = OpenClawProtocol.milliseconds(Date())
        var note = ChatTranscriptMessage(role: "assistant", text: answer, timestamp: now, stopReason: "stop")
        note.model = "gateway-injected"
        append(note, to: session)
        finishedRuns[runID] = (ChatSendResult(runId: runID, status: "ok"), true, Date())
        let final = ChatTranscriptMessage(role: "assistant", text: answer, timestamp: now, stopReason: "stop")
        await broadcast(droppable: false) { _ in
            ("chat", try? JSONValue(encoding: ChatEventPayload(runId: runID, sessionKey: session, seq: 1, state: .final, message: final)))
        }
    }
}
