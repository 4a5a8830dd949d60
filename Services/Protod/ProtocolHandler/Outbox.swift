public import Foundation
public import GRDB
public import TetherSchema
import TetherStorage
public import TetherWire

/// A message in the outbox.
public struct OutboxMessage: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "outbox"

    /// The front end's id for the message; it never changes, across retries and restarts.
    public var id: String
    /// The order messages were accepted in, from 1.
    public var sequence: Int
    public var content: String
    public var createdAt: Date
    /// Where it stands: queued, sent, accepted (OpenClaw: in the gateway's queue, in memory),
    /// delivered, failed, expired or cancelled; never a reply's status.
    public var status: DeliveryStatus
    /// How many times the message was written to the gateway.
    public var attempts: Int
    public var lastSentAt: Date?
    /// The connection it was last written to.
    public var sentEpoch: Int?
    /// The connection it was last written to, unique across connd restarts.
    public var sentConnection: String?
    /// How it is delivered: immediate, queued or latestOnly.
    public var strategy: String
    /// With latestOnly: its kind.
    public var kind: String?
    /// Its retry policy.
    public var retryAttempts: Int
    public var retryDelayMilliseconds: Int
    public var retryTimeoutMilliseconds: Int
    /// Writes that went unacknowledged on an open connection.
    public var timeouts: Int
    /// OpenClaw: the session it was sent in, as chosen then (`main`, `side`, a canonical key);
    /// nil for the one chosen at protod's start.
    public var session: String?
    /// OpenClaw: when the gateway said it holds the message in its queue (status `accepted`).
    public var acceptedAt: Date?
    /// Images sent with it (stored as JSON), kept with the message until it leaves the outbox.
    public var attachments: [Attachment]?
    /// OpenClaw: what it does if a reply is in progress when it goes out (`steer`, `interrupt`).
    public var whileBusy: String?

    public init(
        id: String, sequence: Int, content: String, createdAt: Date, status: DeliveryStatus, attempts: Int, lastSentAt: Date?, sentEpoch: Int?,
        sentConnection: String?, strategy: String, kind: String?, retryAttempts: Int, retryDelayMilliseconds: Int, retryTimeoutMilliseconds: Int,
        timeouts: Int, session: String? = nil, acceptedAt: Date? = nil, attachments: [Attachment]? = nil, whileBusy: String? = nil
    ) {
        self.attachments = attachments
        self.whileBusy = whileBusy
        self.id = id
        self.sequence = sequence
        self.content = content
        self.createdAt = createdAt
        self.status = status
        self.attempts = attempts
        self.lastSentAt = lastSentAt
        self.sentEpoch = sentEpoch
        self.sentConnection = sentConnection
        self.strategy = strategy
        self.kind = kind
        self.retryAttempts = retryAttempts
        self.retryDelayMilliseconds = retryDelayMilliseconds
        self.retryTimeoutMilliseconds = retryTimeoutMilliseconds
        self.timeouts = timeouts
        self.session = session
        self.acceptedAt = acceptedAt
    }

    public var retryPolicy: RetryPolicy {
        RetryPolicy(attempts: retryAttempts, delayMilliseconds: retryDelayMilliseconds, timeoutMilliseconds: retryTimeoutMilliseconds)
    }

    public var messageID: MessageID { MessageID(id) }
}

/// The durable outgoing queue: an SQLite file. A message is acknowledged to the front end
/// only once committed here, and stays until the gateway acknowledges it.
///
/// WAL mode with `synchronous = FULL`: each commit waits for one flush of the log to the
/// disk (a rollback journal waits for several), so an accepted message, and a message ended
/// (cancelled, expired, failed), survives a power cut. Marks whose loss costs only a
/// repeated write (sent, delivered, the session to resume) do not wait for the disk: a
/// process that dies keeps them, and after a power cut the message is written again and
/// the gateway, which drops repeated ids, acknowledges it again.
public struct Outbox: Sendable {
    private let database: DatabaseQueue

