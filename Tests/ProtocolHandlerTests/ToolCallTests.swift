import Foundation
import OpenClawWire
import Testing
import TetherSchema
import TetherWire

@testable import ProtocolHandler

/// Tool calls and thinking on OpenClaw: live `agent` events of stream `tool` (sent targeted, with
/// no `seq`, to a connection with the `tool-events` capability) become tool-call entries; the
/// history adds what the live events leave out (the output unless verbose is full, the thinking)
/// without showing a call twice.
@Suite struct ToolCallTests {
    typealias Driver = OpenClawDeliveryTests.Driver
    static func ms(_ seconds: Double) -> Int { OpenClawDeliveryTests.milliseconds(seconds) }

    /// A targeted tool event: no `seq` on the frame, the gateway's time in `ts`.
    static func tool(_ driver: inout Driver, run: String, _ data: [String: JSONValue], ts seconds: Double) {
        let payload = AgentEventPayload(runId: run, seq: 3, stream: "tool", ts: ms(seconds), data: .object(data), sessionKey: "agent:main:main")
        driver.handle(.openClawFrame(.event(name: "agent", payload: try? JSONValue(encoding: payload), seq: nil)), at: seconds)
    }

    static func toolCallEntry(
        _ callID: String, name: String, arguments: JSONValue, thinking: String? = nil, text: String = "", at seconds: Double
    ) -> ChatTranscriptMessage {
        var message = ChatTranscriptMessage(role: "assistant", text: "", timestamp: ms(seconds), stopReason: "toolUse", entryID: "e-\(callID)", model: "m")
        var blocks: [JSONValue] = []
        if let thinking { blocks.append(.object(["type": .string("thinking"), "thinking": .string(thinking)])) }
        if !text.isEmpty { blocks.append(.object(["type": .string("text"), "text": .string(text)])) }
        blocks.append(.object(["type": .string("toolCall"), "id": .string(callID), "name": .string(name), "arguments": arguments]))
        message.content = .array(blocks)
        return message
    }

    static func toolResult(_ callID: String, name: String, output: String, isError: Bool = false, at seconds: Double) -> ChatTranscriptMessage {
        var message = ChatTranscriptMessage(role: "toolResult", text: output, timestamp: ms(seconds), entryID: "r-\(callID)")
        message.toolCallID = callID
        message.toolName = name
        message.isError = isError
        return message
    }

    static func reply(_ text: String, thinking: String? = nil, at seconds: Double) -> ChatTranscriptMessage {
        var message = ChatTranscriptMessage(role: "assistant", text: text, timestamp: ms(seconds), stopReason: "stop", entryID: "a-\(seconds)", model: "m")
        if let thinking {
            message.content = .array([
                .object(["type": .string("thinking"), "thinking": .string(thinking)]), .object(["type": .string("text"), "text": .string(text)]),
            ])
        }
        return message
    }

    /// A connection whose message m1 is under way.
    static func running() -> Driver {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history(OpenClawDeliveryTests.earlier, on: "c1")
        driver.send("m1", content: "tool: read README.md")
        driver.respond("send:m1", OpenClawDeliveryTests.started)
        return driver
    }

    @Test func liveEventsMakeOneEntryRunningThenOkWithTheGatewaysTimeAndNoOutputUnlessSent() throws {
        var driver = Self.running()
        Self.tool(
            &driver, run: "m1",
            ["phase": .string("start"), "name": .string("read"), "toolCallId": .string("call_1"), "args": .object(["path": .string("README.md")])], ts: 10)
        Self.tool(&driver, run: "m1", ["phase": .string("update"), "name": .string("read"), "toolCallId": .string("call_1")], ts: 10.1)
        Self.tool(&driver, run: "m1", ["phase": .string("start"), "name": .string("read"), "toolCallId": .string("call_1")], ts: 10.2)
        Self.tool(
            &driver, run: "m1",
            ["phase": .string("result"), "name": .string("read"), "toolCallId": .string("call_1"), "meta": .string("README.md"), "isError": .bool(false)],
            ts: 10.3)
        let tools = driver.entries { $0.tool != nil }
        #expect(tools.map(\.id.value) == ["tool:call_1", "tool:call_1"], "an update, or a start heard again, is not shown")
        #expect(tools.map(\.tool?.state) == [.running, .ok])
        let ended = try #require(tools.last?.tool)
        #expect(ended.name == "read" && ended.arguments == "README.md" && ended.durationMilliseconds == 300 && ended.output == nil)
        #expect(tools.last?.content == "read README.md" && tools.last?.status == .received && tools.last?.inReplyTo == nil)
        // An event with no `seq` is no gap, and the run goes on.
        #expect(!driver.log.contains { if case .diagnose(let event) = $0 { event.kind == .sequenceGap } else { false } })
        #expect(driver.machine.pendingCount == 0, "a tool event of its run shows the gateway stored the message")
    }

