import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// Delivery through the whole set against a gateway without Tether's additions: the
/// development gateway as a seed-only peer (`strictSeed`: no duplicate suppression, no
/// session resume, no `replyTo`, one message at a time, each acknowledged after its reply).
@Suite(.serialized) struct SeedPeerTests {
    @Test func acknowledgementsSlowerThanEveryTimeoutAnswerEachMessageOnce() async throws {
        // 11 s: past the retry policy's 10 s, the 2 s probe and its 2 s deadline.
        let set = try await ComposedSet.seedPeer(faults: #", "acknowledgementDelayMilliseconds": 11000"#)
        defer { set.stop() }
        let bus = try set.busClient("seed-peer-test")
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        let diagnostics = try await BusRecorder<DiagnosticEvent>(bus: bus, topic: .diagnostic)
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let epoch = try await states.waitFor { $0.phase == .connected }.value.epoch
        let started = ContinuousClock.now
        let ids = [MessageID.random(), MessageID.random()]
        for (index, id) in ids.enumerated() {
            _ = try await bus.request(SendMessageCommand.self, .init(id: id, content: "slow \(index)"))
        }
        for id in ids {
            let delivered = try await deliveries.waitFor(timeout: .seconds(40)) { $0.id == id && $0.status == .delivered }
            print("slow acknowledgement: \(id) delivered \(started.duration(to: delivered.receivedAt)) after it was sent")
        }
        #expect(set.receipts() == ["slow 0": 1, "slow 1": 1], "answered more than once: \(set.receipts())")
        #expect(await !deliveries.entries.contains { $0.value.status == .failed })
        #expect(await !states.entries.contains { $0.value.epoch != epoch }, "the connection was replaced though it answered every probe")
        let late = await diagnostics.entries.filter { $0.value.kind == .acknowledgementOverdue }
        #expect(late.count >= 1, "no acknowledgement was counted late")
        await bus.close()
    }

    @Test func aFullQueueRefusesAtSendTimeAndNothingThatReachedTheGatewayIsSaidToHaveFailed() async throws {
        let set = try await ComposedSet.seedPeer(environment: ["TETHER_CHUNK_DELAY": "1"])
        defer { set.stop() }
        let bus = try set.busClient("seed-peer-test")
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        // 200 sent far faster than a gateway answering one at a time acknowledges them: each is
        // written at once, so none waits to be written and none is refused.
        var accepted: [String] = []
        for index in 1...200 {
            let content = String(format: "fast %03d", index)
            _ = try await bus.request(SendMessageCommand.self, .init(id: .random(), content: content))
            accepted.append(content)
        }
        let answered = await eventually(timeout: .seconds(60)) { await deliveries.entries.filter { $0.value.status == .delivered }.count >= 200 }
        #expect(answered, "the 200 were not all acknowledged")
        // Then 120 while the connection is suspended: 100 wait, 20 are refused at once.
        #expect(try set.tether(["suspend"]).status == 0)
        var refused: [String] = []
        for index in 1...120 {
            let content = String(format: "held %03d", index)
            do {
                _ = try await bus.request(SendMessageCommand.self, .init(id: .random(), content: content))
                accepted.append(content)
            } catch {
                #expect("\(error)".contains("the outbox is full"), "\(error)")
                refused.append(content)
            }
        }
        #expect(refused.count == 20, "\(refused.count) refused")
        #expect(try set.tether(["resume"]).status == 0)
        let all = await eventually(timeout: .seconds(90)) { Set(set.receipts().keys).isSuperset(of: accepted) }
        #expect(all, "not every accepted message reached the gateway")
        let receipts = set.receipts()
        #expect(receipts.values.allSatisfy { $0 == 1 }, "received twice: \(receipts.filter { $0.value > 1 }.keys.sorted())")
        #expect(refused.allSatisfy { receipts[$0] == nil }, "a refused message reached the gateway")
        let delivered = await eventually(timeout: .seconds(30)) {
            await deliveries.entries.filter { $0.value.status == .delivered }.count >= accepted.count
        }
        #expect(delivered)
        let failed = await deliveries.entries.filter { $0.value.status == .failed || $0.value.status == .expired }
        #expect(failed.isEmpty, "said to have failed: \(failed.prefix(5).map { "\($0.value.id) \($0.value.detail ?? "")" })")
        print("full queue: \(accepted.count) accepted and delivered once each, \(refused.count) refused at send time")
        await bus.close()
    }

    @Test func aReplyWhoseFinalChunkNeverComesIsIncomplete() async throws {
        let set = try await ComposedSet.seedPeer(faults: #", "omitFinalChunk": true"#, environment: ["TETHER_REPLY_STALL": "3"])
        defer { set.stop() }
        let bus = try set.busClient("seed-peer-test")
        let botStates = try await BusRecorder<BotStateUpdate>(bus: bus, topic: .botState)
        let send = try set.tether(["send", "--timeout", "30", "never", "finished"], timeout: .seconds(40))
        #expect(send.status == 3, "tether send: \(send.standardError)")
        #expect(send.standardOutput.hasPrefix("You said: never"), "\(send.standardOutput)")
        #expect(send.standardError.contains("the reply stopped"), "\(send.standardError)")
        #expect(send.standardError.contains("matched to your message by order"), "a seed peer's reply is not named certain: \(send.standardError)")
        let idle = await eventually { await botStates.latest?.state == .idle }
        let last = await botStates.latest?.state
        #expect(idle, "the bot is still said to be \(String(describing: last))")
        let status = try set.tether(["status"])
        let bot = status.standardOutput.split(separator: "\n").first { $0.hasPrefix("bot: ") }
        #expect(bot == "bot: Opta is idle", "\(status.standardOutput)")
        await bus.close()
    }

    @Test func chunksDoubledAndSwappedStillMakeTheWholeReplyAndAMissingOneMakesItIncomplete() async throws {
        let set = try await ComposedSet.seedPeer(faults: #", "duplicateChunks": true, "reorderChunks": true"#, environment: ["TETHER_REPLY_STALL": "3"])
        defer { set.stop() }
        let words = (1...9).map { "word\($0)" }
        let whole = try set.tether(["send", "--timeout", "20"] + words)
        #expect(whole.status == 0, "\(whole.standardError)")
        #expect(whole.standardOutput == "You said: " + words.joined(separator: " ") + "\n", "\(whole.standardOutput)")
        try await set.faults(#"{"duplicateChunks": false, "reorderChunks": false, "dropChunkIndex": 3}"#)
        let gap = try set.tether(["send", "--timeout", "20", "with", "a", "gap", "in", "it"])
        #expect(gap.status == 3, "\(gap.standardError)")
        #expect(gap.standardOutput == "You said: with \n", "as far as it came without a gap: \(gap.standardOutput)")
        #expect(gap.standardError.contains("the reply stopped"), "\(gap.standardError)")
    }

    @Test func aReplyCutByAGatewayRestartIsIncompleteAtOnce() async throws {
        let set = try await ComposedSet.seedPeer()
        defer { set.stop() }
        let bus = try set.busClient("seed-peer-test")
        let stream = try await BusRecorder<StreamProgress>(bus: bus, topic: .conversationStream)
        let botStates = try await BusRecorder<BotStateUpdate>(bus: bus, topic: .botState)
        let words = (1...300).map { "w\($0)" }
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "40", "--run-dir", set.run.path] + words, outputDirectory: set.run.path, name: "send")
        _ = try await stream.waitFor { $0.chunkIndex >= 5 }
        let killed = ContinuousClock.now
        kill(try #require(set.pid(of: "gateway")), SIGKILL)
        let status = try send.waitForExit(timeout: .seconds(40))
        print("reply cut by a gateway restart: tether send ended \(killed.duration(to: .now)) after the kill")
        #expect(status == 3, "tether send: \(send.standardError)")
        #expect(send.standardOutput.hasPrefix("You said: w1 w2 w3 w4"))
        #expect(send.standardError.contains("connection ended"), "\(send.standardError)")
        let idle = await eventually { await botStates.latest?.state == .idle }
        #expect(idle)
        let transcript = try await bus.request(TranscriptCommand.self, .init(limit: 10)).entries
        #expect(transcript.contains { $0.status == .incomplete })
        await bus.close()
    }
}

/// Replies go to the message they answer, with many senders at once.
@Suite(.serialized) struct ReplyAttributionTests {
    @Test func tenSendersAtOnceEachGetTheReplyToTheirOwnMessages() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let senders = 10
        let each = 50
        let started = ContinuousClock.now
        let runPath = set.run.path
        let wrong = try await withThrowingTaskGroup(of: [String].self) { group in
            for sender in 1...senders {
                group.addTask {
                    var wrong: [String] = []
                    for index in 1...each {
                        let text = "sender \(sender) message \(index)"
                        let send = try ChildProcess(
                            Programs.path("tether"), ["send", "--timeout", "30", "--run-dir", runPath, text], outputDirectory: runPath,
                            name: "send-\(sender)")
                        let status = try send.waitForExit(timeout: .seconds(40))
                        let printed = send.standardOutput.trimmingCharacters(in: .newlines)
                        if status != 0 || printed != "You said: \(text)" { wrong.append("\(text) → [\(status)] \(printed) \(send.standardError)") }
                        try? FileManager.default.removeItem(atPath: send.stdoutPath)
                        try? FileManager.default.removeItem(atPath: send.stderrPath)
                    }
                    return wrong
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        print("\(senders) senders × \(each) messages at once: \(senders * each - wrong.count) replies to their own message in \(started.duration(to: .now))")
        #expect(wrong.isEmpty, "\(wrong.count) wrong: \(wrong.prefix(5))")
    }
}
