import Foundation
import GRDB
public import TetherSchema
import TetherStorage
import TetherWire

/// Every conversation change protod publishes, numbered: the revision a subscriber uses to
/// notice what it missed, and the log snapd fetches it from (the Clone pattern of the
/// ZeroMQ guide, with protod as the server).
///
/// An SQLite file of its own in WAL mode with `synchronous = NORMAL`: a commit is a write
/// to the file, with no wait for the disk, so a change is journaled before it is published
/// without slowing the chat. A process killed keeps every commit; a power cut may lose the
/// newest, which the outbox (durable on its own) republishes as it sends again.
public final class ConversationJournal: Sendable {
    private let database: DatabaseQueue
    /// Changes kept; older ones are removed as new ones come.
    public let capacity: Int
    /// Names this journal; a new file gets a new name.
    public let name: String

    /// Opens (creating if needed) the journal at `path`, keeping the newest `capacity` changes.
    public init(path: String, capacity: Int = 50_000) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        let migrator = Self.migrator
        try StoredDatabase.refuseNewer(path, what: "the conversation journal", migrator: migrator)
        database = try DatabaseQueue(path: path, configuration: configuration)
        self.capacity = max(1, capacity)
        try migrator.migrate(database)
        name = try database.read { db in try String.fetchOne(db, sql: "SELECT name FROM identity WHERE id = 1") } ?? ""
    }

    /// Closes the journal, its write-ahead log moved into the database and emptied first.
    /// Called once nothing uses it any more.
    public func close() throws {
        try StoredDatabase.close(database)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create journal") { db in
            try db.create(table: "change") { table in
                table.autoIncrementedPrimaryKey("revision")
                table.column("body", .blob).notNull()
            }
            try db.create(table: "identity") { table in
                table.primaryKey("id", .integer)
                table.column("name", .text).notNull()
            }
            try db.execute(sql: "INSERT INTO identity (id, name) VALUES (1, ?)", arguments: [UUID().uuidString.lowercased()])
        }
        return migrator
    }

    /// Opens the journal at `path`; a damaged file is set aside and a new journal (with a new
    /// name, so followers start again from its first revision) started.
    public static func openChecked(path: String, capacity: Int = 50_000) async throws -> (ConversationJournal, ReplacedDatabase?) {
        try await StoredDatabase.open(path, what: "the conversation journal", open: { try ConversationJournal(path: $0, capacity: capacity) }) { _, _ in
            "tether-snapd keeps the transcript and follows the new journal from its start"
        }
    }

    /// Journals a change and returns it with its revision. Synchronous on purpose: the
    /// caller (protod's actor) publishes in revision order only if no other change can be
    /// journaled between this one and its publication.
    public func record<Body: ConversationChangeBody>(_ body: Body) throws -> Body {
        let encoder = BusSchema.encoder
        var body = body
        try database.write { db in
            // Statements prepared once and kept: every change the chat makes comes through here.
            let revision = try Int.fetchOne(db.cachedStatement(sql: "SELECT COALESCE(MAX(revision), 0) + 1 FROM change")) ?? 1
            body.revision = revision
            try db.cachedStatement(sql: "INSERT INTO change (revision, body) VALUES (?, ?)").execute(arguments: [revision, try encoder.encode(body.change)])
            // Trim in steps of a tenth, not on every write.
            if revision % max(1, capacity / 10) == 0 {
                try db.execute(sql: "DELETE FROM change WHERE revision <= ?", arguments: [revision - capacity])
            }
        }
        return body
    }

    /// The newest `limit` transcript entries journaled, oldest first, each as last changed
    /// (delivery updates folded in): what protod knows the transcript holds when it starts.
    public func recentEntries(limit: Int) throws -> [TranscriptEntry] {
        let decoder = BusSchema.decoder
        let bodies = try database.read { db in
            try Data.fetchAll(db, sql: "SELECT body FROM change ORDER BY revision DESC LIMIT ?", arguments: [max(0, limit) * 2])
        }
        var entries: [MessageID: TranscriptEntry] = [:]
        var order: [MessageID] = []
        var statuses: [MessageID: DeliveryStatus] = [:]
        for body in bodies.reversed() {
            guard let change = try? decoder.decode(ConversationChange.self, from: body) else { continue }
            if let entry = change.entry {
                if entries[entry.id] == nil { order.append(entry.id) }
                entries[entry.id] = entry
            }
            if let delivery = change.delivery { statuses[delivery.id] = delivery.status }
        }
        return order.suffix(limit).compactMap { id in
            guard var entry = entries[id] else { return nil }
            if let status = statuses[id], status.rank >= entry.status.rank { entry.status = status }
            return entry
        }
    }

    /// The changes after `revision`, oldest first, at most `limit`.
    public func changes(after revision: Int, limit: Int) throws -> JournalCommand.Reply {
        let decoder = BusSchema.decoder
        return try database.read { db in
            let bodies = try Data.fetchAll(
                db, sql: "SELECT body FROM change WHERE revision > ? ORDER BY revision LIMIT ?",
                arguments: [revision, min(max(0, limit), JournalCommand.pageLimit)])
            let changes = try bodies.map { try decoder.decode(ConversationChange.self, from: $0) }
            let bounds = try Row.fetchOne(
                db, sql: "SELECT COALESCE((SELECT MIN(revision) FROM change), 1) AS oldest, COALESCE((SELECT MAX(revision) FROM change), 0) AS latest")
            return JournalCommand.Reply(changes: changes, journal: name, oldest: bounds?["oldest"] ?? 1, latest: bounds?["latest"] ?? 0)
        }
    }
}