    @Test func aCallStillRunningWhenItsRunEndsIncompleteIsSaidUnfinishedUntilAResultComes() throws {
        var driver = Self.running()
        Self.tool(
            &driver, run: "m1",
            ["phase": .string("start"), "name": .string("exec"), "toolCallId": .string("call_3"), "args": .object(["command": .string("make")])], ts: 5)
        Self.tool(&driver, run: "m1", ["phase": .string("start"), "name": .string("read"), "toolCallId": .string("call_4")], ts: 5.5)
        // Another run's call is not this run's to close.
        Self.tool(&driver, run: "other", ["phase": .string("start"), "name": .string("read"), "toolCallId": .string("call_9")], ts: 5.6)
        driver.chat(
            ChatEventPayload(runId: "m1", sessionKey: "agent:main:main", seq: nil, state: .error, errorMessage: "model overloaded"), on: "c1", at: 6)
        let closed = driver.entries { $0.tool != nil }.suffix(2)
        #expect(closed.map(\.id.value) == ["tool:call_3", "tool:call_4"])
        #expect(closed.allSatisfy { $0.tool?.state == .unfinished }, "\(closed.map { "\($0.tool?.state as Any)" })")
        #expect(closed.first?.tool?.arguments == "make" && closed.first?.content == "exec make")
        #expect(driver.machine.liveToolCalls.keys.sorted() == ["call_9"])
        // A result heard after all replaces "unfinished" with what it says.
        Self.tool(&driver, run: "m1", ["phase": .string("result"), "name": .string("exec"), "toolCallId": .string("call_3"), "isError": .bool(false)], ts: 9)
        #expect(driver.entries { $0.id.value == "tool:call_3" }.last?.tool?.state == .ok)
    }

    @Test func aResultSentWithVerboseFullIsTheOutputAndAnErrorIsAnError() throws {
        var driver = Self.running()
        Self.tool(
            &driver, run: "m1",
            ["phase": .string("start"), "name": .string("exec"), "toolCallId": .string("call_2"), "args": .object(["command": .string("ls missing")])], ts: 5)
        let result: JSONValue = .object(["content": .array([.object(["type": .string("text"), "text": .string("ls: missing: No such file")])])])
        Self.tool(
            &driver, run: "m1",
            ["phase": .string("result"), "name": .string("exec"), "toolCallId": .string("call_2"), "isError": .bool(true), "result": result], ts: 7.5)
        let ended = try #require(driver.entries { $0.tool != nil }.last?.tool)
        #expect(ended.state == .error && ended.output == "ls: missing: No such file" && ended.durationMilliseconds == 2500)
    }

