import Foundation
import GRDB
public import TetherSchema
import TetherStorage
import TetherWire

/// What snapd keeps in SQLite (WAL): the transcript (every message with its status, within
/// a cap), how far it has followed protod's journal, each front end's display snapshot
/// and the connection identity.
public struct TranscriptStore: Sendable {
    private let database: DatabasePool
    /// The most entries kept; beyond it (and a tenth more, so that not every insert
    /// compacts) the oldest are removed.
    public let maximumEntries: Int

    /// Opens (creating and migrating if needed) the store at `path`.
    public init(path: String, maximumEntries: Int = 100_000) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // Takes effect only in a new file: pages freed by a compaction go back to the disk.
            if !db.configuration.readonly { try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL") }
        }
        try StoredDatabase.refuseNewer(path, what: "the transcript store", migrator: Self.migrator)
        database = try DatabasePool(path: path, configuration: configuration)
        self.maximumEntries = max(1, maximumEntries)
        try Self.migrator.migrate(database)
    }

    /// Closes the store once nothing uses it any more, its write-ahead log moved into the
    /// database and emptied first: a stopped set leaves whole database files, whichever of
    /// the pool's connections closes last.
    public func close() throws {
        try StoredDatabase.close(database)
    }

    /// Writes on the calling task's thread, blocking it for the commit, as the changes the
    /// conversation's bus messages bring are written: GRDB's `async` write hands the work to
    /// its writer queue and the result back, two thread wakes for a write of a fraction of a
    /// millisecond, some eight an exchange. The long writes (a catch-up, a restore) stay
    /// `async`.
    private func writeHere<T>(_ updates: (Database) throws -> T) throws -> T {
        try database.write(updates)
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
        migrator.registerMigration("add revisions, display snapshots and identity") { db in
            try db.alter(table: "transcript") { table in
                table.add(column: "revision", .integer).notNull().defaults(to: 0)
            }
            // Single values: the journal followed, the revision every change up to which is
            // applied, the connection identity.
            try db.create(table: "state") { table in
                table.primaryKey("key", .text)
                table.column("value", .blob).notNull()
            }
            try db.create(table: "display") { table in
                table.primaryKey("frontEnd", .text)
                table.column("snapshot", .blob).notNull()
            }
        }
        migrator.registerMigration("create streams") { db in
            // Replies still streaming: the latest progress of each, until the whole reply comes.
            try db.create(table: "stream") { table in
                table.autoIncrementedPrimaryKey("position")
                table.column("id", .text).notNull().unique()
                table.column("chunkIndex", .integer).notNull()
                table.column("progress", .blob).notNull()
            }
        }
        migrator.registerMigration("add reply attribution and detail") { db in
            try db.alter(table: "transcript") { table in
                table.add(column: "attribution", .text)
                table.add(column: "detail", .text)
            }
        }
        migrator.registerMigration("add sessions") { db in
            // OpenClaw: the session an entry belongs to; a front end shows one session's.
            try db.alter(table: "transcript") { table in
                table.add(column: "session", .text)
            }
            try db.create(index: "transcript_session", on: "transcript", columns: ["session", "position"])
        }
        migrator.registerMigration("add search") { db in
            // The words of every stored message, kept by triggers as entries come, change their
            // text or are compacted away; a status change does not touch the index.
            try createSearchIndex(db, options: "")
        }
        migrator.registerMigration("add attachments") { db in
            // The images sent with a user message: a JSON array of ``AttachmentNote`` (never the bytes).
            try db.alter(table: "transcript") { table in
                table.add(column: "attachments", .text)
            }
        }
        migrator.registerMigration("add tool calls and thinking") { db in
            // OpenClaw: an entry that is a tool call (its JSON), and the model's thinking.
            try db.alter(table: "transcript") { table in
                table.add(column: "tool", .blob)
                table.add(column: "thinking", .text)
            }
        }
        migrator.registerMigration("index word starts") { db in
            // A word's start is searched as a term of its own (see `searchPrefixLengths`),
            // and `transcript_terms` lists the words the index holds.
            try db.execute(
                sql: """
                    DROP TRIGGER transcript_search_insert; DROP TRIGGER transcript_search_delete; DROP TRIGGER transcript_search_update;
                    DROP TABLE transcript_search;
                    """)
            try createSearchIndex(db, options: ", prefix='\(searchPrefixLengths.map(String.init).joined(separator: " "))'")
            try db.execute(sql: "CREATE VIRTUAL TABLE transcript_terms USING fts5vocab(transcript_search, 'instance')")
        }
        return migrator
    }

    /// The lengths, in characters, of the word starts the index keeps as terms of their own.
    /// A word searched as a start (`deploy*`) is otherwise the union of every word beginning
    /// so, which FTS5 builds whole before it can walk it newest first: at a million entries
    /// that each hold the word, about 120 ms instead of 1. Kept at twice the index's size.
    public static let searchPrefixLengths = 1...6

    /// Creates the full-text index of the transcript's text, the triggers that keep it, and
    /// fills it with what the transcript holds.
    private static func createSearchIndex(_ db: Database, options: String) throws {
        try db.execute(
            sql: """
                CREATE VIRTUAL TABLE transcript_search USING fts5(
                    content, content='transcript', content_rowid='position', tokenize='unicode61 remove_diacritics 2'\(options));
                CREATE TRIGGER transcript_search_insert AFTER INSERT ON transcript BEGIN
                    INSERT INTO transcript_search(rowid, content) VALUES (new.position, new.content);
                END;
                CREATE TRIGGER transcript_search_delete AFTER DELETE ON transcript BEGIN
                    INSERT INTO transcript_search(transcript_search, rowid, content) VALUES ('delete', old.position, old.content);
                END;
                CREATE TRIGGER transcript_search_update AFTER UPDATE OF content ON transcript WHEN old.content IS NOT new.content BEGIN
                    INSERT INTO transcript_search(transcript_search, rowid, content) VALUES ('delete', old.position, old.content);
                    INSERT INTO transcript_search(rowid, content) VALUES (new.position, new.content);
                END;
                INSERT INTO transcript_search(transcript_search) VALUES ('rebuild');
                """)
    }

    // MARK: The transcript

    /// What applying a change did.
    public struct Applied: Sendable, Equatable {
        /// The change's revision is beyond the next one expected: some were missed.
        public var gap: Bool
        /// Oldest entries removed to stay within the cap.
        public var compacted: Int
    }

    /// Applies a transcript entry: adds it, or updates the stored one with the same id.
    /// A change older than the stored one (by revision) changes nothing, and a status never
    /// goes back, so changes may arrive late, twice or out of order.
    @discardableResult
    public func apply(_ entry: TranscriptEntry) async throws -> Applied {
        try writeHere { db in
            try Self.apply(entry, in: db)
            let gap = try Self.follow(entry.revision, in: db)
            return Applied(gap: gap, compacted: try compact(db))
        }
    }

    /// Applies a delivery update to its entry; an unknown id or an older change changes nothing.
    @discardableResult
    public func apply(_ delivery: DeliveryUpdate) async throws -> Applied {
        try writeHere { db in
            try Self.apply(delivery, in: db)
            return Applied(gap: try Self.follow(delivery.revision, in: db), compacted: 0)
        }
    }

    /// Applies changes fetched from protod's journal `journal`, in one transaction, and
    /// records that every change up to the last one is applied. Returns entries compacted.
    public func apply(journaled changes: [ConversationChange], from journal: String) async throws -> Int {
        try await database.write { db in
            try Self.setState("journal", to: Data(journal.utf8), in: db)
            for change in changes {
                if let entry = change.entry { try Self.apply(entry, in: db) }
                if let delivery = change.delivery { try Self.apply(delivery, in: db) }
            }
            if let last = changes.last?.revision, last > (try Self.appliedRevision(db)) {
                try Self.setState("revision", to: Data(String(last).utf8), in: db)
            }
            return try compact(db)
        }
    }

    /// The journal followed and the revision up to which every change is applied.
    public func followed() async throws -> (journal: String?, revision: Int) {
        try await database.read { db in
            let journal = try Self.state("journal", in: db).map { String(decoding: $0, as: UTF8.self) }
            return (journal, try Self.appliedRevision(db))
        }
    }

    /// Starts following another journal (protod's was made anew): from revision 0. The
    /// revisions of the stored entries came from the old journal and no longer compare.
    public func restartFollowing(_ journal: String) async throws {
        try await database.write { db in
            try db.execute(sql: "UPDATE transcript SET revision = 0")
            try Self.setState("journal", to: Data(journal.utf8), in: db)
            try Self.setState("revision", to: Data("0".utf8), in: db)
        }
    }

    /// Keeps each reply still streaming as far as it came, whole (see
    /// ``StreamProgress/following(_:)``): a chunk goes where its offset says, and a progress
    /// carrying the whole reply replaces what was kept. A reply already in the transcript, an
    /// older progress, or a chunk that does not fit (one was missed: until the next whole
    /// text) changes nothing.
    /// - Parameter known: the reply as this returned it last, when the caller kept it; without
    ///   it, it is read back from the database.
    /// - Returns: the reply as kept now; nil when nothing was kept.
    @discardableResult
    public func apply(_ progress: StreamProgress, after known: StreamProgress? = nil) async throws -> StreamProgress? {
        // Statements kept prepared: every progress of a reply comes here, and parsing their SQL
        // each time was about a tenth of snapd's writing on a streamed reply.
        try writeHere { db in
            let whole = try db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM transcript WHERE id = ?)")
            guard try !Bool.fetchOne(whole, arguments: [progress.id.value])! else { return nil }
            let kept =
                try known
                ?? Data.fetchOne(db.cachedStatement(sql: "SELECT progress FROM stream WHERE id = ?"), arguments: [progress.id.value]).map {
                    try BusSchema.decoder.decode(StreamProgress.self, from: $0)
                }
            guard let followed = progress.following(kept) else { return nil }
            try db.cachedStatement(
                sql: """
                    INSERT INTO stream (id, chunkIndex, progress) VALUES (?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET chunkIndex = excluded.chunkIndex, progress = excluded.progress
                    """
            ).execute(arguments: [progress.id.value, followed.chunkIndex, try BusSchema.encoder.encode(followed)])
            return followed
        }
    }

    /// Replies still streaming, in the order they started.
    public func streams() async throws -> [StreamProgress] {
        let bodies = try await database.read { db in try Data.fetchAll(db, sql: "SELECT progress FROM stream ORDER BY position") }
        let decoder = BusSchema.decoder
        return try bodies.map { try decoder.decode(StreamProgress.self, from: $0) }
    }

    private static func apply(_ entry: TranscriptEntry, in db: Database) throws {
        // A reply in the transcript is no longer streaming (whole, or cut off for good).
        if entry.sender != .user { try db.execute(sql: "DELETE FROM stream WHERE id = ?", arguments: [entry.id.value]) }
        let (senderType, senderName): (String, String?) =
            switch entry.sender {
            // For a user message, the column holds who sent it when another client did.
            case .user: ("user", entry.author)
            case .bot(let name): ("bot", name)
            }
        let revision = entry.revision ?? 0
        let tool = try entry.tool.map { try BusSchema.encoder.encode($0) }
        guard let stored = try stored(entry.id, in: db) else {
            try db.execute(
                sql: """
                    INSERT INTO transcript (id, senderType, senderName, content, timestamp, status, inReplyTo, attribution, detail, session, revision,
                                            attachments, tool, thinking)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    entry.id.value, senderType, senderName, entry.content, entry.timestamp, entry.status.rawValue, entry.inReplyTo?.value,
                    entry.attribution?.rawValue, entry.detail, entry.session, revision, try attachmentsColumn(entry.attachments), tool, entry.thinking,
                ])
            return
        }
        guard stored.isOlder(than: entry.revision) else { return }
        guard entry.status.rank >= stored.status.rank else {
            try db.execute(sql: "UPDATE transcript SET revision = MAX(revision, ?) WHERE id = ?", arguments: [revision, entry.id.value])
            return
        }
        // A delivered message's own words (steered into the reply in progress) outlast a copy without them.
        let detail = entry.sender == .user && entry.status == .delivered ? "COALESCE(?, detail)" : "?"
        try db.execute(
            sql: """
                UPDATE transcript SET content = ?, status = ?, inReplyTo = COALESCE(?, inReplyTo), attribution = COALESCE(?, attribution),
                detail = \(detail), senderName = COALESCE(?, senderName), session = COALESCE(?, session), revision = MAX(revision, ?),
                attachments = COALESCE(?, attachments), tool = COALESCE(?, tool), thinking = COALESCE(?, thinking) WHERE id = ?
                """,
            arguments: [
                entry.content, entry.status.rawValue, entry.inReplyTo?.value, entry.attribution?.rawValue, entry.detail, senderName, entry.session,
                revision, try attachmentsColumn(entry.attachments), tool, entry.thinking, entry.id.value,
            ])
    }

    /// The `attachments` column of an entry: its notes as JSON, or NULL.
    private static func attachmentsColumn(_ notes: [AttachmentNote]?) throws -> String? {
        guard let notes, !notes.isEmpty else { return nil }
        return String(decoding: try BusSchema.encoder.encode(notes), as: UTF8.self)
    }

    private static func apply(_ delivery: DeliveryUpdate, in db: Database) throws {
        guard let stored = try stored(delivery.id, in: db), stored.isOlder(than: delivery.revision) else { return }
        let status = delivery.status.rank >= stored.status.rank ? delivery.status : stored.status
        // A message delivered with words of its own (steered into the reply in progress) keeps them.
        let detail = status == .delivered && delivery.status == .delivered ? delivery.detail : nil
        try db.execute(
            sql: "UPDATE transcript SET status = ?, revision = MAX(revision, ?), detail = COALESCE(?, detail) WHERE id = ?",
            arguments: [status.rawValue, delivery.revision ?? 0, detail, delivery.id.value])
    }

    /// An entry as stored, for deciding whether a change applies to it.
    private struct StoredEntry {
        var status: DeliveryStatus
        var revision: Int

        /// Whether a change at `revision` is newer than this; a change without a revision
        /// (from a publisher that keeps no journal) always is, and the status rank decides.
        func isOlder(than change: Int?) -> Bool {
            change.map { $0 > revision } ?? true
        }
    }

    private static func stored(_ id: MessageID, in db: Database) throws -> StoredEntry? {
        try Row.fetchOne(db, sql: "SELECT status, revision FROM transcript WHERE id = ?", arguments: [id.value]).map { row in
            StoredEntry(status: DeliveryStatus(rawValue: row["status"]) ?? .queued, revision: row["revision"])
        }
    }

    /// Moves the applied revision on when `revision` is the next one; true when it is beyond it.
    private static func follow(_ revision: Int?, in db: Database) throws -> Bool {
        guard let revision else { return false }
        let applied = try appliedRevision(db)
        if revision == applied + 1 {
            try setState("revision", to: Data(String(revision).utf8), in: db)
        }
        return revision > applied + 1
    }

    /// Removes the oldest entries beyond the cap. Positions only grow and only the oldest
    /// are removed, so the count is the span of positions: no table scan. (MIN and MAX in
    /// one SELECT would scan the table: SQLite looks either up in the index only alone.)
    private func compact(_ db: Database) throws -> Int {
        guard
            let bounds = try Row.fetchOne(db, sql: "SELECT (SELECT MIN(position) FROM transcript) AS oldest, (SELECT MAX(position) FROM transcript) AS newest"),
            let oldest: Int = bounds["oldest"], let newest: Int = bounds["newest"]
        else { return 0 }
        guard newest - oldest + 1 > maximumEntries + maximumEntries / 10 else { return 0 }
        try db.execute(sql: "DELETE FROM transcript WHERE position <= ?", arguments: [newest - maximumEntries])
        let removed = db.changesCount
        try db.execute(sql: "PRAGMA incremental_vacuum")
        return removed
    }

    /// The latest `limit` entries before position `before` (all positions when nil), oldest
    /// first, the position of the oldest one returned when older entries remain, and the
    /// revision every change up to which is applied. With `session`, only that session's
    /// entries and those that name none.
    public func latest(limit: Int, before: Int? = nil, session: String? = nil) async throws -> TranscriptCommand.Reply {
        try await database.read { db in
            let chosen = session == nil ? "" : "AND (session IS NULL OR session = :session)"
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT * FROM (SELECT * FROM transcript WHERE position < :before \(chosen) ORDER BY position DESC LIMIT :limit) ORDER BY position ASC",
                arguments: ["before": before ?? Int.max, "limit": max(0, limit), "session": session])
            let entries = rows.map(Self.entry(from:))
            let revision = try Self.appliedRevision(db)
            guard let oldest: Int = rows.first?["position"] else { return TranscriptCommand.Reply(entries: entries, revision: revision) }
            let older =
                try Bool.fetchOne(
                    db, sql: "SELECT EXISTS (SELECT 1 FROM transcript WHERE position < :before \(chosen))", arguments: ["before": oldest, "session": session])
                ?? false
            return TranscriptCommand.Reply(entries: entries, nextBefore: older ? oldest : nil, revision: revision)
        }
    }

    /// The entry at `position` with up to `count` entries before and after it, oldest first;
    /// of `session` (and those naming none) when given.
    public func around(_ position: Int, count: Int, session: String? = nil) async throws -> AroundCommand.Reply {
        try await database.read { db in
            let chosen = session == nil ? "" : "AND (session IS NULL OR session = :session)"
            let arguments: StatementArguments = ["position": position, "count": max(0, count), "session": session]
            let upTo = try Row.fetchAll(
                db,
                sql: "SELECT * FROM transcript WHERE position <= :position \(chosen) ORDER BY position DESC LIMIT :count + 1", arguments: arguments)
            let after = try Row.fetchAll(
                db, sql: "SELECT * FROM transcript WHERE position > :position \(chosen) ORDER BY position ASC LIMIT :count", arguments: arguments)
            var rows = Array(upTo.reversed())
            let focus = rows.last.flatMap { (row: Row) -> Int? in row["position"] == position ? rows.count - 1 : nil }
            // Without the entry itself, the `count` before it are what is wanted, not one more.
            if focus == nil, rows.count > count { rows.removeFirst() }
            rows += after
            return AroundCommand.Reply(entries: rows.map(Self.entry(from:)), focus: focus)
        }
    }

    /// The messages holding every word of `words` (each as a word or the start of one, in
    /// any case, with or without accents), newest first, at most `limit`, older than position
    /// `before`; of `session` (and those naming none) when given. Nil when `words` hold
    /// nothing to search for (only punctuation).
    public func search(_ words: String, limit: Int, before: Int? = nil, session: String? = nil) async throws -> SearchCommand.Reply? {
        try await database.read { db in
            // Cut into words by the index's own tokenizer, each quoted: what the query language
            // would read as an operator is a word like any other.
            let tokens = try db.makeTokenizer(.unicode61(diacritics: .remove)).tokenize(query: words).compactMap {
                $0.flags.contains(.colocated) ? nil : $0.token
            }
            guard !tokens.isEmpty else { return nil }
            var terms: [String] = []
            for token in tokens {
                guard let term = try Self.searchTerm(for: token, in: db) else { return SearchCommand.Reply(hits: [], nextBefore: nil) }
                terms.append(term)
            }
            let pattern = try db.makeFTS5Pattern(rawPattern: terms.joined(separator: " AND "), forTable: "transcript_search")
            let chosen = session == nil ? "" : "AND (transcript.session IS NULL OR transcript.session = :session)"
            // The index is walked newest first and stops at the page: a word in every message
            // costs a page, not the whole transcript.
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT transcript.*, snippet(transcript_search, 0, :start, :end, '…', 16) AS excerpt
                    FROM transcript_search JOIN transcript ON transcript.position = transcript_search.rowid
                    WHERE transcript_search MATCH :pattern AND transcript_search.rowid < :before \(chosen)
                    ORDER BY transcript_search.rowid DESC LIMIT :limit
                    """,
                arguments: [
                    "pattern": pattern, "before": before ?? Int.max, "limit": max(0, limit) + 1, "session": session,
                    "start": SearchCommand.matchStart, "end": SearchCommand.matchEnd,
                ])
            let hits = rows.prefix(max(0, limit)).map { row in
                SearchCommand.Hit(position: row["position"], entry: Self.entry(from: row), excerpt: row["excerpt"])
            }
            return SearchCommand.Reply(hits: Array(hits), nextBefore: rows.count > limit ? hits.last?.position : nil)
        }
    }

    /// The most words a long start is searched as, one by one, before it is searched as a start.
    public static let searchedWordsLimit = 32

    /// What `token` is searched as: the word or a start of one, quoted so that nothing in it
    /// is read as an operator. A start longer than the index keeps becomes the words the index
    /// holds that begin with it (found through `transcript_terms`, a look-up each), which FTS5
    /// walks newest first without building their union; nil when there is none.
    private static func searchTerm(for token: String, in db: Database) throws -> String? {
        func quoted(_ word: String) -> String { "\"\(word.replacingOccurrences(of: "\"", with: "\"\""))\"" }
        guard token.unicodeScalars.count > searchPrefixLengths.upperBound else { return quoted(token) + "*" }
        var words: [String] = []
        // The tokenizer never puts a control character into a word: U+0001 after a word sorts
        // it before every longer word that begins with it.
        var from = token
        while words.count <= searchedWordsLimit,
            let word = try String.fetchOne(
                db, sql: "SELECT term FROM transcript_terms WHERE term >= ? AND term < ? LIMIT 1", arguments: [from, token + "\u{10FFFF}"])
        {
            words.append(word)
            from = word + "\u{1}"
        }
        if words.isEmpty { return nil }
        if words.count > searchedWordsLimit { return quoted(token) + "*" }
        return words.count == 1 ? quoted(words[0]) : "(" + words.map(quoted).joined(separator: " OR ") + ")"
    }

    /// A stored row as a transcript entry.
    private static func entry(from row: Row) -> TranscriptEntry {
        let senderType: String = row["senderType"]
        let sender: Sender = senderType == "bot" ? .bot(name: row["senderName"] ?? "") : .user
        let author: String? = senderType == "bot" ? nil : row["senderName"]
        let inReplyTo: String? = row["inReplyTo"]
        let attribution: String? = row["attribution"]
        let revision: Int = row["revision"]
        return TranscriptEntry(
            id: MessageID(row["id"]), sender: sender, content: row["content"], timestamp: row["timestamp"],
            status: DeliveryStatus(rawValue: row["status"]) ?? .queued, inReplyTo: inReplyTo.map(MessageID.init),
            attribution: attribution.flatMap(ReplyAttribution.init(rawValue:)), detail: row["detail"], author: author,
            session: row.hasColumn("session") ? row["session"] : nil, revision: revision == 0 ? nil : revision,
            attachments: (row.hasColumn("attachments") ? row["attachments"] as String? : nil).flatMap {
                try? BusSchema.decoder.decode([AttachmentNote].self, from: Data($0.utf8))
            },
            tool: (row.hasColumn("tool") ? row["tool"] as Data? : nil).flatMap { try? BusSchema.decoder.decode(ToolCall.self, from: $0) },
            thinking: row.hasColumn("thinking") ? row["thinking"] : nil)
    }

    // MARK: A damaged store

    /// The transcript entries that can still be read from a damaged store file, oldest first,
    /// without their revisions (which belong to the journal the old file followed).
    public static func salvage(from path: String) -> [TranscriptEntry] {
        let rows = StoredDatabase.readableRows(
            in: path, query: "SELECT * FROM transcript ORDER BY position", table: "transcript",
            filter: "id IS NOT NULL AND content IS NOT NULL AND timestamp IS NOT NULL AND senderType IS NOT NULL AND status IS NOT NULL")
        return rows.compactMap { row -> TranscriptEntry? in
            guard let id: String = try? row.decode(String.self, forColumn: "id"), !id.isEmpty,
                (try? row.decode(Date.self, forColumn: "timestamp")) != nil,
                (try? row.decode(String.self, forColumn: "content")) != nil
            else { return nil }
            var entry = entry(from: row)
            entry.revision = nil
            return entry
        }
    }

    /// Puts entries read from a damaged store into this one, in one transaction; returns how many.
    public func restore(_ entries: [TranscriptEntry]) async throws -> Int {
        try await database.write { db in
            for entry in entries { try Self.apply(entry, in: db) }
            _ = try compact(db)
            return entries.count
        }
    }

    /// Opens the store at `path`; a damaged file is set aside, and the entries that can still
    /// be read from it are put into the new one (the rest comes back from protod's journal).
    public static func openChecked(path: String, maximumEntries: Int = 100_000) async throws -> (TranscriptStore, ReplacedDatabase?) {
        try await StoredDatabase.open(path, what: "the transcript store", open: { try TranscriptStore(path: $0, maximumEntries: maximumEntries) }) {
            damaged, fresh in
            let salvaged = salvage(from: damaged)
            let restored = (try? await fresh.restore(salvaged)) ?? 0
            // Not "the rest comes back": protod's journal may have been replaced too, and then holds nothing older.
            return "\(restored) transcript entr\(restored == 1 ? "y was" : "ies were") read back from it, and what tether-protod's journal "
                + "still holds (at most its newest 50,000 changes) is taken again from it; the front ends' saved screens and drafts were lost"
        }
    }

    /// How many entries the transcript holds.
    public func count() async throws -> Int {
        try await database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM transcript") ?? 0 }
    }

    // MARK: Display snapshots and identity

    /// Keeps a front end's display snapshot, replacing the one it saved before.
    public func save(_ display: DisplaySnapshot) async throws {
        let body = try BusSchema.encoder.encode(display)
        try await database.write { db in
            try db.execute(
                sql: "INSERT INTO display (frontEnd, snapshot) VALUES (?, ?) ON CONFLICT(frontEnd) DO UPDATE SET snapshot = excluded.snapshot",
                arguments: [display.frontEnd, body])
        }
    }

    /// The display snapshot `frontEnd` saved last; nil if it never did.
    public func display(for frontEnd: String) async throws -> DisplaySnapshot? {
        let body = try await database.read { db in try Data.fetchOne(db, sql: "SELECT snapshot FROM display WHERE frontEnd = ?", arguments: [frontEnd]) }
        return try body.map { try BusSchema.decoder.decode(DisplaySnapshot.self, from: $0) }
    }

    /// Keeps the connection identity; false when it is the one already kept.
    public func save(_ identity: ConnectionIdentity) async throws -> Bool {
        let body = try BusSchema.encoder.encode(identity)
        return try await database.write { db in
            guard try Self.state("identity", in: db) != body else { return false }
            try Self.setState("identity", to: body, in: db)
            return true
        }
    }

    /// Keeps the conversation `conv.session` says; false when it is the one already kept.
    public func save(_ conversation: ConversationSession) async throws -> Bool {
        let body = try BusSchema.encoder.encode(conversation)
        return try writeHere { db in
            guard try Self.state("conversation", in: db) != body else { return false }
            try Self.setState("conversation", to: body, in: db)
            return true
        }
    }

    /// The conversation `conv.session` said last.
    public func conversation() async throws -> ConversationSession? {
        let body = try await database.read { db in try Self.state("conversation", in: db) }
        return try body.map { try BusSchema.decoder.decode(ConversationSession.self, from: $0) }
    }

    /// The connection identity kept last.
    public func identity() async throws -> ConnectionIdentity? {
        let body = try await database.read { db in try Self.state("identity", in: db) }
        return try body.map { try BusSchema.decoder.decode(ConnectionIdentity.self, from: $0) }
    }

    // MARK: Single values

    private static func state(_ key: String, in db: Database) throws -> Data? {
        try Data.fetchOne(db, sql: "SELECT value FROM state WHERE key = ?", arguments: [key])
    }

    private static func setState(_ key: String, to value: Data, in db: Database) throws {
        try db.execute(
            sql: "INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", arguments: [key, value])
    }

    private static func appliedRevision(_ db: Database) throws -> Int {
        try state("revision", in: db).flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
    }
}
