import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// Choosing the gateway's session while the set runs, through the real programs: each message
/// in the session it was sent in, the transcript kept per session, the choice kept by protod.
@Suite(.serialized) struct SessionSwitchTests {
    @Test func aSessionChosenMidReplyTakesTheNextMessageAndEachTranscriptKeepsItsOwn() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3", environment: ["TETHER_CHUNK_DELAY": "40"])
        defer { set.stop() }
        let bus = try set.busClient("session-test")
        defer { Task { await bus.close() } }
        let stream = try await BusRecorder<StreamProgress>(bus: bus, topic: .conversationStream)

        // A long reply in the main session is being written when the user switches.
        let words = (1...60).map { "w\($0)" }
        let long = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "--run-dir", set.run.path] + words, outputDirectory: set.run.path, name: "long")
        _ = try await stream.waitFor { $0.length > 20 }
        let use = try set.tether(["session", "use", "side"])
        #expect(use.status == 0, "\(use.standardError)")
        #expect(
            use.standardOutput
                == "chatting in agent:main:side once 1 message sent before in agent:main:main is answered; what is sent now waits until then\n",
            "\(use.standardOutput)")
        let side = try set.tether(["send", "--timeout", "60", "in", "side"], timeout: .seconds(70))
        #expect(side.status == 0 && side.standardOutput == "You said: in side\n", "\(side.status ?? -1) \(side.standardOutput) \(side.standardError)")
        #expect(try long.waitForExit(timeout: .seconds(60)) == 0, "\(long.standardError)")
        let longReply = "You said: " + words.joined(separator: " ")
        #expect(long.standardOutput == longReply + "\n", "\(long.standardOutput.prefix(100))")

        // The gateway: each message in the session it was sent in, once.
        #expect(set.openClawTranscript().map(\.text) == [words.joined(separator: " "), longReply])
        #expect(set.openClawTranscript(session: "agent:main:side").map(\.text) == ["in side", "You said: in side"])

        // snapd: the chosen session's transcript by default, the other one when asked.
        let shown = await eventually(timeout: .seconds(5)) {
            (try? await bus.request(TranscriptCommand.self, .init(limit: 100)).entries.map(\.content)) == ["in side", "You said: in side"]
        }
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 100)).entries
        #expect(shown, "\(entries.map { "\($0.session ?? "-") \($0.content.prefix(20))" })")
        let main = try await bus.request(TranscriptCommand.self, .init(limit: 100, session: "agent:main:main")).entries
        #expect(main.map(\.content) == [words.joined(separator: " "), longReply])
        #expect(main.allSatisfy { $0.session == "agent:main:main" })

        // The choice outlives protod; `tether sessions` marks it.
        #expect(try await set.killAndAwaitRestart("protod"))
        let again = try set.tether(["send", "still", "side"])
        #expect(again.status == 0 && again.standardOutput == "You said: still side\n", "\(again.standardOutput) \(again.standardError)")
        #expect(set.openClawTranscript(session: "agent:main:side").map(\.text).suffix(2) == ["still side", "You said: still side"])
        #expect(set.openClawTranscript().count == 2, "sent to the main session after a restart")
        let sessions = try set.tether(["sessions"])
        #expect(sessions.standardOutput.contains("* agent:main:side") && sessions.standardOutput.contains("  agent:main:main"), "\(sessions.standardOutput)")
        let status = try set.tether(["status"])
        #expect(status.standardOutput.contains("session: agent:main:side"), "\(status.standardOutput)")
    }

    @Test func aGatewayOfTheSeedsJSONHasNoSessionToChooseAndABadKeyIsRefused() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        #expect(try set.tether(["send", "hello"]).status == 0)
        let seed = try set.tether(["session", "use", "side"])
        #expect(seed.status != 0 && seed.standardError.contains("the seeds' JSON, which has one conversation"), "\(seed.standardError)")
        let empty = try set.tether(["session", "use", "  "])
        #expect(empty.status != 0 && empty.standardError.contains("the session key is empty"), "\(empty.standardError)")
    }
}
