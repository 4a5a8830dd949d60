import ArgumentParser
import Foundation
import FrontEnd
import TetherBus
import TetherSchema
import TetherService
import TetherWire

extension SessionCommand {
    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change the session's model or thinking level (OpenClaw): tether session set model=NAME thinking=LEVEL.",
            discussion: """
                The values are checked first (the model against the gateway's models, the level against OpenClaw's: \
                \(ThinkingLevel.listed), or on, min, med, max, auto), then sent to the gateway as its text commands \
                (/model NAME, /think LEVEL) through the outbox, exactly once each like any message; the gateway's answer \
                comes in the conversation, and tether status shows the settings once it applied them.
                """)

        @OptionGroup var options: ProgramOptions
        @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

        @Argument(help: "model=NAME (provider/model, an id or an alias), thinking=LEVEL.")
        var assignments: [String]

        @Flag(help: "One JSON object.")
        var json = false

        func validate() throws {
            if case .failure(let problem) = SettingsAssignments.read(assignments) { throw ValidationError(problem.description) }
        }

        func run() async throws {
            guard case .success(let change) = SettingsAssignments.read(assignments) else { return }
            let reply = try await ask(
                SessionSetCommand.self, .init(id: .random(), model: change.model, thinking: change.thinking), options, remote, timeout: .seconds(20),
                attempts: 1)
            if json {
                try printJSON(reply)
            } else {
                print(TerminalSafe.visible(reply.detail, newlines: false))
            }
        }
    }
}

struct Models: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the gateway's models (OpenClaw); the session's is marked *.",
        discussion: "Choose one with tether session set model=NAME (or /model NAME in the terminal UI and on the web page).")

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Flag(help: "One JSON object.")
    var json = false

    func run() async throws {
        let reply = try await ask(ModelsCommand.self, .init(), options, remote, timeout: .seconds(16), attempts: 1)
        if json {
            try printJSON(reply)
            return
        }
        for line in reply.lines { print(TerminalSafe.visible(line, newlines: false)) }
    }
}

struct Agents: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the gateway's agents (OpenClaw); the gateway's default is marked *.",
        discussion: "Chat in an agent's main session with /agent ID in the terminal UI, or tether session use agent:ID:main.")

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Flag(help: "One JSON object.")
    var json = false

    func run() async throws {
        let reply = try await ask(AgentsCommand.self, .init(), options, remote, timeout: .seconds(16), attempts: 1)
        if json {
            try printJSON(reply)
            return
        }
        for line in AgentsCommand.lines(of: reply) { print(TerminalSafe.visible(line, newlines: false)) }
    }
}
