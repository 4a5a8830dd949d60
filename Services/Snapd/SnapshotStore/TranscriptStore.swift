import Foundation
import GRDB
public import TetherSchema
import TetherWire

/// The transcript in SQLite (WAL): every message of the conversation with its status.
public struct TranscriptStore: Sendable {
    private let database: DatabasePool

    /// Opens (creating and migrating if needed) the transcript at `path`.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        database = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(database)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create transcript") { db in
            try db.create(table: "transcript") { table in
                table.autoIncrementedPrimaryKey("position")
                table.column("id", .text).notNull().unique()
                table.column("senderType", .text).notNull()
                table.column("senderName", .text)
                table.column("content", .text).notNull()
                table.column("timestamp", .datetime).notNull()
                table.column("status", .text).notNull()
                table.column("inReplyTo", .text)
            }
        }
        return migrator
    }

    /// Adds an entry, or updates the stored one with the same id; a status never goes back
    /// (an update that arrives late does not undo a newer one).
    public func upsert(_ entry: TranscriptEntry) async throws {
        try await database.write { db in
            let senderType: String
            let senderName: String?
            switch entry.sender {
            case .user: (senderType, senderName) = ("user", nil)
            case .bot(let name): (senderType, senderName) = ("bot", name)
            }
            if let row = try Row.fetchOne(db, sql: "SELECT status FROM transcript WHERE id = ?", arguments: [entry.id.value]) {
                let stored = DeliveryStatus(rawValue: row["status"]) ?? .queued
                let status = entry.status.rank >= stored.rank ? entry.status : stored
                try db.execute(
                    sql: "UPDATE transcript SET content = ?, status = ?, inReplyTo = COALESCE(?, inReplyTo), senderName = COALESCE(?, senderName) WHERE id = ?",
                    arguments: [entry.content, status.rawValue, entry.inReplyTo?.value, senderName, entry.id.value])
            } else {
                try db.execute(
                    sql: "INSERT INTO transcript (id, senderType, senderName, content, timestamp, status, inReplyTo) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    arguments: [entry.id.value, senderType, senderName, entry.content, entry.timestamp, entry.status.rawValue, entry.inReplyTo?.value])
            }
        }
    }

    /// Moves an entry's status forward; an unknown id or an older status changes nothing.
    public func update(_ delivery: DeliveryUpdate) async throws {
        try await database.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT status FROM transcript WHERE id = ?", arguments: [delivery.id.value]) else { return }
            let stored = DeliveryStatus(rawValue: row["status"]) ?? .queued
            guard delivery.status.rank >= stored.rank else { return }
            try db.execute(sql: "UPDATE transcript SET status = ? WHERE id = ?", arguments: [delivery.status.rawValue, delivery.id.value])
        }
    }

    /// The latest `limit` entries before position `before` (all positions when nil), oldest
    /// first, and the position of the oldest one returned when older entries remain.
    public func latest(limit: Int, before: Int? = nil) async throws -> (entries: [TranscriptEntry], nextBefore: Int?) {
        try await database.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT * FROM (SELECT * FROM transcript WHERE position < ? ORDER BY position DESC LIMIT ?) ORDER BY position ASC",
                arguments: [before ?? Int.max, max(0, limit)])
            let entries = rows.map { row in
                let senderType: String = row["senderType"]
                let sender: Sender = senderType == "bot" ? .bot(name: row["senderName"] ?? "") : .user
                let inReplyTo: String? = row["inReplyTo"]
                return TranscriptEntry(
                    id: MessageID(row["id"]), sender: sender, content: row["content"], timestamp: row["timestamp"],
                    status: DeliveryStatus(rawValue: row["status"]) ?? .queued, inReplyTo: inReplyTo.map(MessageID.init))
            }
            guard let oldest: Int = rows.first?["position"] else { return (entries, nil) }
            let older = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM transcript WHERE position < ?)", arguments: [oldest]) ?? false
            return (entries, older ? oldest : nil)
        }
    }
}
