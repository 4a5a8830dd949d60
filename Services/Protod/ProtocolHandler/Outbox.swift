public import Foundation
public import GRDB
public import TetherWire

/// A message in the outbox.
public struct OutboxMessage: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "outbox"

    public enum Status: String, Codable, Sendable {
        case queued
        case sent
        case delivered
        case failed
    }

    /// The front end's id for the message; it never changes, across retries and restarts.
    public var id: String
    /// The order messages were accepted in, from 1.
    public var sequence: Int
    public var content: String
    public var createdAt: Date
    public var status: Status
    /// How many times the message was written to the gateway.
    public var attempts: Int
    public var lastSentAt: Date?
    /// The connection it was last written to.
    public var sentEpoch: Int?
    /// The connection it was last written to, unique across connd restarts.
    public var sentConnection: String?

    public var messageID: MessageID { MessageID(id) }
}

/// The durable outgoing queue: an SQLite file. A message is acknowledged to the front end
/// only once committed here, and stays until the gateway acknowledges it.
public struct Outbox: Sendable {
    private let database: DatabaseQueue

    /// Opens (creating and migrating if needed) the outbox at `path`.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        database = try DatabaseQueue(path: path, configuration: configuration)
        try Self.migrator.migrate(database)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create outbox") { db in
            try db.create(table: "outbox") { table in
                table.primaryKey("id", .text)
                table.column("sequence", .integer).notNull().unique()
                table.column("content", .text).notNull()
                table.column("createdAt", .datetime).notNull()
                table.column("status", .text).notNull()
                table.column("attempts", .integer).notNull().defaults(to: 0)
                table.column("lastSentAt", .datetime)
                table.column("sentEpoch", .integer)
            }
        }
        migrator.registerMigration("add sentConnection") { db in
            try db.alter(table: "outbox") { table in
                table.add(column: "sentConnection", .text)
            }
        }
        migrator.registerMigration("create session") { db in
            // The gateway session and the last server sequence processed, for resuming it.
            try db.create(table: "session") { table in
                table.primaryKey("id", .integer)
                table.column("sessionID", .text)
                table.column("lastSequence", .integer).notNull()
            }
        }
        return migrator
    }

    /// Commits a new message; returns the stored message and whether it was new (an id
    /// already in the outbox is not added twice).
    public func enqueue(id: MessageID, content: String, at date: Date = Date()) async throws -> (OutboxMessage, inserted: Bool) {
        try await database.write { db in
            if let existing = try OutboxMessage.fetchOne(db, key: id.value) {
                return (existing, false)
            }
            let next = try Int.fetchOne(db, sql: "SELECT COALESCE(MAX(sequence), 0) + 1 FROM outbox") ?? 1
            let message = OutboxMessage(
                id: id.value, sequence: next, content: content, createdAt: date, status: .queued, attempts: 0, lastSentAt: nil, sentEpoch: nil,
                sentConnection: nil)
            try message.insert(db)
            return (message, true)
        }
    }

    /// Messages not yet acknowledged, oldest first.
    public func pending() async throws -> [OutboxMessage] {
        try await database.read { db in
            try OutboxMessage
                .filter([OutboxMessage.Status.queued.rawValue, OutboxMessage.Status.sent.rawValue].contains(Column("status")))
                .order(Column("sequence"))
                .fetchAll(db)
        }
    }

    /// Records that a message was written to the connection `connection` (epoch `epoch`).
    public func markSent(id: String, epoch: Int, connection: String?, at date: Date = Date()) async throws {
        try await database.write { db in
            try db.execute(
                sql: """
                    UPDATE outbox SET status = 'sent', attempts = attempts + 1, lastSentAt = ?, sentEpoch = ?, sentConnection = ?
                    WHERE id = ? AND status IN ('queued', 'sent')
                    """,
                arguments: [date, epoch, connection, id])
        }
    }

    /// Records the gateway's acknowledgement; true when the message was waiting for it.
    public func markDelivered(id: String) async throws -> Bool {
        try await database.write { db in
            try db.execute(sql: "UPDATE outbox SET status = 'delivered' WHERE id = ? AND status IN ('queued', 'sent')", arguments: [id])
            return db.changesCount > 0
        }
    }

    /// Records that the gateway refused a message; true when it was waiting.
    public func markFailed(id: String) async throws -> Bool {
        try await database.write { db in
            try db.execute(sql: "UPDATE outbox SET status = 'failed' WHERE id = ? AND status IN ('queued', 'sent')", arguments: [id])
            return db.changesCount > 0
        }
    }

    /// The number of messages not yet acknowledged.
    public func pendingCount() async throws -> Int {
        try await database.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE status IN ('queued', 'sent')") ?? 0
        }
    }

    /// The gateway session to resume, as last saved.
    public func session() async throws -> (sessionID: String?, lastSequence: Int) {
        try await database.read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT sessionID, lastSequence FROM session WHERE id = 1") else { return (nil, 0) }
            return (row["sessionID"], row["lastSequence"])
        }
    }

    /// Saves the gateway session to resume.
    public func saveSession(sessionID: String?, lastSequence: Int) async throws {
        try await database.write { db in
            try db.execute(
                sql: "INSERT INTO session (id, sessionID, lastSequence) VALUES (1, ?, ?) ON CONFLICT(id) DO UPDATE SET sessionID = excluded.sessionID, lastSequence = excluded.lastSequence",
                arguments: [sessionID, lastSequence])
        }
    }

    /// A message by id.
    public func message(id: String) async throws -> OutboxMessage? {
        try await database.read { db in try OutboxMessage.fetchOne(db, key: id) }
    }
}
