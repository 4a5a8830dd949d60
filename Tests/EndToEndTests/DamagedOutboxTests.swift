import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// An outbox found damaged at start loses nothing another store still holds: what the
/// conversation journal or the transcript shows was never confirmed goes back into the new
/// outbox under its own id and is sent once; what cannot be sent again whole is named lost,
/// message by message, and the health says so. Through the real programs and files.
@Suite(.serialized) struct DamagedOutboxTests {
    typealias Damage = StorageFaultTests.Damage

    /// The transcript's own messages as snapd holds them, by content.
    static func ownMessages(in set: ComposedSet) async throws -> [String: TranscriptEntry] {
        let bus = try set.busClient("damaged-outbox-test")
        defer { Task { await bus.close() } }
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 200)).entries
        return Dictionary(entries.filter { $0.sender == .user }.map { ($0.content, $0) }) { first, _ in first }
    }

    /// Sends `texts` with the connection suspended, so that each waits in the outbox; then stops the set.
    static func queueAndStop(_ texts: [String], in set: ComposedSet, attaching image: String? = nil) throws {
        #expect(try set.tether(["suspend"]).status == 0)
        for text in texts {
            let queued = try set.tether(["send", "--timeout", "1", text])
            #expect(queued.standardError.contains("queued"), "\(text): \(queued.standardError)")
        }
        if let image {
            let queued = try set.tether(["send", "--timeout", "1", "--attach", image, "with an image"])
            #expect(queued.standardError.contains("queued"), "with an image: \(queued.standardError)")
        }
        set.stop()
    }

    @Test(arguments: Damage.allCases)
    func everyQueuedMessageComesBackFromTheJournalAndIsSentOnce(_ damage: Damage) async throws {
        try await Self.recoverFromTheJournal(damage, environment: [:])
    }

    /// A gateway without Tether's additions drops no repeated id: each message is still sent once.
    @Test func everyQueuedMessageComesBackFromTheJournalAndIsSentOnceToASeedOnlyGateway() async throws {
        try await Self.recoverFromTheJournal(.zeroed, environment: ["TETHER_GATEWAY_FAULTS": #"{"strictSeed": true}"#])
    }

    static func recoverFromTheJournal(_ damage: Damage, environment: [String: String]) async throws {
        let first = try await ComposedSet(environment: environment)
        #expect(try first.tether(["send", "before the damage"]).status == 0)
        let texts = (1...5).map { "waiting \(damage.rawValue) \($0)" }
        try Self.queueAndStop(texts, in: first)
        try damage.apply(to: first.statePath + "/protod.sqlite")

        let set = try await ComposedSet(environment: environment, reusing: first)
        defer { set.stop() }
        let said = try set.tether(["status"]).standardOutput
        #expect(said.contains("storage: the outbox (\(set.statePath)/protod.sqlite) was damaged ("), "\(said)")
        #expect(said.contains("put back under their own ids") || said.contains("5 messages read back from it"), "\(said)")
        let arrived = await eventually(timeout: .seconds(30)) { texts.allSatisfy { set.receipts()[$0, default: 0] >= 1 } }
        #expect(arrived, "not all arrived: \(set.receipts())")
        try await Task.sleep(for: .seconds(1))
        for text in texts { #expect(set.receipts()[text] == 1, "\(text) received \(set.receipts()[text] ?? 0) times") }
        let settled = await eventually(timeout: .seconds(15)) {
            let own = (try? await Self.ownMessages(in: set)) ?? [:]
            return texts.allSatisfy { own[$0]?.status == .delivered }
        }
        let own = try await Self.ownMessages(in: set)
        #expect(settled, "\(texts.map { "\($0): \(own[$0]?.status.rawValue ?? "absent")" })")
        print("outbox \(damage.rawValue)\(environment.isEmpty ? "" : ", seed-only gateway"): 5 of 5 queued messages delivered once; protod said:\n\(said)")
    }

    @Test func withTheJournalGoneTooTheTranscriptGivesThemBackAndAnImageMessageIsNamedLost() async throws {
        let environment = ["TETHER_DIALECT": "openclaw", "TETHER_GATEWAY_PROTOCOLS": "3-4"]
        let first = try await ComposedSet(environment: environment)
        #expect(try first.tether(["send", "before the damage"]).status == 0)
        let image = first.run.path + "/cat.png"
        try ImageAttachmentTests.write(ImageAttachmentTests.png(2_000), to: image)
        let texts = (1...3).map { "waiting for the transcript \($0)" }
        try Self.queueAndStop(texts, in: first, attaching: image)
        for store in ["protod.sqlite", "conversation.sqlite"] { try Damage.zeroed.apply(to: first.statePath + "/" + store) }

        let set = try await ComposedSet(environment: environment, reusing: first)
        defer { set.stop() }
        let arrived = await eventually(timeout: .seconds(30)) { texts.allSatisfy { set.receipts()[$0, default: 0] >= 1 } }
        #expect(arrived, "not all arrived: \(set.receipts())")
        try await Task.sleep(for: .seconds(1))
        for text in texts { #expect(set.receipts()[text] == 1, "\(text) received \(set.receipts()[text] ?? 0) times") }
        #expect(set.receipts()["with an image"] == nil, "sent without its image")

        let settled = await eventually(timeout: .seconds(15)) {
            let own = (try? await Self.ownMessages(in: set)) ?? [:]
            return texts.allSatisfy { own[$0]?.status == .delivered } && own["with an image"]?.status == .lost
        }
        let own = try await Self.ownMessages(in: set)
        #expect(settled, "\((texts + ["with an image"]).map { "\($0): \(own[$0]?.status.rawValue ?? "absent")" })")
        // Every front end: the plain transcript, the status, the terminal UI.
        let watch = try await DesktopStoresTests.transcript(of: set, holding: ["[lost]"])
        let line = watch.split(separator: "\n").first { $0.contains("you: with an image") }
        #expect(line?.hasSuffix("[lost]") == true, "\(watch)")
        // Each message once: protod, whose journal was made anew, knows the gateway's entries from the transcript's ids.
        let bus = try set.busClient("damaged-outbox-test")
        defer { Task { await bus.close() } }
        let contents = try await bus.request(TranscriptCommand.self, .init(limit: 200)).entries.map(\.content)
        #expect(Set(contents).count == contents.count, "\(contents)")
        let status = try set.tether(["status"]).standardOutput
        #expect(status.contains("health: degraded"), "\(status)")
        // The words follow what the transcript gave back after the outbox was opened.
        #expect(status.contains("the transcript held 4 messages never confirmed, put back under their own ids"), "\(status)")
        #expect(status.contains("1 of them cannot be sent again (images kept in the outbox alone) and is marked lost; 3 messages to be sent"), "\(status)")
        #expect(!status.contains("health: healthy"), "\(status)")
        if Tmux.available {
            let ui = try Tmux(
                [Programs.path("tether"), "--run-dir", set.run.path], columns: 200, rows: 30, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
            _ = try await ui.waitFor("✗ lost with a damaged outbox")
        }
        print("outbox and journal zeroed: 3 of 3 text messages back from the transcript and delivered once; the image message named lost:\n\(status)")
    }
}
