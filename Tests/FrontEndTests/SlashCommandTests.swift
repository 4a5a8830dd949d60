import Foundation
import Testing
import TetherBus
import TetherSchema

@testable import FrontEnd

/// The table of commands a front end handles itself, the thinking levels' words, and how
/// usage reads.
@Suite struct SlashCommandTests {
    let commands = SlashCommands.standard

    @Test func tethersOwnCommandsAreReadAndEveryOtherLineIsAMessage() {
        #expect(commands.read("/help") == .local(.help))
        #expect(commands.read("  /STATUS ") == .local(.status))
        #expect(commands.read("/model anthropic/claude-sonnet-4-5") == .local(.setModel("anthropic/claude-sonnet-4-5")))
        #expect(commands.read("/model") == .local(.listModels), "without a name, the list")
        #expect(commands.read("/models") == .local(.listModels))
        #expect(commands.read("/think high") == .local(.setThinking("high")))
        #expect(commands.read("/agent ops") == .local(.useAgent("ops")))
        #expect(commands.read("/agents") == .local(.listAgents))
        #expect(commands.read("/session side") == .local(.useSession("side")))
        #expect(commands.read("/session") == .local(.listSessions))
        #expect(commands.read("/new") == .local(.restartSession("/new")))
        #expect(commands.read("/reset") == .local(.restartSession("/reset")))
        #expect(commands.read("/search  deploy   the build ") == .local(.search("deploy the build")), "every word after the name")
        // The gateway's own commands, and text, go to it as typed.
        #expect(commands.read("/compact") == .message("/compact"))
        #expect(commands.read("/verbose on") == .message("/verbose on"))
        #expect(commands.read("hello /help") == .message("hello /help"))
        #expect(commands.read("/helpme") == .message("/helpme"))
    }

    @Test func aCommandUsedWronglyIsSaidInWordsAndNothingIsSent() {
        #expect(
            commands.read("/think") == .misused("/think LEVEL: set the thinking level: off, minimal, low, medium, high, xhigh, adaptive (or on, max, auto…)"))
        guard case .misused(let words) = commands.read("/model a b") else {
            Issue.record("two names were taken")
            return
        }
        #expect(words.hasPrefix("/model [NAME] takes one NAME, not a b"))
        guard case .misused(let extra) = commands.read("/help me") else {
            Issue.record("/help with words was taken")
            return
        }
        #expect(extra.hasPrefix("/help takes nothing after its name"))
        #expect(
            commands.read("/search")
                == .misused(
                    "/search WORDS: the stored messages holding every word, newest first, whatever the gateway; choose one to see it in its conversation"))
    }

    @Test func helpListsEachCommandWithALineAndSaysWhatHappensToTheRest() {
        let help = commands.help
        #expect(help.count == commands.entries.count + 1)
        #expect(help.contains { $0.hasPrefix("/think LEVEL") && $0.contains("set the thinking level") })
        #expect(help.contains { $0.hasPrefix("/model [NAME]") })
        #expect(help.last == SlashCommands.otherLines)
        let columns = Set(
            zip(commands.entries, help).map { entry, line in
                line.distance(from: line.startIndex, to: line.range(of: entry.summary)?.lowerBound ?? line.startIndex)
            })
        #expect(columns.count == 1 && columns.first.map { $0 > 0 } == true, "the summaries start in one column: \(help)")
    }

    @Test func aTableIsExtendedWithAnEntry() {
        var table = SlashCommands.standard
        table.entries.append(.init(["attach"], .required("FILE"), "attach a file") { file in .useSession(file ?? "") })
        #expect(table.read("/attach a.png") == .local(.useSession("a.png")))
        #expect(SlashCommands.standard.read("/attach a.png") == .message("/attach a.png"))
    }

    @Test func thinkingLevelsAreReadAsTheGatewayReadsThem() {
        let read = { (words: String) in ThinkingLevel(reading: words) }
        #expect(read("high") == .high && read("MAX") == .high && read("ultrathink") == .high)
        #expect(read("on") == .low && read("enabled") == .low && read("think-hard") == .low)
        #expect(read("min") == .minimal && read("think") == .minimal)
        #expect(read("med") == .medium && read("harder") == .medium)
        #expect(read("auto") == .adaptive && read("Adaptive") == .adaptive)
        #expect(read("extra-high") == .xhigh && read("x_high") == .xhigh)
        #expect(read("off") == .off)
        #expect(read("extreme") == nil && read("") == nil)
    }

    @Test func usageReadsAsTokensOfTheContextWindow() {
        var settings = SessionSettings(
            sessionKey: "agent:main:main", modelProvider: "anthropic", model: "claude", thinkingLevel: "high", inputTokens: 1200, outputTokens: 340,
            totalTokens: 15400, contextTokens: 200_000, estimatedCostUsd: 0.031)
        #expect(settings.contextWords == "15,400/200,000 tokens (8%)")
        #expect(settings.words == "model anthropic/claude · thinking high · 15,400/200,000 tokens (8%) · 1,200 in, 340 out · $0.0310")
        settings.totalTokens = 12
        #expect(settings.contextWords == "12/200,000 tokens (<1%)")
        settings.contextTokens = nil
        #expect(settings.contextWords == "12 tokens")
        #expect(SessionSettings(unavailable: "not available with this gateway").words == "session settings: not available with this gateway")
        #expect((1_234_567).grouped == "1,234,567" && (999).grouped == "999")
        #expect(SessionSettings.dollars(1.5) == "$1.5000" && SessionSettings.dollars(0.00004) == "$0.0000")
    }

    @Test func setsArgumentsAreNameEqualsValue() throws {
        #expect(
            try SettingsAssignments.read(["model=anthropic/claude", "thinking=high"]).get() == SettingsAssignments(model: "anthropic/claude", thinking: "high"))
        #expect(try SettingsAssignments.read(["think=max"]).get() == SettingsAssignments(thinking: "max"))
        #expect(throws: SettingsAssignments.Problem.self) { try SettingsAssignments.read([]).get() }
        #expect(throws: SettingsAssignments.Problem.self) { try SettingsAssignments.read(["model"]).get() }
        #expect(throws: SettingsAssignments.Problem.self) { try SettingsAssignments.read(["verbose=on"]).get() }
        #expect(throws: SettingsAssignments.Problem.self) { try SettingsAssignments.read(["model="]).get() }
    }
}

