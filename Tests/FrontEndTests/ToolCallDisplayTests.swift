import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherWire

@testable import FrontEnd

/// How front ends show tool calls and thinking: one line a call, its output under it with
/// Ctrl-O, the thinking with Ctrl-T (hidden at first), `--plain` once a call ended.
@Suite struct ToolCallDisplayTests {
    private func message(_ topic: Topic, _ body: some Encodable) throws -> BusMessage {
        BusMessage(topic: topic, header: BusHeader(source: "test", sequence: 1), body: try BusSchema.makeEncoder().encode(body))
    }

    private let start = ContinuousClock.now
    private static let when = Date(timeIntervalSince1970: 1_790_000_000)

    static func toolEntry(_ state: ToolCall.State, output: String? = nil, thinking: String? = nil, duration: Int? = 300) -> TranscriptEntry {
        let call = ToolCall(callID: "call_1", name: "read", arguments: "README.md", state: state, durationMilliseconds: duration, output: output)
        return TranscriptEntry(
            id: ToolCall.entryID(of: "call_1"), sender: .bot(name: "Opta"), content: call.summary, timestamp: when, status: .received, tool: call,
            thinking: thinking)
    }

    @Test func aCallsWordsSayItsStateAndTheTimeItTook() {
        #expect(Self.toolEntry(.ok).tool?.words == "read README.md · ok · 0.3 s")
        #expect(Self.toolEntry(.running).tool?.words == "read README.md · running…")
        #expect(Self.toolEntry(.error, duration: 12_400).tool?.words == "read README.md · error · 12 s")
        #expect(Self.toolEntry(.unfinished, duration: nil).tool?.words == "read README.md · no result")
        #expect(ToolCall.duration(125_000) == "2 min 5 s" && ToolCall.duration(0) == "0.0 s" && ToolCall.duration(9_960) == "10.0 s")
        #expect(TranscriptFormatter().line(for: Self.toolEntry(.ok)).hasSuffix(" ⚙ read README.md · ok · 0.3 s"))
    }

    @Test func ctrlOShowsTheOutputUnderTheLineAndCtrlTTheThinkingHiddenAtFirst() throws {
        let reply = TranscriptEntry(
            id: MessageID("m1:reply"), sender: .bot(name: "Opta"), content: "I read it.", timestamp: Self.when, status: .received,
            thinking: "Now I answer.")
        var screen = ChatScreen(
            frontEnd: "tether",
            frame: FirstFrame(
                display: nil, identity: nil, entries: [Self.toolEntry(.ok, output: "line 1\nline 2", thinking: "I should read it."), reply], revision: 2,
                session: ConversationSession(dialect: .openclaw, sessionKey: "agent:main:main")))
        // Wide enough for the whole status line, which lists the keys.
        func shown() -> [String] { screen.render(width: 300, height: 12, at: start).rows.map(\.text) }
        #expect(shown().contains("⚙ read README.md · ok · 0.3 s") && shown().contains("Opta: I read it."))
        #expect(!shown().contains { $0.contains("line 1") || $0.contains("[thinking]") }, "\(shown())")
        #expect(shown().last { !$0.hasPrefix(">") }?.contains("Ctrl-O show output · Ctrl-T show thinking") == true, "\(shown())")
        #expect(screen.handle(.control("o"), at: start) == nil)
        #expect(Array(shown().drop { !$0.hasPrefix("⚙") }.prefix(3)) == ["⚙ read README.md · ok · 0.3 s", "    │ line 1", "    │ line 2"])
        #expect(screen.handle(.control("t"), at: start) == nil)
        let both = shown()
        #expect(both.contains("[thinking] I should read it.") && both.contains("[thinking] Now I answer."), "\(both)")
        #expect(both.firstIndex(of: "[thinking] Now I answer.")! < both.firstIndex(of: "Opta: I read it.")!, "the thinking comes before its reply")
        #expect(both.contains { $0.contains("Ctrl-O hide output · Ctrl-T hide thinking") })
        _ = screen.handle(.control("o"), at: start)
        _ = screen.handle(.control("t"), at: start)
        #expect(!shown().contains { $0.contains("line 1") || $0.contains("[thinking]") })
        // Without output from the gateway, Ctrl-O says why there is none.
        screen.apply(try message(.conversationMessage, Self.toolEntry(.ok, output: nil).withID("tool:call_2")), at: start)
        _ = screen.handle(.control("o"), at: start)
        #expect(shown().contains { $0.contains("no output: the gateway sends it only when the session's verbose level is full") })
    }

    @Test func plainSaysACallOnceWhenItEndedAndNothingForThinkingAlone() throws {
        var announcer = PlainAnnouncer(model: TranscriptModel(snapshot: [], revision: 0))
        #expect(announcer.lines(for: try message(.conversationMessage, Self.toolEntry(.running))).isEmpty)
        let ended = announcer.lines(for: try message(.conversationMessage, Self.toolEntry(.ok)))
        #expect(ended.count == 1 && ended.first?.hasSuffix("⚙ read README.md · ok · 0.3 s") == true, "\(ended)")
        #expect(announcer.lines(for: try message(.conversationMessage, Self.toolEntry(.ok, output: "x"))).isEmpty, "said twice")
        let reply = TranscriptEntry(id: MessageID("r"), sender: .bot(name: "Opta"), content: "Done.", timestamp: Self.when, status: .received)
        #expect(announcer.lines(for: try message(.conversationMessage, reply)).count == 1)
        var thought = reply
        thought.thinking = "Hm."
        #expect(announcer.lines(for: try message(.conversationMessage, thought)).isEmpty, "the same reply said again for its thinking")
    }
}

extension TranscriptEntry {
    fileprivate func withID(_ id: String) -> TranscriptEntry {
        var entry = self
        entry.id = MessageID(id)
        entry.tool?.callID = String(id.dropFirst("tool:".count))
        return entry
    }
}
