import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// What the gateway's history adds to the transcript through the real programs: another
/// client's messages under their sender's label, and nothing twice however often it is read.
@Suite(.serialized) struct GatewayHistoryTests {
    @Test func anotherClientsMessagesCarryTheirSenderAndReloadsAddNothing() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3")
        defer { set.stop() }
        let other = try await OtherOpenClawClient(port: set.port, token: try set.gatewayToken, displayName: "Phone")
        defer { other.stop() }
        _ = other.send("sent from the phone")
        let answered = await eventually(timeout: .seconds(20)) { set.openClawTranscript().contains { $0.text == "You said: sent from the phone" } }
        #expect(answered, "the other client's message was not answered")
        let send = try set.tether(["send", "sent", "from", "here"])
        #expect(send.status == 0 && send.standardOutput == "You said: sent from here\n", "\(send.status ?? -1) \(send.standardError)")
        // Each reconnect reads the history again.
        for _ in 0..<2 { #expect(try await set.killAndAwaitRestart("connd")) }
        let bus = try set.busClient("history-test")
        defer { Task { await bus.close() } }
        let settled = await eventually(timeout: .seconds(15)) {
            let entries = (try? await bus.request(TranscriptCommand.self, .init(limit: 100)).entries) ?? []
            return entries.contains { $0.author == "Phone (cli)" } && entries.count == 4
        }
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 100)).entries
        #expect(settled, "\(entries.map { "\($0.author ?? "you"): \($0.content)" })")
        let phone = entries.first { $0.content == "sent from the phone" }
        #expect(phone?.author == "Phone (cli)", "another client's message labelled \(phone?.author ?? "you")")
        #expect(entries.first { $0.content == "sent from here" }?.author == nil)
        let contents = entries.map(\.content)
        #expect(Set(contents).count == contents.count, "added twice: \(contents)")
    }

    @Test func theGatewaysRewriteAfterACrashAddsNothingTwice() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3", environment: ["TETHER_CHUNK_DELAY": "40"])
        defer { set.stop() }
        let bus = try set.busClient("history-test")
        defer { Task { await bus.close() } }
        let stream = try await BusRecorder<StreamProgress>(bus: bus, topic: .conversationStream)
        // The gateway writes the rewrite only in a session that has had a reply.
        #expect(try set.tether(["send", "first"]).status == 0)
        let words = (1...40).map { "w\($0)" }
        let cut = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "--run-dir", set.run.path] + words, outputDirectory: set.run.path, name: "cut")
        _ = try await stream.waitFor { $0.length > 20 && $0.text.hasPrefix("You said: w1") }
        // The gateway dies in the middle of the run: its message is left without a reply.
        #expect(try await set.killAndAwaitRestart("gateway"))
        #expect(try cut.waitForExit(timeout: .seconds(60)) == 3, "\(cut.standardOutput) \(cut.standardError)")
        #expect(cut.standardOutput.hasPrefix("You said: w1"), "as far as it came: \(cut.standardOutput.prefix(80))")
        let next = try set.tether(["send", "after", "the", "crash"])
        #expect(next.status == 0 && next.standardOutput == "You said: after the crash\n", "\(next.standardOutput) \(next.standardError)")
        // As the real gateway: the orphaned message and the new one merged into one entry.
        let merged = set.openClawTranscript().filter { $0.role == "user" }
        #expect(
            merged.count == 3 && merged.last?.text.hasPrefix("[Queued user message that arrived while the previous turn was still active]") == true, "\(merged)"
        )
        // Read again on each reconnect: each message once, no rewrite shown.
        for _ in 0..<2 { #expect(try await set.killAndAwaitRestart("connd")) }
        try await Task.sleep(for: .seconds(2))
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 100)).entries
        let sent = entries.filter { $0.sender == .user }.map(\.content)
        #expect(sent == ["first", words.joined(separator: " "), "after the crash"], "\(sent)")
        let replies = entries.filter { $0.sender != .user }
        #expect(replies.map(\.status) == [.received, .incomplete, .received], "\(replies.map { "\($0.status) \($0.content.prefix(30))" })")
        #expect(replies.last?.content == "You said: after the crash")
    }

    @Test func aReplyThatCannotBeToldApartIsShownWithoutAClaimAndTheSenderIsTold() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3", environment: ["TETHER_CHUNK_DELAY": "40"])
        defer { set.stop() }
        // Another client whose messages carry the same label as Tether's.
        let other = try await OtherOpenClawClient(port: set.port, token: try set.gatewayToken, displayName: "Tether")
        defer { other.stop() }
        let bus = try set.busClient("history-test")
        defer { Task { await bus.close() } }
        let stream = try await BusRecorder<StreamProgress>(bus: bus, topic: .conversationStream)
        let text = (1...30).map { "same\($0)" }.joined(separator: " ")
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "90", "--run-dir", set.run.path, text], outputDirectory: set.run.path, name: "send")
        _ = try await stream.waitFor { $0.length > 10 }
        // Tether hears nothing more while its run and the other client's same words run.
        let connd = try #require(set.pid(of: "connd"))
        kill(connd, SIGSTOP)
        other.send(text)
        let both = await eventually(timeout: .seconds(30)) { set.openClawTranscript().map(\.role) == ["user", "assistant", "user", "assistant"] }
        #expect(both, "\(set.openClawTranscript().map { "\($0.role): \($0.text.prefix(20))" })")
        kill(connd, SIGKILL)
        #expect(await set.awaitRestart(of: "connd", replacing: connd))
        #expect(try send.waitForExit(timeout: .seconds(60)) == 3, "\(send.standardOutput) \(send.standardError)")
        #expect(send.standardError.contains("delivered, but no reply is printed"), "\(send.standardError)")
        #expect(send.standardOutput.isEmpty, "a reply printed as if it were certainly this message's: \(send.standardOutput)")
        // In the conversation: both messages and both replies, once each, no reply claimed.
        try await Task.sleep(for: .seconds(1))
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 100)).entries
        #expect(entries.count { $0.sender == .user && $0.content == text } == 2, "\(entries.map { "\($0.sender) \($0.content.prefix(20))" })")
        let replies = entries.filter { $0.sender != .user && $0.content == "You said: " + text }
        #expect(replies.count == 2, "\(entries.map { "\($0.sender) \($0.status) \($0.content.prefix(20))" })")
        #expect(replies.allSatisfy { $0.inReplyTo == nil }, "\(replies.map { "\($0.inReplyTo?.value ?? "-")" })")
    }

    @Test func aNewSessionsFirstMessageLostWithTheGatewayIsSentAgainAndAnswered() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3", environment: ["TETHER_CHUNK_DELAY": "40"])
        defer { set.stop() }
        let bus = try set.busClient("history-test")
        defer { Task { await bus.close() } }
        let stream = try await BusRecorder<StreamProgress>(bus: bus, topic: .conversationStream)
        let words = (1...40).map { "w\($0)" }
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "--run-dir", set.run.path] + words, outputDirectory: set.run.path, name: "send")
        _ = try await stream.waitFor { $0.length > 20 }
        // As the real gateway: a brand-new session's first message is not stored before its reply.
        #expect(set.openClawTranscript().isEmpty, "\(set.openClawTranscript())")
        #expect(try await set.killAndAwaitRestart("gateway"))
        #expect(try send.waitForExit(timeout: .seconds(60)) == 0, "\(send.standardOutput.prefix(100)) \(send.standardError)")
        #expect(send.standardOutput == "You said: " + words.joined(separator: " ") + "\n", "\(send.standardOutput.prefix(100))")
        #expect(set.openClawTranscript().map(\.role) == ["user", "assistant"], "\(set.openClawTranscript())")
    }

    /// The gateway answers `chat.history` with up to 6 MiB of JSON and cuts each text at 12,000
    /// UTF-16 units, not bytes: 48 entries of 8,000 CJK characters make a frame of 1.1 MB. connd
    /// reads it whole, and protod, which writes nothing on a new connection until the history
    /// is read, sends again at once.
    @Test func aHistoryOverAMebibyteIsReadAndSendingGoesOn() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3")
        defer { set.stop() }
        let text = String(repeating: "字", count: 8000)
        for index in 0..<24 {
            let send = try set.tether(["send", "\(index)\(text)"])
            #expect(send.status == 0, "send \(index): \(send.standardError)")
        }
        let bus = try set.busClient("history-test")
        defer { Task { await bus.close() } }
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let killed = ContinuousClock.now
        #expect(try await set.killAndAwaitRestart("connd"))
        let connecting = try await states.waitFor(timeout: .seconds(20), since: killed) { $0.phase == .connecting }
        let connected = try await states.waitFor(timeout: .seconds(20), since: connecting.receivedAt) { $0.phase == .connected }
        let after = try set.tether(["send", "after", "the", "restart"])
        #expect(after.status == 0 && after.standardOutput == "You said: after the restart\n", "\(after.standardOutput) \(after.standardError)")
        let since = await states.entries.filter { $0.receivedAt > connected.receivedAt }.map(\.value)
        #expect(
            since.allSatisfy { $0.phase == .connected && $0.epoch == connected.value.epoch },
            "the connection did not last: \(since.map { "\($0.phase) \($0.epoch) \($0.lastError ?? "")" })")
        let dropped = set.log(of: "connd").split(separator: "\n").filter { $0.contains("message too large") || $0.contains("dropped a frame") }
        #expect(dropped.isEmpty, "\(dropped)")
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 100)).entries
        #expect(entries.count == 50, "\(entries.count) entries")
    }

    @Test func aLongMessageTheGatewaysHistoryShortensIsStillRecognised() async throws {
        let set = try await ComposedSet.openClaw(protocols: "3")
        defer { set.stop() }
        let long = String(repeating: "0123456789", count: 1300)
        let send = try set.tether(["send", long])
        #expect(send.status == 0, "\(send.standardError)")
        for _ in 0..<2 { #expect(try await set.killAndAwaitRestart("connd")) }
        let bus = try set.busClient("history-test")
        defer { Task { await bus.close() } }
        try await Task.sleep(for: .seconds(2))
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 100)).entries
        #expect(entries.map(\.content.count) == [13_000, 13_000 + "You said: ".count], "\(entries.map { "\($0.sender) \($0.content.suffix(30))" })")
        #expect(!entries.contains { $0.content.hasSuffix("...(truncated)...") })
    }
}
