public import TetherBus
public import TetherSchema
public import TetherWire

/// Carries out the commands of ``SlashCommands`` that ask the set (a list, the agent, the
/// model, the thinking level, the session, a search) for every front end alike: the same
/// requests, the same waits, the same words. A front end shows what comes back its own way.
public enum LocalCommandRunner {
    /// What a command gives a front end to show.
    public enum Outcome: Sendable {
        /// Lines under a title (a list of models, agents or sessions).
        case list(title: String, lines: [String])
        /// Words for the front end's notice: what was done, or why not.
        case words(String)
        /// What `/search` found for the words.
        case found(SearchCommand.Reply, words: String)
    }

    /// How many hits `/search` asks for: a front end shows the newest few, `tether search` more.
    public static let searchLimit = 9

    /// Carries out `command`; `id` names a change of settings, so that the same change asked
    /// again sends nothing twice. Nil for the commands a front end answers alone (`/help`,
    /// `/status`) or sends as a message (`/new`, `/reset`).
    public static func run(_ command: LocalCommand, id: MessageID = .random(), bus: any Bus) async -> Outcome? {
        do {
            switch command {
            case .listModels:
                let reply = try await bus.request(ModelsCommand.self, .init(), timeout: .seconds(16), attempts: 1)
                return .list(
                    title: "The gateway's models (/model NAME chooses one)", lines: reply.lines)
            case .listAgents:
                let reply = try await bus.request(AgentsCommand.self, .init(), timeout: .seconds(16), attempts: 1)
                return .list(title: "The gateway's agents (/agent ID chats in one's main session)", lines: AgentsCommand.lines(of: reply))
            case .listSessions:
                let reply = try await bus.request(SessionsCommand.self, .init(), timeout: .seconds(16), attempts: 1)
                return .list(
                    title: "The gateway's sessions (/session KEY chats in one)",
                    lines: reply.sessions.map { ($0.key == reply.current ? "* " : "  ") + $0.key + ($0.displayName.map { " (\($0))" } ?? "") })
            case .useSession(let key):
                let reply = try await bus.request(SessionUseCommand.self, .init(key: key), timeout: .seconds(5), attempts: 2)
                return .words(reply.detail)
            case .useAgent(let agent):
                let agents = try await bus.request(AgentsCommand.self, .init(), timeout: .seconds(16), attempts: 1)
                guard agents.agents.contains(where: { $0.id == agent }) else {
                    return .words("the gateway has no agent \(agent): it has \(agents.agents.map(\.id).joined(separator: ", ")) (/agents lists them)")
                }
                let reply = try await bus.request(SessionUseCommand.self, .init(key: agents.mainSession(of: agent)), timeout: .seconds(5), attempts: 2)
                return .words(reply.detail)
            case .setModel(let name):
                let reply = try await bus.request(SessionSetCommand.self, .init(id: id, model: name), timeout: .seconds(20), attempts: 1)
                return .words(reply.detail)
            case .setThinking(let level):
                let reply = try await bus.request(SessionSetCommand.self, .init(id: id, thinking: level), timeout: .seconds(20), attempts: 1)
                return .words(reply.detail)
            case .search(let words):
                let reply = try await bus.request(SearchCommand.self, .init(words: words, limit: searchLimit), timeout: .seconds(5), attempts: 2)
                return .found(reply, words: words)
            case .help, .status, .restartSession, .sendWhileBusy:
                return nil
            }
        } catch {
            return .words(error.refusal ?? "\(error)")
        }
    }
}
