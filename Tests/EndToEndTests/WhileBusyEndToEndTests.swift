import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// A message for the reply in progress, through the whole set: steered into it (that reply
/// answers both), or interrupting it (it ends incomplete, and the message is answered), on
/// today's gateway; on the 2026.4 release, which offers neither, the message waits and is
/// answered on its own, and is told so.
@Suite(.serialized) struct WhileBusyEndToEndTests {
    static let longMessage = (1...40).map { "w\($0)" }.joined(separator: " ")

    /// A `tether send` of a long message whose reply streams slowly, once its reply began.
    static func replying(_ set: ComposedSet) async throws -> ChildProcess {
        let bus = try set.busClient("while-busy-stream")
        defer { Task { await bus.close() } }
        let stream = try await BusRecorder<StreamProgress>(bus: bus, topic: .conversationStream)
        let first = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "--run-dir", set.run.path, longMessage], outputDirectory: set.run.path, name: "first")
        _ = try await stream.waitFor { $0.text.hasPrefix("You said: w1") }
        return first
    }

    @Test func aSteeredMessageJoinsTheReplyInProgressWhichAnswersBoth() async throws {
        let set = try await ComposedSet.openClaw(release: "current", protocols: "release", environment: ["TETHER_CHUNK_DELAY": "150"])
        defer { set.stop() }
        #expect(try set.tether(["send", "an existing session"]).status == 0)
        let first = try await Self.replying(set)
        let steer = try set.tether(["send", "--steer", "--timeout", "60", "also", "this"], timeout: .seconds(70))
        #expect(steer.status == 0, "exit \(steer.status ?? -1): \(steer.standardError)")
        #expect(steer.standardError.contains("steered into the reply in progress: that reply answers both"), "\(steer.standardError)")
        #expect(
            steer.standardOutput.hasPrefix("You said: w1") && steer.standardOutput.contains("And to what you added: You said: also this"),
            "\(steer.standardOutput)")
        #expect(try first.waitForExit(timeout: .seconds(60)) == 0, "\(first.standardError)")
        #expect(first.standardOutput == steer.standardOutput, "the same reply answers both")
        let transcript = set.openClawTranscript()
        #expect(transcript.count { $0.role == "user" && $0.text == "also this" } == 1)
        #expect(transcript.count { $0.role == "assistant" && $0.text.contains("And to what you added") } == 1, "one reply for both")
        #expect(set.receipts()["also this"] == 1)
    }

    @Test func anInterruptingMessageStopsTheReplyInProgressAndIsAnswered() async throws {
        let set = try await ComposedSet.openClaw(release: "current", protocols: "release", environment: ["TETHER_CHUNK_DELAY": "150"])
        defer { set.stop() }
        #expect(try set.tether(["send", "an existing session"]).status == 0)
        let first = try await Self.replying(set)
        let interrupt = try set.tether(["send", "--interrupt", "--timeout", "60", "stop", "that"], timeout: .seconds(70))
        #expect(
            interrupt.status == 0 && interrupt.standardOutput == "You said: stop that\n",
            "exit \(interrupt.status ?? -1): \(interrupt.standardOutput) \(interrupt.standardError)")
        #expect(try first.waitForExit(timeout: .seconds(60)) == 3, "\(first.standardOutput) \(first.standardError)")
        #expect(first.standardError.contains("the reply was stopped: a message sent to interrupt it is answered instead"), "\(first.standardError)")
        #expect(first.standardOutput.hasPrefix("You said: w1"), "as far as it came")
    }

    @Test func aGatewayWithoutQueueModesSaysSoAndAnswersTheMessageOnItsOwn() async throws {
        let set = try await ComposedSet.openClaw(release: "2026.4", protocols: "release", environment: ["TETHER_CHUNK_DELAY": "60"])
        defer { set.stop() }
        let bus = try set.busClient("while-busy-test")
        defer { Task { await bus.close() } }
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        #expect(try set.tether(["send", "an existing session"]).status == 0)
        let first = try await Self.replying(set)
        let steer = try set.tether(["send", "--steer", "--timeout", "60", "also", "this"], timeout: .seconds(70))
        #expect(
            steer.status == 0 && steer.standardOutput == "You said: also this\n", "exit \(steer.status ?? -1): \(steer.standardOutput) \(steer.standardError)")
        // The sender is told at once, once.
        #expect(steer.standardError.components(separatedBy: "this gateway cannot steer a reply in progress").count == 2, "\(steer.standardError)")
        #expect(try first.waitForExit(timeout: .seconds(60)) == 0)
        let said = await deliveries.entries.compactMap(\.value.detail)
        #expect(said.contains { $0.hasPrefix("this gateway cannot steer a reply in progress") }, "\(said)")
    }
}
