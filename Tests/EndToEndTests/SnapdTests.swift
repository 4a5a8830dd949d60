import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// tether-snapd's transcript through real processes and a real SQLite file.
@Suite(.serialized) struct SnapdTests {
    @Test func snapdKilledWhileWritingLosesNothingCommitted() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "snapd-test", runDirectory: set.run.runDirectory, logger: Logger(label: "snapd-test"))
        // Once a confirmed subscription has made the round trip, this publisher knows snapd's subscriptions.
        _ = try await client.subscribe(to: [Topic.conversationMessage.name], confirm: true)
        // A first batch, all recorded.
        let first = (1...200).map { index in
            TranscriptEntry(id: MessageID("first-\(index)"), sender: .bot(name: "Opta"), content: "first \(index)", timestamp: Date(), status: .received)
        }
        for entry in first { try client.publish(entry, on: .conversationMessage) }
        let recorded = await eventually(timeout: .seconds(20)) {
            ((try? await client.request(TranscriptCommand.self, .init(limit: 1000)).entries.count) ?? 0) >= first.count
        }
        #expect(recorded, "snapd did not record the first batch")

        // A second batch, with snapd killed while it writes it.
        let snapd = try #require(set.pid(of: "snapd"))
        for index in 1...500 {
            try client.publish(
                TranscriptEntry(id: MessageID("second-\(index)"), sender: .user, content: "second \(index)", timestamp: Date(), status: .queued),
                on: .conversationMessage)
            if index == 100 { kill(snapd, SIGKILL) }
        }
        let restarted = await set.awaitRestart(of: "snapd", replacing: snapd)
        #expect(restarted)
        let entries = try await client.request(TranscriptCommand.self, .init(limit: 1000)).entries
        let ids = Set(entries.map(\.id.value))
        #expect(first.allSatisfy { ids.contains($0.id.value) }, "a committed entry was lost")
        // Entries of the second batch that were committed are whole, in order.
        let second = entries.filter { $0.id.value.hasPrefix("second-") }.map { Int($0.id.value.dropFirst("second-".count))! }
        #expect(second == second.sorted())
        print("snapd killed after \(second.count) of the second batch's 500 entries were committed; all \(first.count) of the first kept")

        // The file itself is sound.
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        check.arguments = ["sqlite3", set.run.path + "/snapd.sqlite", "PRAGMA integrity_check;"]
        let output = Pipe()
        check.standardOutput = output
        if (try? check.run()) != nil {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            check.waitUntilExit()
            #expect(text.trimmingCharacters(in: .whitespacesAndNewlines) == "ok")
        }
        await client.close()
    }

    /// `tether search` through the set: the conversation's words found in snapd's file, newest
    /// first, also after snapd was killed while entries came; words with nothing to find say so.
    @Test func tetherSearchFindsStoredMessagesAlsoAfterSnapdWasKilled() async throws {
        let set = try await ComposedSet(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        #expect(try set.tether(["send", "please deploy the café build"]).status == 0)
        #expect(try set.tether(["send", "and the docs too"]).status == 0)
        let found = try set.tether(["search", "Cafe", "BUILD"])
        #expect(found.status == 0, "\(found.standardError)")
        let lines = found.standardOutput.split(separator: "\n")
        #expect(lines.count == 2, "the message and its reply: \(found.standardOutput)")
        #expect(lines.first?.hasSuffix("Opta: You said: please deploy the café build") == true, "newest first: \(found.standardOutput)")
        #expect(lines.last?.hasSuffix("You: please deploy the café build") == true, "\(found.standardOutput)")

        let snapd = try #require(set.pid(of: "snapd"))
        kill(snapd, SIGKILL)
        #expect(try set.tether(["send", "--wait", "30", "sent while snapd restarts: deployment notes"]).status == 0)
        #expect(await set.awaitRestart(of: "snapd", replacing: snapd))
        #expect(
            await eventually(timeout: .seconds(20)) {
                ((try? set.tether(["search", "deployment"]))?.standardOutput.split(separator: "\n").count ?? 0) == 2
            }, "what came while snapd was down is found once it caught up")
        let json = try set.tether(["search", "--json", "--limit", "1", "deploy"])
        let reply = try BusSchema.makeDecoder().decode(SearchCommand.Reply.self, from: Data(json.standardOutput.utf8))
        #expect(reply.hits.count == 1 && reply.nextBefore != nil, "\(json.standardOutput)")
        #expect(reply.hits.first?.excerpt.contains("\u{2}deployment\u{3}") == true, "\(json.standardOutput)")

        // Each hit in its conversation: the message before and after it, the hit marked.
        let around = try set.tether(["search", "--context", "1", "docs"])
        #expect(around.status == 0, "\(around.standardError)")
        print("tether search --context 1 docs:\n\(around.standardOutput)")
        let groups = around.standardOutput.split(separator: "\n--\n").map { $0.split(separator: "\n").map(String.init) }
        #expect(groups.count == 2, "the message and its reply: \(around.standardOutput)")
        #expect(
            groups.last.map { [$0.count, $0.firstIndex { $0.hasPrefix("▶") } ?? -1] } == [3, 1]
                && groups.last?[0].hasSuffix("Opta: You said: please deploy the café build") == true
                && groups.last?[1].hasSuffix("You: and the docs too") == true && groups.last?[2].hasSuffix("Opta: You said: and the docs too") == true,
            "\(around.standardOutput)")

        let none = try set.tether(["search", "kubernetes"])
        #expect(none.status == 1 && none.standardOutput.isEmpty, "\(none.standardOutput)")
        #expect(none.standardError.contains("no stored message holds kubernetes"), "\(none.standardError)")
        let nothing = try set.tether(["search", "?!"])
        #expect(nothing.status == 1 && nothing.standardError.contains("nothing to search for"), "\(nothing.standardError)")

        // /search in the terminal UI: the same hits, newest first, until the next key.
        guard Tmux.available else { return }
        let ui = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 120, rows: 30, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        _ = try await ui.waitFor("You: sent while snapd restarts")
        try ui.type("/search cafe")
        try ui.press("Enter")
        let shown = try await ui.waitFor("Found, newest first: 1–2 shows one in its conversation", "Opta: You said: please deploy the café build")
        print("/search in the terminal UI:\n\(shown)")
        #expect(shown.contains(" 2  ") && shown.contains("You: please deploy the café build"), "\(shown)")
        // The second hit, the message sent, in its conversation: the reply after it, marked.
        try ui.type("2")
        let context = try await ui.waitFor("The message found in its conversation (any key closes):", " ▶ ")
        print("the hit in its conversation:\n\(context)")
        let marked = context.split(separator: "\n").first { $0.hasPrefix(" ▶ ") }.map(String.init) ?? ""
        #expect(marked.hasSuffix("You: please deploy the café build"), "\(context)")
        #expect(context.contains("Opta: You said: and the docs too"), "the messages after it: \(context)")
        try ui.type("/search kubernetes")
        try ui.press("Enter")
        _ = try await ui.waitFor("no stored message holds kubernetes")
    }

    @Test func frontEndStartedAfterTenThousandMessagesDrawsThemInItsFirstFrame() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "snapd-test", runDirectory: set.run.runDirectory, logger: Logger(label: "snapd-test"))
        _ = try await client.subscribe(to: [Topic.conversationMessage.name], confirm: true)
        let count = 10_000
        let written = ContinuousClock.now
        for index in 1...count {
            try client.publish(
                TranscriptEntry(id: MessageID("m-\(index)"), sender: .bot(name: "Opta"), content: "entry \(index)", timestamp: Date(), status: .received),
                on: .conversationMessage)
        }
        let stored = await eventually(timeout: .seconds(60)) {
            (try? await client.request(TranscriptCommand.self, .init(limit: 1)).entries.first?.id.value) == "m-\(count)"
        }
        #expect(stored, "snapd did not store \(count) entries")
        print("snapd stored \(count) entries in \(written.duration(to: .now))")

        let started = ContinuousClock.now
        let watch = try ChildProcess(
            Programs.path("tether"), ["watch", "--history", "\(count)", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "watch")
        defer { watch.stop() }
        let drawn = await eventually(timeout: .seconds(30)) { watch.standardOutput.contains("Opta: entry \(count)\n") }
        let firstFrame = started.duration(to: .now)
        #expect(drawn, "the stored transcript was not drawn")
        let lines = watch.standardOutput.split(separator: "\n")
        #expect(lines.count >= count)
        #expect(lines.first?.hasSuffix("Opta: entry 1") == true)
        print("a front end started after \(count) messages drew them all \(firstFrame) after it started")
        await client.close()
    }

    @Test func whatWasPublishedWhileSnapdWasDownIsFetchedFromProtodsJournal() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "snapd-test", runDirectory: set.run.runDirectory, logger: Logger(label: "snapd-test"))
        let saved = try await TopicRecorder(bus: client, prefixes: [Topic.snapshotSaved.name])
        let before = try set.tether(["send", "before"])
        #expect(before.status == 0)

        // snapd is killed; while compose restarts it, 30 messages are sent, delivered and answered.
        let snapd = try #require(set.pid(of: "snapd"))
        kill(snapd, SIGKILL)
        let killed = ContinuousClock.now
        var ids: [MessageID] = []
        for index in 1...30 {
            let id = MessageID.random()
            ids.append(id)
            _ = try await client.request(SendMessageCommand.self, .init(id: id, content: "while snapd was down \(index)"))
        }
        print("30 messages accepted \(killed.duration(to: .now)) after snapd was killed")
        #expect(await set.awaitRestart(of: "snapd", replacing: snapd))

        // Every message and every reply, each with its final status, without one more publication.
        let complete = await eventually(timeout: .seconds(20)) {
            guard let entries = try? await client.request(TranscriptCommand.self, .init(limit: 1000)).entries else { return false }
            let delivered = Set(entries.filter { $0.status == .delivered }.map(\.id))
            let replies = Set(entries.filter { $0.sender != .user && $0.status == .received }.map(\.content))
            return ids.allSatisfy { delivered.contains($0) } && (1...30).allSatisfy { replies.contains("You said: while snapd was down \($0)") }
        }
        #expect(complete, "snapd's transcript lacks what was published while it was down")
        print("snapd restarted and held all 30 messages, delivered and answered, \(killed.duration(to: .now)) after it was killed")
        let caughtUp = try await saved.waitFor(.snapshotSaved, as: SnapshotSaved.self) { $0.kind == .transcript }
        let catchUp = try #require(caughtUp.decode(SnapshotSaved.self))
        #expect((catchUp.count ?? 0) > 0)
        print("catch-up from protod's journal: \(catchUp.count ?? 0) changes, up to revision \(catchUp.revision ?? 0)")

        // The revision in the reply lets a front end drop what the snapshot already holds.
        let reply = try await client.request(TranscriptCommand.self, .init(limit: 1))
        #expect(reply.revision >= (catchUp.revision ?? 0))
        await client.close()
    }

    @Test func theTranscriptIsCappedByCompactingTheOldest() async throws {
        let set = try await ComposedSet(environment: ["TETHER_TRANSCRIPT_LIMIT": "100"])
        defer { set.stop() }
        let client = try BusClient(source: "snapd-test", runDirectory: set.run.runDirectory, logger: Logger(label: "snapd-test"))
        let saved = try await TopicRecorder(bus: client, prefixes: [Topic.snapshotSaved.name])
        _ = try await client.subscribe(to: [Topic.conversationMessage.name], confirm: true)
        for index in 1...250 {
            try client.publish(
                TranscriptEntry(id: MessageID("m-\(index)"), sender: .bot(name: "Opta"), content: "entry \(index)", timestamp: Date(), status: .received),
                on: .conversationMessage)
        }
        let stored = await eventually(timeout: .seconds(20)) {
            (try? await client.request(TranscriptCommand.self, .init(limit: 1)).entries.first?.id.value) == "m-250"
        }
        #expect(stored)
        let entries = try await client.request(TranscriptCommand.self, .init(limit: 1000))
        #expect((100...110).contains(entries.entries.count), "\(entries.entries.count) entries kept with a cap of 100")
        #expect(entries.nextBefore == nil)
        let compaction = try await saved.waitFor(.snapshotSaved, as: SnapshotSaved.self) { $0.kind == .compaction }
        #expect((compaction.decode(SnapshotSaved.self)?.count ?? 0) > 0)
        #expect(set.log(of: "snapd").contains("removed the oldest entries"))
        print("cap 100, 250 written: \(entries.entries.count) kept, from \(entries.entries.first?.content ?? "?") to \(entries.entries.last?.content ?? "?")")
        await client.close()
    }

    @Test func displaySnapshotAndIdentitySurviveSnapdBeingKilled() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "snapd-test", runDirectory: set.run.runDirectory, logger: Logger(label: "snapd-test"))
        let display = DisplaySnapshot(frontEnd: "tether", screen: ["You: hi", "Opta: 你好 👋"], scrollOffset: 4, draft: "unsent", history: ["hi"])
        _ = try await client.request(SaveDisplayCommand.self, display)
        let identityKept = await eventually { (try? await client.request(SnapshotCommand.self, .init(frontEnd: "tether")).identity) != nil }
        #expect(identityKept, "snapd did not keep connd's identity")
        #expect(try await set.killAndAwaitRestart("snapd"))

        let frame = try await client.request(SnapshotCommand.self, .init(frontEnd: "tether"))
        #expect(frame.display?.screen == display.screen)
        #expect(frame.display?.draft == "unsent")
        #expect(frame.display?.scrollOffset == 4)
        let identity = try #require(frame.identity)
        #expect(identity.url == "ws://127.0.0.1:\(set.port)/ws")
        #expect(identity.authMethod == "bearer-token")
        // Never the secret: the database holds the token file's path, not the token.
        let database = try Data(contentsOf: URL(fileURLWithPath: set.run.path + "/snapd.sqlite"))
        #expect(database.range(of: Data(try set.gatewayToken.utf8)) == nil, "the token is in snapd's database")
        await client.close()
    }

    @Test func aFrontEndStartingDuringAStreamedReplyGetsItAsFarAsItCame() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let client = try BusClient(source: "snapd-test", runDirectory: set.run.runDirectory, logger: Logger(label: "snapd-test"))
        try await set.faults(#"{"frameDelayMilliseconds": 200}"#)
        let id = MessageID.random()
        _ = try await client.request(SendMessageCommand.self, .init(id: id, content: "a reply that takes its time"))
        let partial = await eventually(timeout: .seconds(10)) {
            guard let streaming = try? await client.request(SnapshotCommand.self, .init(frontEnd: "tether")).streaming.first else { return false }
            return !streaming.isFinal && "You said: a reply that takes its time".hasPrefix(streaming.text) && !streaming.text.isEmpty
        }
        #expect(partial, "snapd's snapshot had no reply in progress")
        let whole = await eventually(timeout: .seconds(20)) {
            guard let frame = try? await client.request(SnapshotCommand.self, .init(frontEnd: "tether")) else { return false }
            return frame.streaming.isEmpty && frame.transcript.entries.contains { $0.content == "You said: a reply that takes its time" }
        }
        #expect(whole, "the finished reply did not replace the one in progress")
        await client.close()
    }
}
