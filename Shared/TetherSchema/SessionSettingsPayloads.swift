import FoundationEssentials
public import TetherWire

/// The settings and usage of the session Tether chats in, as the gateway last said them
/// (OpenClaw's `sessions.list` row for it), retained on `session.settings`.
public struct SessionSettings: Codable, Sendable, Equatable {
    /// Why there are none, in words (a seed gateway, no gateway connected yet); nil when known.
    public var unavailable: String?
    /// The session they are of (canonical).
    public var sessionKey: String?
    /// The gateway's id of the session's current transcript: `/new` and `/reset` change it.
    public var sessionID: String?
    public var modelProvider: String?
    public var model: String?
    /// The thinking level set for the session; nil: the model's default.
    public var thinkingLevel: String?
    public var inputTokens: Int?
    public var outputTokens: Int?
    /// The tokens the session's context holds.
    public var totalTokens: Int?
    /// The model's context window.
    public var contextTokens: Int?
    public var estimatedCostUsd: Double?

    public init(
        unavailable: String? = nil, sessionKey: String? = nil, sessionID: String? = nil, modelProvider: String? = nil, model: String? = nil,
        thinkingLevel: String? = nil, inputTokens: Int? = nil, outputTokens: Int? = nil, totalTokens: Int? = nil, contextTokens: Int? = nil,
        estimatedCostUsd: Double? = nil
    ) {
        self.unavailable = unavailable
        self.sessionKey = sessionKey
        self.sessionID = sessionID
        self.modelProvider = modelProvider
        self.model = model
        self.thinkingLevel = thinkingLevel
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.totalTokens = totalTokens
        self.contextTokens = contextTokens
        self.estimatedCostUsd = estimatedCostUsd
    }

    /// `provider/model` as the gateway names a model; nil when unknown.
    public var modelName: String? {
        guard let model else { return nil }
        return modelProvider.map { "\($0)/\(model)" } ?? model
    }

    /// The context used: `1,540/200,000 tokens (1%)`, `1,540 tokens` without a window; nil
    /// while the gateway has counted none.
    public var contextWords: String? {
        guard let totalTokens else { return nil }
        guard let contextTokens, contextTokens > 0 else { return "\(totalTokens.grouped) tokens" }
        return "\(totalTokens.grouped)/\(contextTokens.grouped) tokens (\(Self.percent(totalTokens, of: contextTokens)))"
    }

    /// What the settings are, in one line: `model tether/echo · thinking high · 1,540/200,000 tokens (1%) · $0.03`.
    public var words: String {
        if let unavailable { return "session settings: \(unavailable)" }
        var parts: [String] = []
        if let modelName { parts.append("model \(modelName)") }
        parts.append("thinking \(thinkingLevel ?? "default")")
        if let contextWords { parts.append(contextWords) }
        if let inputTokens, let outputTokens { parts.append("\(inputTokens.grouped) in, \(outputTokens.grouped) out") }
        if let estimatedCostUsd { parts.append(Self.dollars(estimatedCostUsd)) }
        return parts.joined(separator: " · ")
    }

    /// `$0.0312`: four decimals, as a cost of a few tokens needs.
    public static func dollars(_ amount: Double) -> String {
        let tenThousandths = Int((amount * 10_000).rounded())
        let fraction = String(tenThousandths % 10_000)
        return "$\(tenThousandths / 10_000).\(String(repeating: "0", count: 4 - fraction.count))\(fraction)"
    }

    /// A share as a whole percentage, `<1%` for a share above none that rounds to none.
    public static func percent(_ part: Int, of whole: Int) -> String {
        let value = Double(part) * 100 / Double(whole)
        if value > 0 && value < 0.5 { return "<1%" }
        return "\(Int(value.rounded()))%"
    }
}

