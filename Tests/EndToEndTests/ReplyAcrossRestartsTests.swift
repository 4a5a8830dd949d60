import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// A reply streaming while protod dies, through the real programs in the seeds' dialect.
/// protod keeps a reply's chunks only in memory, but saves which replies are streaming: a
/// gateway that kept the session sends the reply again whole; one that restarted with protod
/// cannot, and the reply is then in the transcript as incomplete, as far as it came, never gone.
@Suite(.serialized) struct ReplyAcrossRestartsTests {
    static let text = (1...40).map { "word\($0)" }.joined(separator: " ")

    /// Sends `text`, waits until snapd keeps part of its reply, then SIGKILLs `programs` together and waits for them to be back.
    static func killMidReply(_ programs: [String], in set: ComposedSet) async throws -> (ChildProcess, String) {
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", text, "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "send")
        let bus = try set.busClient("reply-restart-test")
        var partial = ""
        let streaming = await eventually(timeout: .seconds(20)) {
            let frame = try? await bus.request(SnapshotCommand.self, .init(frontEnd: "reply-restart-test", limit: 1))
            partial = frame?.streaming.first?.content ?? ""
            return partial.count > "You said: word1 word2".count
        }
        await bus.close()
        #expect(streaming, "no reply streamed")
        let pids = programs.compactMap { set.pid(of: $0) }
        for pid in pids { kill(pid, SIGKILL) }
        for (name, pid) in zip(programs, pids) { #expect(await set.awaitRestart(of: name, replacing: pid), "\(name) not back") }
        return (send, partial)
    }

    /// The bot's entries answering `text`, as snapd holds them, once they settle.
    static func replies(in set: ComposedSet) async throws -> [TranscriptEntry] {
        let bus = try set.busClient("reply-restart-test")
        defer { Task { await bus.close() } }
        var replies: [TranscriptEntry] = []
        _ = await eventually(timeout: .seconds(45)) {
            let entries = (try? await bus.request(TranscriptCommand.self, .init(limit: 50)).entries) ?? []
            replies = entries.filter { if case .bot = $0.sender { $0.content.hasPrefix("You said: word1") } else { false } }
            return !replies.isEmpty && replies.allSatisfy { $0.status.isFinal || $0.status == .incomplete }
        }
        return replies
    }

    @Test func aReplyCutByTheGatewayRestartingWithProtodIsIncompleteAsFarAsItCame() async throws {
        let set = try await ComposedSet(environment: ["TETHER_CHUNK_DELAY": "150"])
        defer { set.stop() }
        let (send, partial) = try await Self.killMidReply(["protod", "gateway"], in: set)
        defer { send.stop() }
        let replies = try await Self.replies(in: set)
        #expect(replies.count == 1, "\(replies.map { "\($0.status.rawValue): \($0.content)" })")
        let reply = try #require(replies.first)
        #expect(reply.status == .incomplete, "\(reply.status)")
        #expect(reply.content.hasPrefix(partial), "kept \(partial.count) characters, shown: \(reply.content)")
        #expect(reply.detail?.contains("restarted") == true, "\(reply.detail ?? "no detail")")
        #expect(try send.waitForExit(timeout: .seconds(60)) == 3, "delivered, no whole reply: \(send.standardError)")
        print(
            "gateway and protod killed mid-reply: one incomplete entry of \(reply.content.count) characters (snapd had kept \(partial.count)): \(reply.detail ?? "")"
        )
    }

    /// A gateway without Tether's additions resumes nothing: the reply is cut as soon as that
    /// is known. Such a gateway drops no repeated id either, so the message, written and not
    /// yet acknowledged when protod died, is written again and may be answered a second time.
    @Test func aReplyCutWithASeedOnlyGatewayIsIncompleteToo() async throws {
        let set = try await ComposedSet.seedPeer(environment: ["TETHER_CHUNK_DELAY": "150"])
        defer { set.stop() }
        let (send, partial) = try await Self.killMidReply(["protod", "gateway"], in: set)
        defer { send.stop() }
        var replies: [TranscriptEntry] = []
        let cut = await eventually(timeout: .seconds(20)) {
            replies = (try? await Self.replies(in: set)) ?? []
            return replies.contains { $0.status == .incomplete }
        }
        let described = replies.map { "\($0.status.rawValue) \($0.content.count): \($0.detail ?? "")" }
        #expect(cut, "\(described)")
        let incomplete = replies.filter { $0.status == .incomplete }
        #expect(incomplete.count == 1, "\(described)")
        #expect(incomplete.first?.content.hasPrefix(partial) == true, "kept \(partial), shown: \(incomplete.first?.content ?? "")")
        #expect(incomplete.first?.detail == "the gateway does not resume sessions: the rest of the reply will not come")
        print("seed-only gateway and protod killed mid-reply: \(described); the gateway received the message \(set.receipts()[Self.text] ?? 0) times")
    }

    @Test func aReplyStreamingWhileProtodAloneRestartsComesWholeFromTheGatewaysReplay() async throws {
        let set = try await ComposedSet(environment: ["TETHER_CHUNK_DELAY": "150"])
        defer { set.stop() }
        let (send, _) = try await Self.killMidReply(["protod"], in: set)
        defer { send.stop() }
        #expect(try send.waitForExit(timeout: .seconds(60)) == 0, "\(send.standardError)")
        let replies = try await Self.replies(in: set)
        #expect(replies.map(\.status) == [.received], "\(replies.map { "\($0.status.rawValue): \($0.content)" })")
        #expect(replies.first?.content == "You said: " + Self.text)
    }
}
