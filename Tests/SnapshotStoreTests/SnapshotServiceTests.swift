import Foundation
import Logging
import ServiceLifecycle
import SnapshotStore
import Synchronization
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// tether-snapd's service on an in-memory bus, with a real SQLite file in a temporary
/// directory: what it records from the bus, answers and publishes, without processes. The
/// test plays tether-protod (its journal) and a front end.
@Suite struct SnapshotServiceTests {
    /// snapd running on an in-memory bus, beside a stand-in protod serving `journal`. The
    /// bus's commands time out on a clock nobody moves: on a loaded machine a slow answer is
    /// waited for, not taken for a missing one.
    final class Rig: Sendable {
        let bus = InMemoryBus(clock: ManualClock())
        let run: TestRunDirectory
        let front: InMemoryBus.Client
        let protod: InMemoryBus.Client
        let journal = Journal()
        private let group: ServiceGroup
        private let tasks = Mutex<[Task<Void, Never>]>([])

        init() async throws {
            run = try TestRunDirectory()
            front = bus.client("tether")
            protod = bus.client("tether-protod")
            let logger = Logger(label: "snapd-test")
            let service = SnapshotService(bus: bus.client("tether-snapd"), store: try TranscriptStore(path: run.path + "/snapd.sqlite"), logger: logger)
            group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: logger))
            let commands = try await protod.serve(endpoint: Endpoints.protocolHandler)
            let (group, protod, journal) = (self.group, self.protod, self.journal)
            tasks.withLock {
                $0.append(Task { try? await group.run() })
                $0.append(
                    Task {
                        for await command in commands where command.method == JournalCommand.method {
                            guard let request = try? BusSchema.makeDecoder().decode(JournalCommand.Request.self, from: command.body) else { continue }
                            try? protod.reply(to: command, with: journal.reply(after: request.after))
                        }
                    })
            }
            // Until snapd subscribes, what is published is lost to it.
            for await present in try front.subscriberPresence(for: .conversationMessage) where present { break }
        }

        deinit {
            let group = self.group
            Task { await group.triggerGracefulShutdown() }
            tasks.withLock { $0.forEach { $0.cancel() } }
        }

        /// The transcript a front end's first frame would show.
        func snapshot(frontEnd: String = "tether") async throws -> SnapshotCommand.Reply {
            try await front.request(SnapshotCommand.self, .init(frontEnd: frontEnd))
        }
    }

    /// protod's journal, as the stand-in keeps it.
    final class Journal: Sendable {
        private let changes = Mutex<[ConversationChange]>([])

        func add(_ change: ConversationChange) {
            changes.withLock { $0.append(change) }
        }

        func reply(after revision: Int) -> JournalCommand.Reply {
            let all = changes.withLock { $0 }
            return JournalCommand.Reply(
                changes: all.filter { $0.revision > revision }, journal: "journal-1", oldest: all.first?.revision ?? 0, latest: all.last?.revision ?? 0)
        }
    }

    static func entry(_ id: String, status: DeliveryStatus = .delivered, revision: Int? = nil, content: String = "hello") -> TranscriptEntry {
        TranscriptEntry(
            id: MessageID(id), sender: .user, content: content, timestamp: Date(timeIntervalSince1970: 1_700_000_000), status: status,
            revision: revision)
    }

    @Test func itsStorageIsRetainedAtStart() async throws {
        let rig = try await Rig()
        let reports = try await BusRecorder<StorageReport>(bus: rig.front, topic: .storage)
        let report = try await reports.waitFor(timeout: .seconds(30)) { _ in true }.value
        #expect(report.program == "tether-snapd" && report.state == .ok && !report.hasProblem)
    }

    @Test func aMessageAndItsDeliveryOnTheBusAreInTheNextSnapshot() async throws {
        let rig = try await Rig()
        try rig.protod.publish(Self.entry("a", status: .sent), on: .conversationMessage)
        try rig.protod.publish(DeliveryUpdate(id: MessageID("a"), status: .delivered), on: .conversationDelivery)
        #expect(try await eventually(timeout: .seconds(30)) { try await rig.snapshot().transcript.entries.first?.status == .delivered })
        #expect(try await rig.snapshot().transcript.entries.map(\.content) == ["hello"])
        // A late, older status does not take it back.
        try rig.protod.publish(DeliveryUpdate(id: MessageID("a"), status: .sent), on: .conversationDelivery)
        try rig.protod.publish(Self.entry("b", status: .queued, content: "after"), on: .conversationMessage)
        #expect(try await eventually(timeout: .seconds(30)) { try await rig.snapshot().transcript.entries.count == 2 })
        #expect(try await rig.snapshot().transcript.entries.map(\.status) == [.delivered, .queued])
    }

    @Test func aDisplaySavedIsAnsweredAnnouncedAndGivenBack() async throws {
        let rig = try await Rig()
        let saved = try await BusRecorder<SnapshotSaved>(bus: rig.front, topic: .snapshotSaved)
        let display = DisplaySnapshot(
            frontEnd: "tether", screen: ["hello"], scrollOffset: 2, draft: "half a thought", history: ["hello"],
            savedAt: Date(timeIntervalSince1970: 1_700_000_000))
        let reply = try await rig.front.request(SaveDisplayCommand.self, display)
        #expect(reply.savedAt == display.savedAt)
        _ = try await saved.waitFor(timeout: .seconds(30)) { $0.kind == .display && $0.frontEnd == "tether" }
        #expect(try await rig.snapshot().display == display)
        #expect(try await rig.snapshot(frontEnd: "tether watch").display == nil, "each kind of front end has its own")
    }

    @Test func theConnectionIdentityIsKeptAndAnnouncedOnceForEachChange() async throws {
        let rig = try await Rig()
        let saved = try await BusRecorder<SnapshotSaved>(bus: rig.front, topic: .snapshotSaved)
        let first = ConnectionIdentity(url: "wss://gateway/one", authMethod: "bearer-token", keyID: "/run/token")
        let second = ConnectionIdentity(url: "wss://gateway/two", authMethod: "bearer-token", keyID: "/run/token")
        let connd = rig.bus.client("tether-connd")
        try connd.retain(first, on: .connectionIdentity)
        try connd.retain(first, on: .connectionIdentity)
        try connd.retain(second, on: .connectionIdentity)
        #expect(await eventually(timeout: .seconds(30)) { await saved.entries.filter { $0.value.kind == .identity }.count == 2 })
        #expect(try await rig.snapshot().identity == second)
        #expect(await saved.entries.filter { $0.value.kind == .identity }.count == 2, "the same identity again is not a change")
    }

    @Test func changesMissedOnTheBusAreFetchedFromProtodsJournal() async throws {
        let rig = try await Rig()
        let saved = try await BusRecorder<SnapshotSaved>(bus: rig.front, topic: .snapshotSaved)
        for revision in 1...3 {
            rig.journal.add(ConversationChange(revision: revision, entry: Self.entry("m\(revision)", revision: revision, content: "message \(revision)")))
        }
        // Only the last reaches snapd on the bus: revisions 1 and 2 are a gap.
        try rig.protod.publish(Self.entry("m3", revision: 3, content: "message 3"), on: .conversationMessage)
        let caughtUp = try await saved.waitFor(timeout: .seconds(30)) { $0.kind == .transcript }.value
        #expect(caughtUp.revision == 3)
        let reply = try await rig.snapshot()
        // The store keeps entries in the order they reached it: those caught up come after the one that showed the gap.
        #expect(reply.transcript.entries.map(\.content).sorted() == ["message 1", "message 2", "message 3"])
        #expect(reply.transcript.revision == 3)
    }
}
