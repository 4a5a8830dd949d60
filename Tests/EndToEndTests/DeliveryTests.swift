import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// Exactly once and whole, through the whole set, whatever is killed and whenever the
/// connection drops.
@Suite(.serialized) struct DeliveryTests {
    private func recorded(_ set: ComposedSet, _ content: String) -> Int {
        set.gatewayRecord().filter { $0["content"] as? String == content }.count
    }

    private func killAndAwaitRestart(_ set: ComposedSet, _ name: String) async throws {
        let restarted = try await set.killAndAwaitRestart(name)
        #expect(restarted, "\(name) was not restarted")
    }

    @Test func protodKilledAfterAcceptingBeforeSending() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        // No connection: the message can only be accepted into the outbox.
        #expect(try set.tether(["suspend"]).status == 0)
        let send = try set.tether(["send", "--timeout", "1", "accepted", "not", "sent"])
        #expect(send.status == 1, "\(send.standardError)")
        #expect(send.standardError.contains("queued"))
        try await killAndAwaitRestart(set, "protod")
        #expect(try set.tether(["resume"]).status == 0)
        let delivered = await eventually(timeout: .seconds(15)) { recorded(set, "accepted not sent") == 1 }
        #expect(delivered, "the queued message was not delivered after protod restarted")
        try await Task.sleep(for: .seconds(1))
        #expect(recorded(set, "accepted not sent") == 1)
    }

    @Test func protodKilledAfterSendingBeforeTheAck() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        // The gateway holds every frame it sends for 3 s: the message arrives, its ack does not yet.
        try await set.faults(#"{"frameDelayMilliseconds": 3000}"#)
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "20", "--run-dir", set.run.path, "sent", "not", "acknowledged"],
            outputDirectory: set.run.path, name: "send")
        let arrived = await eventually(timeout: .seconds(10)) { recorded(set, "sent not acknowledged") == 1 }
        #expect(arrived)
        try await killAndAwaitRestart(set, "protod")
        try await set.faults("{}", method: "DELETE")
        // The new protod sends the message again with the same id; the gateway acknowledges it once more.
        let status = try send.waitForExit(timeout: .seconds(25))
        #expect(status == 0, "tether send: \(send.standardError)")
        #expect(recorded(set, "sent not acknowledged") == 1, "the gateway received the message twice")
        let client = try BusClient(source: "delivery-test", runDirectory: set.run.runDirectory, logger: Logger(label: "delivery-test"))
        let transcript = try await client.request(TranscriptCommand.self, .init(limit: 10)).entries
        #expect(transcript.first { $0.content == "sent not acknowledged" }?.status == .delivered)
        await client.close()
    }

    @Test func streamCutHalfwayArrivesWholeAfterTheReconnect() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "delivery-test", runDirectory: set.run.runDirectory, logger: Logger(label: "delivery-test"))
        let states = try await BusRecorder<ConnectionStatus>(bus: client, topic: .connectionState)
        let words = (1...40).map { "word\($0)" }
        // ack, thinking and six chunks, then the connection closes in the middle of the reply.
        try await set.faults(#"{"closeAfterFrames": 8}"#)
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "30", "--run-dir", set.run.path] + words, outputDirectory: set.run.path, name: "send")
        _ = try await states.waitFor(timeout: .seconds(10)) { $0.phase == .reconnecting }
        try await set.faults("{}", method: "DELETE")
        let status = try send.waitForExit(timeout: .seconds(30))
        #expect(status == 0, "tether send: \(send.standardError)")
        #expect(send.standardOutput == "You said: " + words.joined(separator: " ") + "\n")
        let replays = set.log(of: "gateway").split(separator: "\n").filter { $0.contains("session resumed") }
        #expect(replays.contains { !$0.contains("gateway.replayed=0 ") }, "nothing was replayed: \(replays)")
        #expect(recorded(set, words.joined(separator: " ")) == 1)
        await client.close()
    }
}

