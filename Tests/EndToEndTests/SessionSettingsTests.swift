import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting

/// The session's settings and usage through the real programs, against the development
/// gateway speaking OpenClaw: changed with the gateway's text commands through the outbox,
/// learnt from its `sessions.list`, shown by `tether status`.
@Suite(.serialized) struct SessionSettingsTests {
    /// `tether status --json`'s settings, once `accept` takes them (the last ones otherwise).
    private func settings(of set: ComposedSet, until accept: @escaping (SessionSettings) -> Bool) async throws -> SessionSettings? {
        var last: SessionSettings?
        _ = await eventually(timeout: .seconds(10), every: .milliseconds(300)) {
            guard let status = try? set.tether(["status", "--json"]),
                let report = try? JSONDecoder.bus.decode(StatusReportSettings.self, from: Data(status.standardOutput.utf8))
            else { return false }
            last = report.settings
            return report.settings.map(accept) ?? false
        }
        return last
    }

    @Test func theModelAndThinkingLevelAreChangedAndShownInStatus() async throws {
        let set = try await ComposedSet.openClaw()
        defer { set.stop() }
        let hello = try set.tether(["send", "hello"])
        #expect(hello.status == 0, "\(hello.standardError)")
        // "hello" is 2 tokens in, "You said: hello" 4 out, as the gateway counts them.
        let counted = try await settings(of: set) { $0.totalTokens == 6 }
        #expect(
            counted?.modelName == "tether/tether-dev-echo" && counted?.contextTokens == 32000 && counted?.thinkingLevel == nil, "\(String(describing: counted))"
        )
        var status = try set.tether(["status"]).standardOutput
        #expect(status.contains("settings: model tether/tether-dev-echo · thinking default · 6/32,000 tokens (<1%) · 2 in, 4 out"), "\(status)")