    /// Opens (creating and migrating if needed) the outbox at `path`.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        try StoredDatabase.refuseNewer(path, what: "the outbox", migrator: Self.migrator)
        database = try DatabaseQueue(path: path, configuration: configuration)
        try Self.migrator.migrate(database)
    }

    /// Closes the outbox, its write-ahead log moved into the database and emptied first: a
    /// stopped set leaves whole database files, not whenever the process lets go of them.
    /// Called once nothing uses it any more.
    public func close() throws {
        try StoredDatabase.close(database)
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
        migrator.registerMigration("add delivery options") { db in
            try db.alter(table: "outbox") { table in
                table.add(column: "strategy", .text).notNull().defaults(to: "queued")
                table.add(column: "kind", .text)
                table.add(column: "retryAttempts", .integer).notNull().defaults(to: 3)
                table.add(column: "retryDelayMilliseconds", .integer).notNull().defaults(to: 200)
                table.add(column: "retryTimeoutMilliseconds", .integer).notNull().defaults(to: 10_000)
                table.add(column: "timeouts", .integer).notNull().defaults(to: 0)
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
        migrator.registerMigration("add sessions") { db in
            try db.alter(table: "outbox") { table in
                table.add(column: "session", .text)
            }
            // The session chosen with `tether session use`, and the `--session` it was chosen under.
            try db.alter(table: "session") { table in
                table.add(column: "chosen", .text)
                table.add(column: "chosenUnder", .text)
            }
        }
        migrator.registerMigration("add acceptedAt") { db in
            try db.alter(table: "outbox") { table in
                table.add(column: "acceptedAt", .datetime)
            }
        }
        migrator.registerMigration("add attachments") { db in
            // The images sent with a message, as a JSON array of ``Attachment``.
            try db.alter(table: "outbox") { table in
                table.add(column: "attachments", .text)
            }
        }
        migrator.registerMigration("add open streams") { db in
            // The replies streaming when last saved, as a JSON array of ``SavedStream``.
            try db.alter(table: "session") { table in
                table.add(column: "openStreams", .text)
            }
        }
        migrator.registerMigration("add whileBusy") { db in
            // What a message does if a reply is in progress when it goes out: steer, interrupt.
            try db.alter(table: "outbox") { table in
                table.add(column: "whileBusy", .text)
            }
        }
        return migrator
    }

    /// Commits a new message; returns the stored message and whether it was new (an id
    /// already in the outbox is not added twice).
    public func enqueue(
        id: MessageID, content: String, strategy: DeliveryStrategy = .queued, kind: String? = nil, retry: RetryPolicy = .default,
        session: String? = nil, attachments: [Attachment]? = nil, whileBusy: WhileBusy? = nil, at date: Date = Date()
    ) async throws -> (OutboxMessage, inserted: Bool) {
        let attachments = attachments?.isEmpty == true ? nil : attachments
        let message = OutboxMessage(
            id: id.value, sequence: 0, content: content, createdAt: date, status: .queued, attempts: 0, lastSentAt: nil, sentEpoch: nil,
            sentConnection: nil, strategy: strategy.rawValue, kind: kind, retryAttempts: retry.attempts,
            retryDelayMilliseconds: retry.delayMilliseconds, retryTimeoutMilliseconds: retry.timeoutMilliseconds, timeouts: 0, session: session,
            attachments: attachments, whileBusy: whileBusy?.rawValue)
        let attachmentsJSON = try attachments.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        return try writeHere { db in
            // One prepared statement, kept: the send path's commit waits for it. The sequence
            // is the next one; an id already here adds nothing and returns no row.
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO outbox (id, sequence, content, createdAt, status, attempts, strategy, kind,
                                        retryAttempts, retryDelayMilliseconds, retryTimeoutMilliseconds, timeouts, session, attachments, whileBusy)
                    VALUES (?, (SELECT COALESCE(MAX(sequence), 0) + 1 FROM outbox), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(id) DO NOTHING
                    RETURNING sequence
                    """)
            let arguments: StatementArguments = [
                message.id, message.content, message.createdAt, message.status.rawValue, message.attempts, message.strategy, message.kind,
                message.retryAttempts, message.retryDelayMilliseconds, message.retryTimeoutMilliseconds, message.timeouts, message.session,
                attachmentsJSON, message.whileBusy,
            ]
            guard let sequence = try Int.fetchOne(insert, arguments: arguments) else {
                guard let existing = try OutboxMessage.fetchOne(db, key: message.id) else {
                    throw DatabaseError(message: "message \(message.id) was neither added nor found")
                }
                return (existing, false)
            }
            var added = message
            added.sequence = sequence
            return (added, true)
        }
    }

    /// Ends messages still pending with a final status; returns the ids it changed.
    @discardableResult
    public func finish(_ ids: [String], as status: DeliveryStatus) async throws -> [String] {
        try writeHere { db in
            var changed: [String] = []
            for id in ids {
                try db.execute(
                    sql: "UPDATE outbox SET status = ? WHERE id = ? AND status IN ('queued', 'sent', 'accepted')", arguments: [status.rawValue, id])
                if db.changesCount > 0 { changed.append(id) }
            }
            return changed
        }
    }

    /// Messages not yet acknowledged, oldest first.
    public func pending() async throws -> [OutboxMessage] {
        try readHere { db in
            try OutboxMessage
                .filter([DeliveryStatus.queued, .sent, .accepted].map(\.rawValue).contains(Column("status")))
                .order(Column("sequence"))
                .fetchAll(db)
        }
    }

    /// Records that messages were written to the connection `connection` (epoch `epoch`).
    public func markSent(ids: [String], epoch: Int, connection: String?, at date: Date = Date()) async throws {
        try writeWithoutWaitingForTheDisk { db in
            let update = try db.cachedStatement(
                sql: """
                    UPDATE outbox SET status = 'sent', attempts = attempts + 1, lastSentAt = ?, sentEpoch = ?, sentConnection = ?
                    WHERE id = ? AND status IN ('queued', 'sent', 'accepted')
                    """)
            for id in ids {
                try update.execute(arguments: [date, epoch, connection, id])
            }
        }
    }

    /// Records the gateway's acknowledgement; when the message was waiting for it, returns
    /// when it was accepted (nil for an acknowledgement that changes nothing).
    public func markDelivered(id: String) async throws -> Date? {
        try writeWithoutWaitingForTheDisk { db in
            let update = try db.cachedStatement(
                sql: "UPDATE outbox SET status = 'delivered' WHERE id = ? AND status IN ('queued', 'sent', 'accepted') RETURNING createdAt")
            return try Date.fetchOne(update, arguments: [id])
        }
    }

    /// Records that the gateway holds a written message in its queue, in memory (OpenClaw).
    public func markInGatewayQueue(id: String, at date: Date) async throws {
        try writeWithoutWaitingForTheDisk { db in
            try db.execute(
                sql: "UPDATE outbox SET status = 'accepted', acceptedAt = ? WHERE id = ? AND status IN ('queued', 'sent')", arguments: [date, id])
        }
    }

    /// Puts a delivered message back among those to send (the gateway lost it), where it
    /// was in the order.
    public func requeue(id: String) async throws {
        try writeHere { db in
            try db.execute(
                sql: "UPDATE outbox SET status = 'queued', sentEpoch = NULL, sentConnection = NULL WHERE id = ? AND status = 'delivered'", arguments: [id])
        }
    }

    /// The gateway session to resume, as last saved.
    public func session() async throws -> (sessionID: String?, lastSequence: Int) {
        try readHere { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT sessionID, lastSequence FROM session WHERE id = 1") else { return (nil, 0) }
            return (row["sessionID"], row["lastSequence"])
        }
    }

    /// Saves the gateway session to resume.
    public func saveSession(sessionID: String?, lastSequence: Int) async throws {
        try writeWithoutWaitingForTheDisk { db in
            try db.execute(
                sql:
                    "INSERT INTO session (id, sessionID, lastSequence) VALUES (1, ?, ?) ON CONFLICT(id) DO UPDATE SET sessionID = excluded.sessionID, lastSequence = excluded.lastSequence",
                arguments: [sessionID, lastSequence])
        }
    }

    /// The replies that were streaming when last saved (see ``SavedStream``).
    public func openStreams() async throws -> [SavedStream] {
        let json = try readHere { db in try String.fetchOne(db, sql: "SELECT openStreams FROM session WHERE id = 1") }
        guard let json else { return [] }
        return (try? JSONDecoder().decode([SavedStream].self, from: Data(json.utf8))) ?? []
    }

    /// Saves the replies streaming now; losing the last save costs only a reply cut as
    /// incomplete by the stall deadline rather than at once, so it does not wait for the disk.
    public func saveOpenStreams(_ streams: [SavedStream]) async throws {
        let json = streams.isEmpty ? nil : String(decoding: try JSONEncoder().encode(streams), as: UTF8.self)
        try writeWithoutWaitingForTheDisk { db in
            try db.execute(
                sql: "INSERT INTO session (id, lastSequence, openStreams) VALUES (1, 0, ?) ON CONFLICT(id) DO UPDATE SET openStreams = excluded.openStreams",
                arguments: [json])
        }
    }

    /// The session chosen with `tether session use` while protod's `--session` was `startedWith`
    /// (nil: none, or chosen under another `--session`, which then wins).
    public func chosenSession(startedWith: String?) async throws -> String? {
        try readHere { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT chosen, chosenUnder FROM session WHERE id = 1") else { return nil }
            let under: String? = row["chosenUnder"]
            return under == (startedWith ?? "") ? row["chosen"] : nil
        }
    }

    /// Keeps the session chosen, and the `--session` it was chosen under.
    public func saveChosenSession(_ key: String, startedWith: String?) async throws {
        try writeHere { db in
            try db.execute(
                sql: """
                    INSERT INTO session (id, lastSequence, chosen, chosenUnder) VALUES (1, 0, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET chosen = excluded.chosen, chosenUnder = excluded.chosenUnder
                    """,
                arguments: [key, startedWith ?? ""])
        }
    }

    /// Writes on the calling task's thread, blocking it for the commit and its flush (a
    /// fraction of a millisecond), as every change of the outbox is written: GRDB's `async`
    /// write hands the work to its writer queue and the result back, two thread wakes for
    /// each of the several writes of a message, on the path that the send waits for. The
    /// outbox has one writer, protod's machine, so nothing waits behind another's write.
    private func writeHere<T>(_ updates: (Database) throws -> T) throws -> T {
        try database.write(updates)
    }

    /// Reads on the calling task's thread, for the same reason.
    private func readHere<T>(_ value: (Database) throws -> T) throws -> T {
        try database.read(value)
    }

    /// Commits `updates` without waiting for the disk (`synchronous = NORMAL` for this
    /// commit), on the calling task's thread.
    private func writeWithoutWaitingForTheDisk<T>(_ updates: (Database) throws -> T) throws -> T {
        try database.writeWithoutTransaction { db in
            try db.cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute()
            defer { try? db.cachedStatement(sql: "PRAGMA synchronous = FULL").execute() }
            var result: T?
            try db.inTransaction {
                result = try updates(db)
                return .commit
            }
            guard let result else { throw DatabaseError(message: "the transaction returned nothing") }
            return result
        }
    }

    /// A message by id.
    public func message(id: String) async throws -> OutboxMessage? {
        try readHere { db in try OutboxMessage.fetchOne(db, key: id) }
    }

    // MARK: A damaged outbox

    /// The messages that can still be read from a damaged outbox file, in the order they were accepted.
    public static func salvage(from path: String) -> [OutboxMessage] {
        let rows = StoredDatabase.readableRows(in: path, query: "SELECT * FROM outbox ORDER BY sequence", table: "outbox")
        let messages = rows.compactMap { row -> OutboxMessage? in
            guard let message = try? OutboxMessage(row: row), !message.id.isEmpty else { return nil }
            return message
        }
        return messages.sorted { $0.sequence < $1.sequence }
    }

    /// Puts messages into this outbox in the order given, each after the last one here (an
    /// id already here is kept as it is); returns those put in, with their new sequence.
    public func restore(_ messages: [OutboxMessage]) async throws -> [OutboxMessage] {
        try writeHere { db in
            var added: [OutboxMessage] = []
            for var message in messages where try !message.exists(db) {
                message.sequence = try Int.fetchOne(db, sql: "SELECT COALESCE(MAX(sequence), 0) + 1 FROM outbox") ?? 1
                try message.insert(db)
                added.append(message)
            }
            return added
        }
    }

    /// The ids of every message in the outbox, whatever its status.
    public func ids() async throws -> Set<String> {
        try readHere { db in Set(try String.fetchAll(db, sql: "SELECT id FROM outbox")) }
    }

    /// Opens the outbox at `path`. A damaged file is set aside; the messages that can still
    /// be read from it are put into the new one, then those `journal` (the conversation
    /// journal's recent entries) shows were never confirmed (``OutboxRecovery``).
    ///
    /// - Returns: the outbox, the file set aside if any, and what it got back.
    public static func openChecked(
        path: String, recoveringFrom journal: [TranscriptEntry] = [], retry: RetryPolicy = .default, now: Date = Date()
    ) async throws -> (Outbox, ReplacedDatabase?, OutboxRecoveryOutcome?) {
        var counted: (salvaged: Int, recovered: Int, toSend: Int, lost: [DeliveryUpdate])?
        let (outbox, replaced) = try await StoredDatabase.open(path, what: "the outbox", now: now, open: { try Outbox(path: $0) }) { damaged, fresh in
            let salvaged = salvage(from: damaged)
            let recovery = OutboxRecovery.plan(known: journal, held: Set(salvaged.map(\.id)), source: "the conversation journal", retry: retry)
            guard let added = try? await fresh.restore(OutboxRecovery.merged(salvaged, recovery.messages)) else {
                return "no message could be put into the new outbox: any it held that were waiting to be sent are lost"
            }
            let toSend = added.filter { [.queued, .sent, .accepted].contains($0.status) }.count
            counted = (salvaged.count, recovery.messages.count, toSend, recovery.lost)
            // How many rows the damage took is not known: the words say so rather than imply none.
            return OutboxRecovery.words(
                salvaged: salvaged.count, recovered: recovery.messages.count, lost: recovery.lost.count, toSend: toSend, source: "the conversation journal")
        }
        guard let replaced else { return (outbox, nil, nil) }
        let found = counted ?? (0, 0, 0, [])
        let outcome = OutboxRecoveryOutcome(
            replaced: replaced, salvaged: found.salvaged, recovered: found.recovered, source: "the conversation journal", toSend: found.toSend,
            lost: found.lost)
        return (outbox, replaced, outcome)
    }
}