/// A thinking level as OpenClaw reads it (`normalizeThinkLevel`): the level, from the words and
/// aliases it accepts.
public enum ThinkingLevel: String, Sendable, CaseIterable, Codable {
    case off, minimal, low, medium, high, xhigh, adaptive

    /// The level `words` names, nil for none: `on` is low, `max` high, `auto` adaptive, as the gateway reads them.
    public init?(reading words: String) {
        let key = String(words.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()).lowercased()
        let collapsed = key.filter { !" _-".contains($0) }
        switch true {
        case collapsed == "adaptive" || collapsed == "auto": self = .adaptive
        case collapsed == "xhigh" || collapsed == "extrahigh": self = .xhigh
        case key == "off": self = .off
        case ["on", "enable", "enabled"].contains(key): self = .low
        case ["min", "minimal", "think"].contains(key): self = .minimal
        case ["low", "thinkhard", "think-hard", "think_hard"].contains(key): self = .low
        case ["mid", "med", "medium", "thinkharder", "think-harder", "harder"].contains(key): self = .medium
        case ["high", "ultra", "ultrathink", "thinkhardest", "highest", "max"].contains(key): self = .high
        default: return nil
        }
    }

    /// The levels, as a person reads them in a refusal.
    public static let listed = allCases.map(\.rawValue).joined(separator: ", ")
}

/// A model of the gateway's, as `models` lists them.
public struct ModelChoice: Codable, Sendable, Equatable {
    public var id: String
    public var provider: String
    public var name: String?
    public var alias: String?
    public var contextWindow: Int?
    public var reasoning: Bool?

    public init(id: String, provider: String, name: String? = nil, alias: String? = nil, contextWindow: Int? = nil, reasoning: Bool? = nil) {
        self.id = id
        self.provider = provider
        self.name = name
        self.alias = alias
        self.contextWindow = contextWindow
        self.reasoning = reasoning
    }

    /// `provider/id`, as the gateway names it.
    public var reference: String { "\(provider)/\(id)" }

    /// Whether `words` names this model: `provider/id`, the id or the alias, in any case.
    public func isNamed(_ words: String) -> Bool {
        let wanted = words.lowercased()
        return [reference, id, alias].compactMap { $0?.lowercased() }.contains(wanted)
    }

    /// One line of a list: `tether/echo (Echo) · 32,000 tokens · reasoning`.
    public var line: String {
        var parts = [reference + (name.map { " (\($0))" } ?? "") + (alias.map { " alias \($0)" } ?? "")]
        if let contextWindow { parts.append("\(contextWindow.grouped) tokens") }
        if reasoning == true { parts.append("reasoning") }
        return parts.joined(separator: " · ")
    }
}

/// The gateway's models (OpenClaw's `models.list`).
public enum ModelsCommand: BusCommand {
    public static let method = "models"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        public init() {}
    }

    public struct Reply: Codable, Sendable {
        public var models: [ModelChoice]
        /// The model of the session chatted in, `provider/model` (as `session.settings` says
        /// it); nil when not known yet.
        public var current: String?

        public init(models: [ModelChoice], current: String? = nil) {
            self.models = models
            self.current = current
        }

        /// A line a model, the session's marked `*`; a line saying so when the gateway lists none.
        public var lines: [String] {
            models.isEmpty ? ["(the gateway lists no model)"] : models.map { ($0.reference == current ? "* " : "  ") + $0.line }
        }
    }
}

/// The gateway's agents (OpenClaw's `agents.list`).
public enum AgentsCommand: BusCommand {
    public static let method = "agents"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        public init() {}
    }

    public struct Reply: Codable, Sendable {
        public struct Agent: Codable, Sendable, Equatable {
            public var id: String
            public var name: String?
            /// Its model, `provider/model`.
            public var model: String?

            public init(id: String, name: String? = nil, model: String? = nil) {
                self.id = id
                self.name = name
                self.model = model
            }
        }

        public var agents: [Agent]
        /// The agent the gateway's main session belongs to.
        public var defaultID: String
        /// The key of each agent's main session, after `agent:ID:`.
        public var mainKey: String

        public init(agents: [Agent], defaultID: String, mainKey: String) {
            self.agents = agents
            self.defaultID = defaultID
            self.mainKey = mainKey
        }

        /// The main session of agent `id`, which `/agent ID` chats in.
        public func mainSession(of id: String) -> String { "agent:\(id):\(mainKey)" }
    }
}

