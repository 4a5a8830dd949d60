import Foundation
import OpenClawWire

/// Tool calls as the real gateway sends them (docs/GATEWAY.md): a run whose message starts with
/// `tool:` (`tool: read README.md`) calls that tool. Its `agent` events of stream `tool` (`start`,
/// then `result`) go only to the connections that named the `tool-events` capability and sent a
/// `chat.send` while the run went on, targeted (no `seq`), with the tool's result left out unless
/// the session's verbose level is `full`. Its history then holds an assistant entry with the
/// model's thinking and the `toolCall` block, the `toolResult` entry, and the reply.
extension OpenClawGateway {
    /// A tool a message asks the agent to call: its name and its one argument.
    struct ToolRequest: Equatable {
        var name: String
        var argument: String
    }

    static let toolPrefix = "tool:"

    /// The tool `message` asks for, when it asks for one: `tool: NAME ARGUMENT`.
    static func toolRequest(in message: String) -> ToolRequest? {
        guard message.hasPrefix(toolPrefix) else { return nil }
        let words = message.dropFirst(toolPrefix.count).trimmingCharacters(in: .whitespaces)
        guard let name = words.split(separator: " ").first.map(String.init), !name.isEmpty else { return nil }
        return ToolRequest(name: name, argument: words.dropFirst(name.count).trimmingCharacters(in: .whitespaces))
    }

    /// As the gateway's `chat.send`: a connection with the `tool-events` capability is sent the
    /// tool events of every run of the session going on now (its own among them).
    func registerToolEventRecipient(_ link: OpenClawClientConnection, in session: String) {
        guard link.has(OpenClawProtocol.toolEventsCapability) else { return }
        for (id, run) in activeRuns where run.sessionKey == session { activeRuns[id]?.toolEventRecipients.insert(link.connection) }
    }

    /// Calls the tool: its start and result events to the run's recipients, and its entries kept
    /// for the transcript; the reply the bot then writes, or nil when the run was aborted meanwhile.
    func runTool(_ request: ToolRequest, runID: String, sessionKey: String) async -> String? {
        let callID = "call_" + String(UUID().uuidString.lowercased().filter(\.isHexDigit).prefix(12))
        let arguments: JSONValue = .object([request.name == "exec" ? "command" : "path": .string(request.argument)])
        let (output, isError) = Self.toolOutput(request)
        let thinking = "The user asks me to \(request.name) \(request.argument). I will call the \(request.name) tool."
        let startedAt = OpenClawProtocol.milliseconds(Date())
        await toolEvent(
            runID, sessionKey: sessionKey, data: ["phase": .string("start"), "name": .string(request.name), "toolCallId": .string(callID), "args": arguments])
        try? await Task.sleep(for: Self.toolDuration)
        guard activeRuns[runID]?.aborted == false else { return nil }
        let result: JSONValue = .object(["content": .array([.object(["type": .string("text"), "text": .string(output)])])])
        await toolEvent(
            runID, sessionKey: sessionKey,
            data: [
                "phase": .string("result"), "name": .string(request.name), "toolCallId": .string(callID), "meta": .string(request.argument),
                "isError": .bool(isError), "result": result,
            ])
        var call = ChatTranscriptMessage(role: "assistant", text: "", timestamp: startedAt, stopReason: "toolUse", model: Self.model)
        call.content = .array([
            .object(["type": .string("thinking"), "thinking": .string(thinking)]),
            .object(["type": .string("toolCall"), "id": .string(callID), "name": .string(request.name), "arguments": arguments]),
        ])
        var answer = ChatTranscriptMessage(role: "toolResult", text: output, timestamp: OpenClawProtocol.milliseconds(Date()))
        answer.toolCallID = callID
        answer.toolName = request.name
        answer.isError = isError
        activeRuns[runID]?.toolEntries = [call, answer]
        return isError
            ? "The \(request.name) tool failed on \(request.argument): \(output)"
            : "I ran \(request.name) on \(request.argument): \(output.split(separator: "\n").count) lines."
    }

    /// How long the development gateway's tools take.
    static let toolDuration = Duration.milliseconds(300)

    /// What the development gateway's tool gives back: made up from its argument (it reads and
    /// runs nothing); a path or command with `missing` in it fails as a file that is not there.
    static func toolOutput(_ request: ToolRequest) -> (String, isError: Bool) {
        if request.argument.contains("missing") { return ("ENOENT: no such file or directory, open '\(request.argument)'", true) }
        return ((1...3).map { "line \($0) of \(request.argument)" }.joined(separator: "\n"), false)
    }

    /// An `agent` event of stream `tool`, as the gateway sends it: to the run's recipients only,
    /// targeted (no `seq`, not counted), its result and partial result left out unless the
    /// session's verbose level is `full`.
    func toolEvent(_ runID: String, sessionKey: String, data: [String: JSONValue]) async {
        var data = data
        if settings.verboseDefault != "full" {
            data["result"] = nil
            data["partialResult"] = nil
        }
        let recipients = activeRuns[runID]?.toolEventRecipients ?? []
        let payload: JSONValue = .object([
            "runId": .string(runID), "stream": .string("tool"), "ts": .number(Double(OpenClawProtocol.milliseconds(Date()))), "data": .object(data),
            "sessionKey": .string(sessionKey),
        ])
        for link in links.values.sorted(by: { $0.connection < $1.connection }) where recipients.contains(link.connection) && link.isConnected {
            do {
                try await link.write(codec.encode(.event(name: "agent", payload: payload, seq: nil)))
            } catch {
                links[link.connection] = nil
            }
        }
    }
}