/// The terminal UI's status line, `/help` and `/status`.
@Suite struct SettingsOnScreenTests {
    private let start = ContinuousClock.now

    private func message(_ topic: Topic, _ body: some Encodable) throws -> BusMessage {
        BusMessage(topic: topic, header: BusHeader(source: "test", sequence: 1), body: try BusSchema.makeEncoder().encode(body))
    }

    private func type(_ line: String, into screen: inout ChatScreen) -> ChatAction? {
        for character in line { _ = screen.handle(.character(character), at: start) }
        return screen.handle(.enter, at: start)
    }

    @Test func theStatusLineShowsTheModelTheLevelAndTheContextUsed() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        let settings = SessionSettings(
            sessionKey: "agent:main:main", modelProvider: "tether", model: "tether-dev-echo", thinkingLevel: "high", inputTokens: 30, outputTokens: 40,
            totalTokens: 70, contextTokens: 32000)
        #expect(screen.apply(try message(.sessionSettings, settings), at: start))
        let status = screen.render(width: 300, height: 6, at: start).rows[4].text
        #expect(status.contains("tether/tether-dev-echo think high 70/32,000 tokens (<1%)"), "\(status)")
        #expect(status.contains("/help"))
        screen.apply(try message(.sessionSettings, SessionSettings(unavailable: "not available with this gateway")), at: start)
        #expect(!screen.render(width: 300, height: 6, at: start).rows[4].text.contains("tokens"), "nothing claimed on a seed gateway")
    }

    @Test func helpAndStatusAreShownUntilTheNextKeyAndNothingIsSent() throws {
        var screen = ChatScreen(frontEnd: "tether", frame: FirstFrame(display: nil, identity: nil, entries: [], revision: 0))
        #expect(type("/help", into: &screen) == nil)
        var rows = screen.render(width: 160, height: 30, at: start).rows.map(\.text)
        #expect(rows.contains { $0.contains("Tether handles these itself") })
        #expect(rows.contains { $0.contains("/think LEVEL") && $0.contains("set the thinking level") })
        #expect(rows.contains { $0.contains("is sent to the gateway as text") })
        _ = screen.handle(.character("x"), at: start)
        #expect(!screen.render(width: 160, height: 30, at: start).rows.contains { $0.text.contains("Tether handles these itself") }, "a key closes it")
        _ = screen.handle(.backspace, at: start)

        screen.apply(
            try message(
                .sessionSettings, SessionSettings(sessionKey: "agent:main:main", modelProvider: "tether", model: "echo", totalTokens: 10, contextTokens: 100)),
            at: start)
        #expect(type("/status", into: &screen) == nil)
        rows = screen.render(width: 160, height: 30, at: start).rows.map(\.text)
        #expect(rows.contains { $0.contains("model tether/echo") })
        #expect(rows.contains { $0.contains("thinking the model's default") })
        #expect(rows.contains { $0.contains("context 10/100 tokens (10%)") })

        #expect(type("/think", into: &screen) == nil, "misused: said, not sent")
        #expect(screen.render(width: 300, height: 30, at: start).rows.contains { $0.text.hasPrefix("/think LEVEL: set the thinking level") })
        #expect(type("/think max", into: &screen) == .local(.setThinking("max")))
        #expect(type("/reset", into: &screen) == .send("/reset", images: []))
        #expect(screen.render(width: 300, height: 30, at: start).rows.contains { $0.text.contains("/reset sent: the gateway starts the session anew") })
    }
}