/// Changes the model or thinking level of the session chatted in (OpenClaw). A client without
/// `operator.admin` cannot patch a session, so protod checks the values and sends the gateway's
/// text commands (`/model NAME`, `/think LEVEL`) through the outbox, each exactly once like any
/// message; the gateway answers each in the conversation.
public enum SessionSetCommand: BusCommand {
    public static let method = "session.set"
    public static let endpoint = Endpoints.protocolHandler

    public struct Request: Codable, Sendable {
        /// The front end's id for the change: its messages' ids are made from it, so the same
        /// request sent again sends nothing twice.
        public var id: MessageID
        /// `provider/model`, an id or an alias of `models`.
        public var model: String?
        /// A level or an alias the gateway reads (``ThinkingLevel``).
        public var thinking: String?

        public init(id: MessageID, model: String? = nil, thinking: String? = nil) {
            self.id = id
            self.model = model
            self.thinking = thinking
        }
    }

    public struct Reply: Codable, Sendable {
        /// The messages sent for it, in order: `/model …` before `/think …`.
        public var sent: [SendMessageCommand.Reply]
        /// What happens next, in words.
        public var detail: String

        public init(sent: [SendMessageCommand.Reply], detail: String) {
            self.sent = sent
            self.detail = detail
        }

        /// What happens next to the messages `texts` (`/model …`, `/think …`), in words: written
        /// now while a connection is open, or waiting in the outbox until there is one.
        /// `unchecked` says why the model was not checked against the gateway's list.
        public static func detail(for texts: [String], connected: Bool, unchecked: String?) -> String {
            let joined = texts.joined(separator: " and ")
            let check = unchecked.map { " (the model is not checked: \($0))" } ?? ""
            guard connected else {
                return "\(joined) \(texts.count == 1 ? "waits" : "wait") in the outbox\(check): Tether is not connected to the gateway; "
                    + "\(texts.count == 1 ? "it is" : "they are") sent once it is (tether status says why not), and the gateway answers in the conversation"
            }
            return "sent \(joined) to the gateway\(check); it answers in the conversation"
        }
    }

    /// The id of the message that sets `setting` (`model` or `thinking`) for a change.
    public static func messageID(of change: MessageID, setting: String) -> MessageID {
        MessageID("\(change.value)-\(setting)")
    }
}

extension SessionSetCommand.Request: BoundedRequest {
    public var outOfBounds: String? {
        if model == nil && thinking == nil { return "nothing to change: give model, thinking or both" }
        for value in [model, thinking].compactMap({ $0 }) {
            if value.allSatisfy(\.isWhitespace) { return "an empty value" }
            if value.contains(where: { $0.isWhitespace }) { return "a value with spaces or line breaks: \(value)" }
            if value.utf8.count > 200 { return "a value longer than 200 bytes" }
        }
        return nil
    }
}

extension AgentsCommand {
    /// The agents as lines: `* main  (agent:main:main) · tether/echo`, the default marked.
    public static func lines(of reply: Reply) -> [String] {
        guard !reply.agents.isEmpty else { return ["(the gateway lists no agent)"] }
        return reply.agents.map { agent in
            let name = agent.name.map { " \($0)" } ?? ""
            let model = agent.model.map { " · \($0)" } ?? ""
            return "\(agent.id == reply.defaultID ? "*" : " ") \(agent.id)\(name)  (\(reply.mainSession(of: agent.id)))\(model)"
        }
    }
}
