/// A line a front end handles itself instead of sending it: what it asks for.
public enum LocalCommand: Sendable, Equatable {
    /// List what the front end handles itself.
    case help
    /// Show the session's settings and usage.
    case status
    /// List the gateway's models, agents or sessions.
    case listModels, listAgents, listSessions
    /// Chat in this session from now on.
    case useSession(String)
    /// Chat in this agent's main session from now on.
    case useAgent(String)
    /// Set the session's model or thinking level (``SessionSetCommand``).
    case setModel(String)
    case setThinking(String)
    /// Sent to the gateway as the text typed (through the outbox, as any message), which starts
    /// the session anew there: `/new` and `/reset`.
    case restartSession(String)
    /// Find the stored messages holding these words (snapd's ``SearchCommand``).
    case search(String)
    /// Send this text to steer or interrupt the reply in progress (``WhileBusy``).
    case sendWhileBusy(WhileBusy, String)
}

/// What a typed line is for a front end.
public enum TypedLine: Sendable, Equatable {
    /// A command the front end handles itself.
    case local(LocalCommand)
    /// A command it knows, used wrongly: the words say how to use it; nothing is sent.
    case misused(String)
    /// Anything else: sent to the gateway as text, commands it knows (`/compact`) included.
    case message(String)
}

/// The commands a front end handles itself, by name: one table for the terminal UI and the web
/// page, so that `/help` lists what each line does. A new command is one more entry.
public struct SlashCommands: Sendable {
    /// How an entry takes what follows its name.
    public enum Argument: Sendable {
        /// Nothing may follow.
        case none
        /// One word must follow (its name says what, for `/help`).
        case required(String)
        /// One word may follow.
        case optional(String)
        /// One word or more must follow, taken together.
        case words(String)
    }

    public struct Entry: Sendable {
        public var names: [String]
        public var argument: Argument
        /// What it does, in a line, for `/help`.
        public var summary: String
        /// The command for the word after the name (nil when none was given).
        public var command: @Sendable (String?) -> LocalCommand

        public init(_ names: [String], _ argument: Argument, _ summary: String, command: @escaping @Sendable (String?) -> LocalCommand) {
            self.names = names
            self.argument = argument
            self.summary = summary
            self.command = command
        }

        /// `/think LEVEL`, `/models`, `/session [KEY]`.
        public var usage: String {
            let names = self.names.map { "/" + $0 }.joined(separator: ", ")
            switch argument {
            case .none: return names
            case .required(let what), .words(let what): return "\(names) \(what)"
            case .optional(let what): return "\(names) [\(what)]"
            }
        }
    }

    public var entries: [Entry]

    public init(entries: [Entry]) {
        self.entries = entries
    }

    /// Tether's own: help, status, lists, the session, the agent, the model, the thinking level, `/new` and `/reset`.
    public static let standard = SlashCommands(entries: [
        Entry(["help"], .none, "what Tether handles itself (this list)") { _ in .help },
        Entry(["status"], .none, "the session's model, thinking level, tokens and context use") { _ in .status },
        Entry(["models"], .none, "the gateway's models") { _ in .listModels },
        Entry(["model"], .optional("NAME"), "chat with model NAME (provider/model, an id or an alias; without NAME, the list)") { name in
            name.map(LocalCommand.setModel) ?? .listModels
        },
        Entry(["think"], .required("LEVEL"), "set the thinking level: \(ThinkingLevel.listed) (or on, max, auto…)") { level in
            .setThinking(level ?? "")
        },
        Entry(["agents"], .none, "the gateway's agents") { _ in .listAgents },
        Entry(["agent"], .optional("ID"), "chat in agent ID's main session (without ID, the list)") { id in id.map(LocalCommand.useAgent) ?? .listAgents },
        Entry(["sessions"], .none, "the gateway's sessions to choose from (Ctrl-P)") { _ in .listSessions },
        Entry(["session"], .optional("KEY"), "chat in session KEY (without KEY, the list)") { key in key.map(LocalCommand.useSession) ?? .listSessions },
        Entry(
            ["search"], .words("WORDS"), "the stored messages holding every word, newest first, whatever the gateway; choose one to see it in its conversation"
        ) { words in
            .search(words ?? "")
        },
        Entry(
            ["steer"], .words("TEXT"),
            "give TEXT to the reply in progress, which answers both (today's OpenClaw gateways; elsewhere it waits for a reply of its own)"
        ) { text in
            .sendWhileBusy(.steer, text ?? "")
        },
        Entry(
            ["interrupt"], .words("TEXT"),
            "stop the reply in progress and have TEXT answered instead (today's OpenClaw gateways; elsewhere it waits for a reply of its own)"
        ) { text in
            .sendWhileBusy(.interrupt, text ?? "")
        },
        Entry(["new"], .none, "a new session at the gateway, its history empty: sent as a message, the gateway answers") { _ in .restartSession("/new") },
        Entry(["reset"], .none, "the session anew at the gateway, its history empty: sent as a message, the gateway answers") { _ in
            .restartSession("/reset")
        },
    ])

    /// What `line` is: a command of the table, one misused, or a message.
    public func read(_ line: String) -> TypedLine {
        let trimmed = line.drop(while: \.isWhitespace)
        guard trimmed.hasPrefix("/") else { return .message(line) }
        let words = trimmed.dropFirst().split(whereSeparator: \.isWhitespace).map(String.init)
        guard let name = words.first?.lowercased(), let entry = entries.first(where: { $0.names.contains(name) }) else { return .message(line) }
        let rest = Array(words.dropFirst())
        switch (entry.argument, rest.count) {
        case (.none, 0), (.optional, 0): return .local(entry.command(nil))
        case (.required, 1), (.optional, 1): return .local(entry.command(rest[0]))
        case (.required, 0), (.words, 0): return .misused("\(entry.usage): \(entry.summary)")
        case (.words, _): return .local(entry.command(rest.joined(separator: " ")))
        default: return .misused("\(entry.usage) takes \(Self.count(entry.argument)), not \(rest.joined(separator: " ")): \(entry.summary)")
        }
    }

    private static func count(_ argument: Argument) -> String {
        switch argument {
        case .none: "nothing after its name"
        case .required(let what), .optional(let what), .words(let what): "one \(what)"
        }
    }

    /// `/help`'s lines: each command with what it does, then what happens to any other line.
    public var help: [String] {
        let width = entries.map(\.usage.count).max() ?? 0
        return entries.map { $0.usage + String(repeating: " ", count: width + 2 - $0.usage.count) + $0.summary } + [Self.otherLines]
    }

    /// What happens to a line that is none of Tether's commands.
    public static let otherLines = "Any other line, a /command the gateway knows (/compact, /verbose on) included, is sent to the gateway as text."
}