extension DeliveryTests {
    /// As when protod falls behind a fast stream and the bus drops frames before it reads them:
    /// the gap in the frames' numbers is asked for again, and the reply is whole.
    @Test func aChunkLostOnItsWayToProtodIsAskedForAgainAndTheReplyIsWhole() async throws {
        let set = try await ComposedSet(environment: ["TETHER_GATEWAY_FAULTS": #"{"loseChunkIndex": 4}"#])
        defer { set.stop() }
        let words = (1...12).map { "word\($0)" }
        let send = try set.tether(["send", "--timeout", "20"] + words)
        #expect(send.status == 0, "\(send.standardError)")
        #expect(send.standardOutput == "You said: " + words.joined(separator: " ") + "\n", "\(send.standardOutput)")
        let replays = set.log(of: "gateway").split(separator: "\n").filter { $0.contains("session resumed") }
        #expect(replays.contains { !$0.contains("gateway.replayed=0 ") }, "nothing was replayed: \(replays)")
    }

    /// The same loss with a gateway of the seeds' JSON alone, which cannot send it again.
    @Test func aChunkLostOnItsWayFromASeedOnlyGatewayLeavesTheReplyIncomplete() async throws {
        let set = try await ComposedSet.seedPeer(faults: #", "loseChunkIndex": 4"#, environment: ["TETHER_REPLY_STALL": "3"])
        defer { set.stop() }
        let send = try set.tether(["send", "--timeout", "20", "one", "two", "three", "four", "five", "six"])
        #expect(send.status == 3, "\(send.standardError)")
        #expect(send.standardOutput == "You said: one two \n", "as far as it came without the gap: \(send.standardOutput)")
        #expect(send.standardError.contains("the reply stopped"), "\(send.standardError)")
    }

    @Test func replyCutByAGatewayRestartIsMarkedIncomplete() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "delivery-test", runDirectory: set.run.runDirectory, logger: Logger(label: "delivery-test"))
        let stream = try await BusRecorder<StreamProgress>(bus: client, topic: .conversationStream)
        let words = (1...300).map { "w\($0)" }
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "40", "--run-dir", set.run.path] + words, outputDirectory: set.run.path, name: "send")
        _ = try await stream.waitFor { $0.chunkIndex >= 5 }
        // The gateway dies with the rest of the reply; compose starts a new one, which knows nothing of it.
        kill(try #require(set.pid(of: "gateway")), SIGKILL)
        let status = try send.waitForExit(timeout: .seconds(40))
        #expect(status == 3, "tether send: \(send.standardError)")
        #expect(send.standardError.contains("incomplete"), "\(send.standardError)")
        #expect(send.standardOutput.hasPrefix("You said: w1 w2 w3 w4"))
        let transcript = try await client.request(TranscriptCommand.self, .init(limit: 10)).entries
        #expect(transcript.contains { $0.status == .incomplete })
        await client.close()
    }
}

@Suite(.serialized) struct ManyMessagesTests {
    @Test func thousandMessagesThroughKilledConndAndDroppedConnectionsArriveOnceInOrder() async throws {
        // Room for all of them: by default the outbox keeps the newest 100.
        let set = try await ComposedSet(environment: ["TETHER_OUTBOX_LIMIT": "2000"])
        defer { set.stop() }
        let client = try BusClient(source: "many-test", runDirectory: set.run.runDirectory, logger: Logger(label: "many-test"))
        let count = 1000
        let contents = (1...count).map { String(format: "message %04d", $0) }
        // Every connection closes after 300 frames: the gateway drops connections throughout.
        try await set.faults(#"{"closeAfterFrames": 300}"#)
        let started = ContinuousClock.now
        var killed = 0
        for (index, content) in contents.enumerated() {
            let reply = try await client.request(SendMessageCommand.self, .init(id: .random(), content: content))
            #expect(reply.accepted)
            if index == 300 || index == 700, let connd = set.pid(of: "connd") {
                kill(connd, SIGKILL)
                killed += 1
            }
        }
        let accepted = started.duration(to: .now)
        let delivered = await eventually(timeout: .seconds(120)) {
            set.gatewayRecord().count >= count
        }
        try await set.faults("{}", method: "DELETE")
        let record = set.gatewayRecord().compactMap { $0["content"] as? String }
        print("\(count) messages: accepted in \(accepted), all at the gateway after \(started.duration(to: .now)); connd killed \(killed) times")
        #expect(delivered, "only \(record.count) of \(count) messages reached the gateway")
        #expect(record.count == count, "the gateway recorded \(record.count) messages for \(count) sent")
        let firstDifference = Array(zip(record, contents)).firstIndex { $0 != $1 }
        #expect(firstDifference == nil, "the gateway's record departs from the order sent at \(firstDifference ?? 0)")
        let restarts = set.state()?.programs.first { $0.name == "connd" }?.restarts ?? 0
        #expect(restarts == killed)
        await client.close()
    }
}
