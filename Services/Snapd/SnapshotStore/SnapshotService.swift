public import Logging
public import ServiceLifecycle
public import TetherBus
import TetherSchema
import TetherService
public import TetherStorage
import TetherWire

/// The snapshot store: records the conversation from the bus, catches up from protod's
/// journal on what it missed, keeps each front end's display snapshot and the connection
/// identity, and gives a front end all of it for its first frame.
public struct SnapshotService: Service {
    private let bus: any Bus
    private let store: TranscriptStore
    private let storage: StorageWatch
    private let logger: Logger

    /// protod's journal is asked for the changes snapd missed at start, whenever a revision is
    /// skipped, and at each of protod's heartbeats (every 30 s when nothing happens, within a
    /// second of a change): a change whose message was lost with nothing after it is caught up
    /// by then, and nothing wakes snapd on a timer of its own.
    /// - Parameters:
    ///   - storage: what snapd says of its files (retained on `storage`); by default, that all is well.
    public init(
        bus: any Bus, store: TranscriptStore, storage: StorageCondition = StorageCondition(program: "tether-snapd", path: ".", replaced: []),
        logger: Logger
    ) {
        self.bus = bus
        self.store = store
        self.storage = StorageWatch(storage, bus: bus, logger: logger)
        self.logger = logger
    }

