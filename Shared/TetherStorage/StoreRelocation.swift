public import Foundation
import GRDB
public import Logging
import TetherBus

#if canImport(Glibc)
import Glibc
#endif

/// Moves an SQLite store from where an earlier Tether kept it (the run directory, a tmpfs that
/// logout and reboot empty) to the state directory, once, before its program opens it.
///
/// The store is copied whole first (SQLite's online backup, which reads a consistent
/// snapshot with its write-ahead log folded in; the files as they are when SQLite cannot read
/// them, so that the damaged-file handling at the new place still finds what they hold),
/// flushed to disk and renamed into place; only then are the old files removed. A move cut
/// short leaves the old store where it was, and the next start moves it again.
public enum StoreRelocation {
    /// What happened to one store.
    public enum Outcome: Equatable, Sendable {
        /// Nothing to move: no store in the old places, or the new place already has one and no old one is left.
        case nothingToMove
        /// Moved from `from`; the words say so.
        case moved(from: String, words: String)
        /// The new place has a store and an old place still holds one too: the new one is
        /// used, the old one left untouched (for the user to look at), and the words say so.
        case leftBehind(at: String, words: String)
    }

    /// Moves the store `name` (its role in `what`, for the words: "the outbox") from the first
    /// of `legacyDirectories` that holds one into `directory`, unless `directory` has it already.
    public static func move(_ name: String, what: String, from legacyDirectories: [String], to directory: String) throws -> Outcome {
        let destination = directory + "/" + name
        guard let source = legacyDirectories.map({ $0 + "/" + name }).first(where: { exists($0) }) else { return .nothingToMove }
        if exists(destination) {
            return .leftBehind(
                at: source,
                words: "\(what) at \(destination) is used; an older one is still at \(source) and was left as it is (remove it once you no longer need it)")
        }
        let temporary = destination + ".moving-\(getpid())"
        removeStore(temporary)
        do {
            try copy(source, to: temporary)
            try syncFile(temporary)
            for extra in ["", "-wal"] where exists(temporary + extra) {
                guard rename(temporary + extra, destination + extra) == 0 else {
                    throw StorageError(.cannotMove, "cannot rename \(temporary + extra) to \(destination + extra): \(String(cString: strerror(errno)))")
                }
            }
            try syncFile(directory)
        } catch {
            removeStore(temporary)
            throw error
        }
        removeStore(source)
        return .moved(from: source, words: "moved \(what) from \(source), which logout and reboot empty, to \(destination)")
    }

    /// Copies the store at `source` to `target`: by SQLite's backup when it can be read, else
    /// the file and its write-ahead log byte for byte.
    private static func copy(_ source: String, to target: String) throws {
        do {
            let from = try DatabaseQueue(path: source)
            defer { try? from.close() }
            let to = try DatabaseQueue(path: target)
            defer { try? to.close() }
            try from.backup(to: to)
            // One file, no log: the copy is whole in `target` alone.
            try to.writeWithoutTransaction { try $0.execute(sql: "PRAGMA journal_mode = DELETE") }
        } catch {
            removeStore(target)
            for extra in ["", "-wal"] where exists(source + extra) {
                do {
                    try FileManager.default.copyItem(atPath: source + extra, toPath: target + extra)
                } catch {
                    throw StorageError(.cannotMove, "cannot copy \(source + extra) to \(target + extra): \(error)")
                }
            }
        }
    }

    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    private static func removeStore(_ path: String) {
        for extra in ["", "-wal", "-shm", "-journal"] { unlink(path + extra) }
    }

    /// Flushes a file (or a directory's entries) to the disk.
    private static func syncFile(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StorageError(.cannotMove, "cannot open \(path) to flush it: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw StorageError(.cannotMove, "cannot flush \(path) to disk: \(String(cString: strerror(errno)))") }
    }
}

extension StoreRelocation {
    /// A program's store: its file name in the state directory and its role, for the words.
    public struct Store: Sendable {
        public var name: String
        public var what: String

        public init(_ name: String, what: String) {
            self.name = name
            self.what = what
        }
    }

    /// Makes the state directory and moves each of `stores` into it from the old places
    /// (``move(_:what:from:to:)``); returns what happened to each, in words, for the log.
    /// A store that cannot be moved stops the start: opened empty at the new place, it would
    /// hide what the old one holds.
    public static func moveStores(_ stores: [Store], into state: String, from legacyDirectories: [String]) throws -> [Outcome] {
        guard !legacyDirectories.isEmpty else { return [] }
        return try stores.map { try move($0.name, what: $0.what, from: legacyDirectories, to: state) }
    }
}

extension StoreRelocation {
    /// Says each move, and each store left behind, in the program's log.
    public static func log(_ outcomes: [Outcome], to logger: Logger) {
        for outcome in outcomes {
            switch outcome {
            case .nothingToMove: break
            case .moved(_, let words): logger.notice("\(words)")
            case .leftBehind(_, let words): logger.warning("\(words)")
            }
        }
    }
}
