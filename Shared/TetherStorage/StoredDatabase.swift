public import Foundation
public import GRDB
public import TetherBus
public import TetherSchema

/// Opening a program's SQLite file so that damage is found at start, set aside and said in
/// words, never met later as a restart loop or an empty database presented as normal; and
/// telling a full disk from other failures.
public enum StoredDatabase {
    /// Why the file at `path` cannot be trusted, in words; nil when it is sound or does not exist yet.
    ///
    /// A file that exists but is empty or holds no table was emptied: this program writes
    /// its tables when it creates the file, so an empty one lost whatever it held.
    public static func problem(at path: String) -> String? {
        guard let size = fileSize(path) else { return nil }
        if size == 0 && (fileSize(path + "-wal") ?? 0) == 0 { return "the file is empty (0 bytes): it was truncated or zeroed" }
        do {
            let queue = try DatabaseQueue(path: path)
            defer { try? queue.close() }
            return try queue.read { db in
                let findings = try String.fetchAll(db, sql: "PRAGMA quick_check(100)")
                    .flatMap { $0.split(separator: "\n") }.filter { !$0.hasPrefix("***") }
                guard findings == ["ok"] else {
                    let count = findings.count
                    return "an integrity check found \(count) problem\(count == 1 ? "" : "s"), the first: \(findings.first ?? "?")"
                }
                let tables = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'") ?? 0
                return tables == 0 ? "the file holds no tables: it was emptied" : nil
            }
        } catch {
            return words(for: error)
        }
    }

    /// Opens the database at `path` with `open`. A file found damaged (by ``problem(at:)``,
    /// or by `open` failing on a damaged file) is moved aside as `<path>.damaged-<time>`, a
    /// new one is opened in its place, and `salvage` reads what it can from the old one into
    /// the new one and says what it recovered, in words.
    ///
    /// - Parameter what: the file's role, for the words (`the outbox`).
    /// - Returns: the database, and the file set aside when there was one.
    public static func open<Store>(
        _ path: String, what: String, now: Date = Date(), open: (String) throws -> Store,
        salvage: (_ damaged: String, _ fresh: Store) async -> String? = { _, _ in nil }
    ) async throws -> (Store, ReplacedDatabase?) {
        var found = problem(at: path)
        if found == nil {
            do {
                return (try open(path), nil)
            } catch let error where isDamage(error) {
                found = words(for: error)
            }
        }
        let problem = found ?? "damaged"
        let movedTo = try setAside(path, at: now)
        let store = try open(path)
        let recovered = await salvage(movedTo, store)
        let words = damageWords(what: what, path: path, problem: problem, movedTo: movedTo, recovered: recovered)
        return (store, ReplacedDatabase(file: path, movedTo: movedTo, problem: problem, words: words, at: now))
    }

    /// Closes a database once nothing uses it any more, its write-ahead log moved into the
    /// file and emptied first: a stopped set leaves whole database files, whichever of its
    /// connections closes last, not whenever the process lets go of them.
    public static func close(_ database: some DatabaseWriter) throws {
        _ = try database.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        try database.close()
    }

