import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// Today's gateway (`--openclaw current`) gives a cursor with its history: through the whole
/// set, a reconnect fetches only what was missed, read from the frames on the bus.
@Suite(.serialized) struct CatchUpEndToEndTests {
    /// The `chat.history` requests protod wrote, and the answers the gateway gave them.
    static func lookups(_ out: [WireFrame], _ answers: [WireFrame]) -> [(request: [String: Any], answer: [String: Any]?, bytes: Int)] {
        func object(_ text: String) -> [String: Any]? { try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] }
        return out.compactMap { frame in
            guard let request = object(frame.text), request["method"] as? String == "chat.history", let id = request["id"] as? String else { return nil }
            let answer = answers.first { object($0.text)?["id"] as? String == id }
            return (request, answer.flatMap { object($0.text) }, answer?.text.utf8.count ?? 0)
        }
    }

    @Test func aReconnectFetchesOnlyWhatItMissed() async throws {
        let set = try await ComposedSet.openClaw(release: "current", protocols: "release")
        defer { set.stop() }
        let bus = try set.busClient("catch-up-test")
        defer { Task { await bus.close() } }
        let out = try await BusRecorder<WireFrame>(bus: bus, topic: .wireOutbound)
        let inbound = try await BusRecorder<WireFrame>(bus: bus, topic: .wireInbound)
        for index in 1...8 {
            let sent = try set.tether(["send", "exchange \(index)"])
            #expect(sent.status == 0, "exit \(sent.status ?? -1): \(sent.standardError)")
        }
        // The session is quiet: protod renews its cursor with one entry cut to one character.
        let renewed = await eventually(timeout: .seconds(20)) {
            await Self.lookups(out.entries.map(\.value), inbound.entries.map(\.value)).contains { lookup in
                (lookup.request["params"] as? [String: Any])?["maxChars"] as? Int == 1 && lookup.answer != nil
            }
        }
        #expect(renewed, "the cursor was never renewed")
        // Tether's connection stops reading; another client's exchange happens meanwhile, and
        // the connection is then lost with whatever the gateway had sent it.
        let connd = try #require(set.pid(of: "connd"))
        kill(connd, SIGSTOP)
        let other = try await OtherOpenClawClient(port: set.port, token: try set.gatewayToken, displayName: "Phone")
        defer { other.stop() }
        _ = other.send("while you were away")
        let answered = await eventually(timeout: .seconds(20)) { set.openClawTranscript().contains { $0.text == "You said: while you were away" } }
        #expect(answered)
        // Request ids start again on each connection: an answer is looked for among those that
        // came after the connection was lost, or the first connection's `history:1` is taken.
        let (before, inboundBefore) = (await out.entries.count, await inbound.entries.count)
        kill(connd, SIGKILL)
        #expect(await set.awaitRestart(of: "connd", replacing: connd))
        let caughtUp = await eventually(timeout: .seconds(20)) {
            let entries = (try? await bus.request(TranscriptCommand.self, .init(limit: 100)).entries) ?? []
            return entries.contains { $0.content == "You said: while you were away" }
        }
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 100)).entries
        #expect(caughtUp, "\(entries.map(\.content))")
        #expect(entries.count { $0.content == "while you were away" } == 1, "added twice")
        let after = Self.lookups(Array(await out.entries.map(\.value)[before...]), Array(await inbound.entries.map(\.value)[inboundBefore...]))
        let first = try #require(after.first, "no lookup after the reconnect")
        let params = first.request["params"] as? [String: Any] ?? [:]
        #expect(params["cursor"] is String && params["limit"] == nil, "a page was fetched: \(params)")
        #expect(first.answer?["ok"] as? Bool == true)
        let payload = first.answer?["payload"] as? [String: Any] ?? [:]
        #expect(payload["kind"] as? String == "delta", "\(payload)")
        let gap = (payload["messages"] as? [[String: Any]] ?? []).compactMap { ($0["message"] as? [String: Any])?["role"] as? String }
        #expect(gap == ["user", "assistant"], "the catch-up carried more than the gap: \(gap)")
        print("after 8 exchanges and a reconnect: \(after.count) lookup(s), \(after.map(\.bytes)) bytes answered; the gap: \(gap)")
    }
}