    public func run() async throws {
        storage.announce()
        // Subscribe first, then catch up: a change published in between is in one or the other.
        let updates = try await bus.subscribe(
            to: [
                Topic.conversationMessage.name, Topic.conversationDelivery.name, Topic.conversationStream.name, Topic.conversationSession.name,
                Topic.connectionIdentity.name, Topic.heartbeat.name,
            ])
        let commands = try await bus.serve(endpoint: Endpoints.snapshotStore)
        let (wakeups, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let dispatcher = makeDispatcher()
        wake.yield()
        await withDiscardingTaskGroup { group in
            group.addTask { await dispatcher.run(commands) }
            group.addTask { await record(updates, catchUpDue: { wake.yield() }) }
            group.addTask {
                for await _ in wakeups { await catchUp() }
            }
            try? await gracefulShutdown()
            wake.finish()
            group.cancelAll()
        }
        // Every task that used the store has ended: closed now, not whenever the process lets go of it.
        do {
            try store.close()
        } catch {
            logger.warning("the transcript store did not close cleanly; SQLite recovers its write-ahead log at the next start", metadata: ["error": "\(error)"])
        }
    }

    private func makeDispatcher() -> CommandDispatcher {
        var dispatcher = CommandDispatcher(bus: bus, logger: logger)
        let store = self.store
        let bus = self.bus
        dispatcher.on(TranscriptCommand.self) { request in
            var session = request.session
            if session == nil { session = try await store.conversation()?.sessionKey }
            return try await store.latest(limit: min(request.limit, TranscriptCommand.pageLimit), before: request.before, session: session)
        }
        dispatcher.on(AroundCommand.self) { request in
            try await store.around(request.position, count: request.count, session: request.session)
        }
        dispatcher.on(SearchCommand.self) { request in
            guard let found = try await store.search(request.words, limit: request.limit, before: request.before, session: request.session) else {
                throw CommandError("nothing to search for: \"\(request.words)\" has no letters or digits", code: .refused)
            }
            return found
        }
        dispatcher.on(SnapshotCommand.self) { request in
            let conversation = try await store.conversation()
            let session = request.session ?? conversation?.sessionKey
            return SnapshotCommand.Reply(
                display: try await store.display(for: request.frontEnd), identity: try await store.identity(),
                transcript: try await store.latest(limit: min(request.limit, TranscriptCommand.pageLimit), session: session),
                streaming: try await store.streams().filter { session == nil || $0.session == nil || $0.session == session }, session: conversation)
        }
        dispatcher.on(SaveDisplayCommand.self) { [self] display in
            do {
                try await store.save(display)
                storage.wrote()
            } catch {
                storage.writeFailed(error)
                guard let words = storage.fullDiskWords(for: error) else { throw error }
                throw CommandError("the display was not saved: \(words)", code: .diskFull)
            }
            try? bus.publish(SnapshotSaved(kind: .display, frontEnd: display.frontEnd), on: .snapshotSaved)
            return SaveDisplayCommand.Reply(savedAt: display.savedAt)
        }
        return dispatcher
    }

    private func record(_ updates: BusSubscription, catchUpDue: @Sendable () -> Void) async {
        // The replies streaming, as last kept: each progress is applied to this rather than to
        // the reply read back and decoded from the database every time.
        var streaming: [MessageID: StreamProgress] = [:]
        for await message in updates {
            if message.topic == .heartbeat {
                if message.header.source == "tether-protod" { catchUpDue() }
                continue
            }
            do {
                let applied: TranscriptStore.Applied
                switch message.topic {
                case .conversationMessage:
                    let entry = try message.decode(TranscriptEntry.self)
                    if entry.sender != .user { streaming[entry.id] = nil }
                    applied = try await store.apply(entry)
                case .conversationDelivery:
                    applied = try await store.apply(try message.decode(DeliveryUpdate.self))
                case .conversationStream:
                    let progress = try message.decode(StreamProgress.self)
                    let known = streaming.removeValue(forKey: progress.id)
                    // Kept only once written: after a failed write, or a progress that did not
                    // fit, the next one reads the reply back from the database.
                    streaming[progress.id] = try await store.apply(progress, after: known)
                    continue
                case .conversationSession:
                    _ = try await store.save(try message.decode(ConversationSession.self))
                    continue
                case .connectionIdentity:
                    if try await store.save(try message.decode(ConnectionIdentity.self)) {
                        try? bus.publish(SnapshotSaved(kind: .identity), on: .snapshotSaved)
                    }
                    continue
                default:
                    continue
                }
                storage.wrote()
                if applied.gap { catchUpDue() }
                announceCompaction(applied.compacted)
            } catch {
                // Not kept: the next change shows a gap, and the catch-up fetches it from protod's journal.
                storage.writeFailed(error)
                logger.warning("cannot record a conversation update", metadata: ["bus.topic": "\(message.topic)", "snapd.error": "\(error)"])
            }
        }
    }

    /// Fetches from protod's journal every change after the last one applied in order.
    private func catchUp() async {
        do {
            var (journal, revision) = try await store.followed()
            var fetched = 0
            while true {
                let reply = try await bus.request(JournalCommand.self, .init(after: revision), timeout: .seconds(2), attempts: 1)
                if reply.journal != journal {
                    if journal != nil { logger.notice("protod's journal was made anew: following it from the start") }
                    try await store.restartFollowing(reply.journal)
                    (journal, revision) = (reply.journal, 0)
                    continue
                }
                if let first = reply.changes.first?.revision, first > revision + 1 {
                    logger.warning(
                        "changes \(revision + 1) to \(first - 1) are no longer in protod's journal: the transcript lacks them",
                        metadata: ["journal.oldest": "\(reply.oldest)"])
                }
                guard let last = reply.changes.last?.revision else { break }
                announceCompaction(try await store.apply(journaled: reply.changes, from: reply.journal))
                storage.wrote()
                fetched += reply.changes.count
                revision = last
                if reply.changes.count < JournalCommand.pageLimit { break }
            }
            if fetched > 0 {
                logger.info("caught up with protod's journal", metadata: ["snapd.changes": "\(fetched)", "snapd.revision": "\(revision)"])
                try? bus.publish(SnapshotSaved(kind: .transcript, revision: revision, count: fetched), on: .snapshotSaved)
            }
        } catch {
            storage.writeFailed(error)
            // protod is down or busy, or the disk full: the next wakeup asks again.
            logger.debug("cannot catch up with protod's journal now", metadata: ["snapd.error": "\(error)"])
        }
    }

    private func announceCompaction(_ removed: Int) {
        guard removed > 0 else { return }
        logger.notice("removed the oldest entries to stay within the cap", metadata: ["snapd.removed": "\(removed)", "snapd.cap": "\(store.maximumEntries)"])
        try? bus.publish(SnapshotSaved(kind: .compaction, count: removed), on: .snapshotSaved)
    }
}