    /// Refuses, in words, a store that a newer Tether changed in ways `migrator` does not know
    /// (it names migrations this version lacks): this version would misread it, and a new
    /// one in its place would hide what it holds. The file is left exactly as it is.
    ///
    /// - Parameter what: the store's role, for the words (`the outbox`).
    public static func refuseNewer(_ path: String, what: String, migrator: DatabaseMigrator) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        // Read only, before the program's own connection (whose set-up may write the file) opens it.
        var configuration = Configuration()
        configuration.readonly = true
        let unknown: Set<String>
        do {
            let reader = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? reader.close() }
            unknown = try reader.read { db in try migrator.appliedIdentifiers(db).subtracting(migrator.migrations) }
        } catch {
            return  // Unreadable: damage, which opening the store finds and handles.
        }
        guard !unknown.isEmpty else { return }
        let names = unknown.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
        throw NewerStoreRefusal(
            "\(what) (\(path)) was written by a newer version of Tether than this one (\(TetherVersion.current)): it holds changes this version "
                + "does not know (\(names)); it is left as it is: install that version again (or a newer one) to use it")
    }

    /// `the outbox (PATH) was damaged (PROBLEM): it was set aside as MOVED and a new one started; RECOVERED`.
    public static func damageWords(what: String, path: String, problem: String, movedTo: String, recovered: String?) -> String {
        "\(what) (\(path)) was damaged (\(problem)): it was set aside as \(movedTo) and a new one started" + (recovered.map { "; \($0)" } ?? "")
    }

    /// Moves the file and its write-ahead log and shared memory aside as
    /// `<path>.damaged-<UTC time>`, so the damaged file can still be read; returns its new path.
    public static func setAside(_ path: String, at date: Date) throws -> String {
        let stamp = date.formatted(Date.ISO8601FormatStyle(timeSeparator: .omitted).dateTimeSeparator(.standard))
        var target = "\(path).damaged-\(stamp)"
        var suffix = 1
        while FileManager.default.fileExists(atPath: target) {
            suffix += 1
            target = "\(path).damaged-\(stamp)-\(suffix)"
        }
        for extra in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + extra) {
            guard rename(path + extra, target + extra) == 0 else {
                throw StorageError(.cannotSetAside, "cannot move the damaged \(path + extra) aside: \(String(cString: strerror(errno)))")
            }
        }
        return target
    }

    /// Rows of a damaged file that can still be read: all of `query` when the file reads
    /// through, else each row of `table` that can be reached alone, by its rowid.
    public static func readableRows(in path: String, query: String, table: String, filter: String = "1") -> [Row] {
        restoreLength(of: path)
        guard let queue = try? DatabaseQueue(path: path) else { return [] }
        defer { try? queue.close() }
        return
            (try? queue.read { db -> [Row] in
                if let rows = try? Row.fetchAll(db, sql: query) { return rows }
                let highest = (try? Int.fetchOne(db, sql: "SELECT MAX(rowid) FROM \(table)")) ?? nil
                var rows: [Row] = []
                for rowid in 1...min(max(highest ?? 10_000, 1), 1_000_000) {
                    if let row = try? Row.fetchOne(db, sql: "SELECT * FROM \(table) WHERE rowid = ? AND (\(filter))", arguments: [rowid]) {
                        rows.append(row)
                    }
                }
                return rows
            }) ?? []
    }

    /// Gives a truncated file back the length its header says, in zeros: SQLite reads
    /// nothing from a file shorter than its header claims, but the pages before the cut are intact.
    private static func restoreLength(of path: String) {
        guard let handle = FileHandle(forUpdatingAtPath: path) else { return }
        defer { try? handle.close() }
        guard let header = try? handle.read(upToCount: 32), header.count == 32,
            header.starts(with: Data("SQLite format 3\0".utf8))
        else { return }
        let bytes = [UInt8](header)
        let declaredPageSize = Int(bytes[16]) << 8 | Int(bytes[17])
        let pageSize = declaredPageSize == 1 ? 65_536 : declaredPageSize
        let pages = bytes[28..<32].reduce(0) { $0 << 8 | Int($1) }
        let length = UInt64(pageSize * pages)
        guard pageSize >= 512, let size = try? handle.seekToEnd(), size < length else { return }
        try? handle.truncate(atOffset: length)
    }

    /// Whether `error` says the file is not a database or is malformed.
    public static func isDamage(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB
    }

    /// Whether `error` is a write that failed for want of space on the disk holding `path`.
    public static func isDiskFull(_ error: any Error, path: String) -> Bool {
        if let error = error as? DatabaseError {
            if error.resultCode == .SQLITE_FULL { return true }
            // Some failed writes come back as I/O errors; the file system tells whether it is full.
            guard error.resultCode == .SQLITE_IOERR else { return false }
            return (FileSystemSpace.of(path)?.availableBytes ?? 1) < 64 * 1024
        }
        if let error = error as? CocoaError { return error.code == .fileWriteOutOfSpace }
        return (error as? POSIXError)?.code == .ENOSPC
    }

    /// The words for a full disk holding `path`.
    public static func diskFullWords(path: String) -> String {
        let space = FileSystemSpace.of(path)
        return "the disk holding \((path as NSString).deletingLastPathComponent) is full"
            + (space.map { " (\($0.words))" } ?? "") + ": free some space; nothing you sent was lost"
    }

    /// An SQLite error as words ("file is not a database"), without the SQL.
    public static func words(for error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message ?? "\(error.resultCode)" }
        return "\(error)"
    }

    private static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }
}

/// A storage problem this module cannot get past.
public typealias StorageError = CodedError<StorageErrorCode>

/// What went wrong with a stored file.
public enum StorageErrorCode: String, ErrorCode {
    /// A damaged file could not be moved aside.
    case cannotSetAside
    /// A store could not be moved to the state directory.
    case cannotMove
}

/// A store written by a newer version of Tether, refused and left as it is.
public struct NewerStoreRefusal: UnfixableByRestart, Equatable {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