    @Test func theEndOfARunThatCalledAToolLooksTheHistoryUpAndItAddsTheOutputAndThinkingWithoutASecondEntry() throws {
        var driver = Self.running()
        Self.tool(
            &driver, run: "m1",
            ["phase": .string("start"), "name": .string("read"), "toolCallId": .string("call_1"), "args": .object(["path": .string("README.md")])], ts: 10)
        Self.tool(
            &driver, run: "m1", ["phase": .string("result"), "name": .string("read"), "toolCallId": .string("call_1"), "isError": .bool(false)], ts: 10.3)
        let lookups = driver.lookups(on: "c1")
        driver.chat(
            ChatEventPayload(
                runId: "m1", sessionKey: "agent:main:main", seq: nil, state: .final,
                message: ChatTranscriptMessage(role: "assistant", text: "Read it.", timestamp: nil)), on: "c1", at: 11)
        #expect(driver.lookups(on: "c1") == lookups + 1, "the run's end did not look the history up")
        let before = driver.log.count
        let history = [
            OpenClawDeliveryTests.user("tool: read README.md", at: 9.9),
            Self.toolCallEntry("call_1", name: "read", arguments: .object(["path": .string("README.md")]), thinking: "I should read it.", at: 10),
            Self.toolResult("call_1", name: "read", output: "# Tether\nline 2", at: 10.9),
            Self.reply("Read it.", thinking: "Now I answer.", at: 11),
        ]
        driver.history(history, on: "c1", at: 12)
        let added = driver.log[before...].compactMap { if case .publishEntry(let entry) = $0 { entry } else { nil } }
        #expect(added.count == 2, "\(added.map(\.id.value))")
        let tool = try #require(added.first { $0.id.value == "tool:call_1" })
        #expect(tool.tool?.output == "# Tether\nline 2" && tool.tool?.state == .ok)
        #expect(tool.tool?.durationMilliseconds == 300, "the live events' time was replaced by the history's")
        #expect(tool.thinking == "I should read it.")
        let reply = try #require(added.first { $0.id.value == "m1:reply" })
        #expect(reply.thinking == "Now I answer." && reply.content == "Read it." && reply.inReplyTo == MessageID("m1") && reply.attribution == .gateway)
        #expect(added.allSatisfy { !$0.id.value.hasPrefix("oc:") }, "an entry shown live was shown again under another id")

        // A reconnect reads the same history again: nothing is shown twice.
        driver.handle(.connectionDown, at: 19)
        driver.connect("c2", epoch: 2, at: 20)
        let again = driver.log.count
        driver.history(history, on: "c2", at: 21)
        let repeated = driver.log[again...].compactMap { if case .publishEntry(let entry) = $0 { entry } else { nil } }
        #expect(repeated.isEmpty, "\(repeated.map(\.id.value)) shown again after a reconnect")
    }

    @Test func aToolCallNeverSeenLiveComesFromTheHistoryOnceBeforeItsReply() throws {
        let history = [
            HistoryMergeTests.user("tool: read a.md", at: 1),
            Self.toolCallEntry("call_9", name: "read", arguments: .object(["path": .string("a.md")]), thinking: "Reading.", at: 2),
            Self.toolResult("call_9", name: "read", output: "text of a.md", at: 2.4),
            Self.toolCallEntry("call_10", name: "read", arguments: .object(["path": .string("b.md")]), at: 3),
            Self.reply("Done.", at: 4),
        ]
        let merge = HistoryMergeTests.merge(history, sent: [])
        #expect(merge.entries.map(\.content) == ["tool: read a.md", "read a.md", "read b.md", "Done."])
        let first = try #require(merge.entries[1].tool)
        #expect(first == ToolCall(callID: "call_9", name: "read", arguments: "a.md", state: .ok, durationMilliseconds: 400, output: "text of a.md"))
        #expect(merge.entries[1].thinking == "Reading.")
        #expect(merge.entries[2].tool?.state == .unfinished, "a call with no result, followed by the run's reply, did not end")
        // Read again with what was published: nothing new.
        let known = Dictionary(uniqueKeysWithValues: merge.entries.map { ($0.id, (content: $0.content, status: $0.status)) })
        let details = Dictionary(uniqueKeysWithValues: merge.entries.map { ($0.id, HistoryMerge.KnownDetail(tool: $0.tool, thinking: $0.thinking)) })
        let published = Dictionary(uniqueKeysWithValues: merge.entries.compactMap { entry in entry.gatewayID.map { ($0, entry.id) } })
        let again = HistoryMerge.merge(
            history, limit: 100,
            context: HistoryMerge.Context(
                sent: [], clockOffset: 0, botName: "Bot", ownLabel: HistoryMergeTests.own, known: { known[$0] }, published: { published[$0] },
                detail: { details[$0] }))
        #expect(again.entries.isEmpty, "\(again.entries.map(\.content)) shown twice")
    }

    @Test func argumentsAreShortAndOutputTextIsReadFromItsBlocks() {
        #expect(ToolCallText.arguments(.object(["path": .string("README.md")]), limit: 120) == "README.md")
        #expect(ToolCallText.arguments(.object(["b": .number(2), "a": .string("x y")]), limit: 120) == "a=x y b=2")
        #expect(ToolCallText.arguments(.object(["command": .string(String(repeating: "x", count: 200))]), limit: 10) == "xxxxxxxxx…")
        #expect(ToolCallText.arguments(.object(["command": .string("ls\nrm")]), limit: 120) == "ls rm", "a line break would break the one line")
        #expect(
            ToolCallText.output(
                .object([
                    "content": .array([.object(["type": .string("text"), "text": .string("a")]), .object(["type": .string("image"), "bytes": .number(5)])])
                ])) == "a\n[image]")
        #expect(ToolCallText.output(nil) == nil)
    }
}