        // Refused before anything is sent: a level OpenClaw does not read, a model the gateway does not list.
        let level = try set.tether(["session", "set", "thinking=extreme"])
        #expect(level.status != 0 && level.standardError.contains("extreme is no thinking level"), "\(level.standardError)")
        let model = try set.tether(["session", "set", "model=gpt-4"])
        #expect(
            model.status != 0 && model.standardError.contains("the gateway has no model gpt-4: it has tether/tether-dev-echo, tether/tether-dev-echo-large"),
            "\(model.standardError)")

        let change = try set.tether(["session", "set", "model=large", "thinking=max"])
        #expect(change.status == 0, "\(change.standardError)")
        #expect(
            change.standardOutput == "sent /model tether/tether-dev-echo-large and /think high to the gateway; it answers in the conversation\n",
            "\(change.standardOutput)")
        let changed = try await settings(of: set) { $0.model == "tether-dev-echo-large" && $0.thinkingLevel == "high" }
        #expect(changed?.contextTokens == 200_000 && changed?.totalTokens == 6, "\(String(describing: changed))")
        status = try set.tether(["status"]).standardOutput
        print("tether status after the change:\n\(status)")
        #expect(status.contains("settings: model tether/tether-dev-echo-large · thinking high · 6/200,000 tokens (<1%)"), "\(status)")

        // The gateway had each command once, and answered each in the conversation.
        let receipts = set.receipts()
        #expect(receipts["/model tether/tether-dev-echo-large"] == 1 && receipts["/think high"] == 1, "\(receipts)")
        #expect(receipts["/think extreme"] == nil && receipts["/model gpt-4"] == nil, "a refused change is not sent")
        let transcript = set.openClawTranscript().map(\.text)
        #expect(
            transcript.contains("Model set to large (tether/tether-dev-echo-large).") && transcript.contains("Thinking level set to high."), "\(transcript)")
        let bus = try set.busClient("settings-test")
        let stored = await eventually(timeout: .seconds(5)) {
            (try? await bus.request(TranscriptCommand.self, .init(limit: 100)).entries.map(\.content).contains("Thinking level set to high.")) == true
        }
        #expect(stored, "the gateway's answer is in Tether's transcript")
        await bus.close()

        let models = try set.tether(["models"]).standardOutput
        #expect(models.contains("* tether/tether-dev-echo-large (Tether dev echo, large) alias large · 200,000 tokens · reasoning"), "\(models)")
        let agents = try set.tether(["agents"]).standardOutput
        #expect(agents.contains("* main  (agent:main:main) · tether/tether-dev-echo") && agents.contains("  ops Ops  (agent:ops:main)"), "\(agents)")

        // A command the gateway knows and Tether does not is a message, sent as typed.
        let compact = try set.tether(["send", "/compact"])
        #expect(compact.status == 0 && compact.standardOutput == "You said: /compact\n", "\(compact.standardOutput)")

        // Not connected: the change waits in the outbox, and says so; it is sent once connected again.
        #expect(try set.tether(["suspend"]).status == 0)
        var seen = ""
        let suspended = await eventually {
            seen = (try? set.tether(["status"]).standardOutput) ?? ""
            return seen.contains("suspended")
        }
        #expect(suspended, "\(seen)")
        let waiting = try set.tether(["session", "set", "thinking=low"])
        #expect(waiting.status == 0, "\(waiting.standardError)")
        #expect(
            waiting.standardOutput.hasPrefix("/think low waits in the outbox: Tether is not connected to the gateway; it is sent once it is"),
            "\(waiting.standardOutput)")
        #expect(set.receipts()["/think low"] == nil)
        #expect(try set.tether(["resume"]).status == 0)
        let low = try await settings(of: set) { $0.thinkingLevel == "low" }
        #expect(low?.thinkingLevel == "low" && set.receipts()["/think low"] == 1, "\(String(describing: low)) \(set.receipts())")
    }

    @Test func newAndResetStartTheSessionAnew() async throws {
        let set = try await ComposedSet.openClaw()
        defer { set.stop() }
        #expect(try set.tether(["send", "hello"]).status == 0)
        let before = try await settings(of: set) { $0.totalTokens == 6 }
        let firstID = try #require(before?.sessionID)

        let new = try set.tether(["send", "/new"])
        #expect(new.status == 0, "\(new.standardError)")
        let greeting = "A new session has started (model tether/tether-dev-echo). What would you like to do?"
        #expect(new.standardOutput == greeting + "\n", "\(new.standardOutput)")
        #expect(set.openClawTranscript().map(\.text) == ["/new", greeting], "the gateway's history starts empty")
        // "/new" 1 token in, the greeting 21 out; a new session id.
        let renewed = try await settings(of: set) { $0.sessionID != firstID && $0.totalTokens != nil && $0.totalTokens != 6 }
        #expect(renewed?.sessionID != firstID && renewed?.inputTokens == 1 && renewed?.outputTokens == 21, "\(String(describing: renewed))")

        let after = try set.tether(["send", "after the new one"])
        #expect(after.status == 0 && after.standardOutput == "You said: after the new one\n", "\(after.standardOutput) \(after.standardError)")
        let reset = try set.tether(["send", "/reset"])
        #expect(reset.status == 0 && reset.standardOutput == greeting + "\n", "\(reset.standardOutput) \(reset.standardError)")
        #expect(set.openClawTranscript().map(\.text) == ["/reset", greeting])
        let again = try set.tether(["send", "and after the reset"])
        #expect(again.status == 0 && again.standardOutput == "You said: and after the reset\n", "\(again.standardOutput) \(again.standardError)")
        // Each message reached the gateway once.
        #expect(
            set.receipts().filter { ["/new", "/reset", "hello", "after the new one", "and after the reset"].contains($0.key) }.values.allSatisfy { $0 == 1 })
    }

    @Test func aSeedGatewaySaysSettingsAreNotAvailable() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        #expect(try set.tether(["send", "hello"]).status == 0)
        let change = try set.tether(["session", "set", "thinking=high"])
        #expect(change.status != 0 && change.standardError.contains("not available with this gateway"), "\(change.standardError)")
        let models = try set.tether(["models"])
        #expect(models.status != 0 && models.standardError.contains("not available with this gateway"), "\(models.standardError)")
        let status = try set.tether(["status"]).standardOutput
        #expect(status.contains("session settings: not available with this gateway"), "\(status)")
    }
}

/// The part of `tether status --json` these tests read.
private struct StatusReportSettings: Decodable {
    var settings: SessionSettings?
}

extension JSONDecoder {
    /// A decoder for what the bus and `--json` write (ISO 8601 dates with milliseconds).
    fileprivate static var bus: JSONDecoder { BusSchema.makeDecoder() }
}
