import Foundation
import GRDB
import ProtocolHandler
import SnapshotStore
import Testing
import TetherSchema
import TetherStorage
import TetherTesting
import TetherWire

/// Damaged SQLite files on a real disk: found, set aside, read back as far as they can be.
@Suite struct StoredDatabaseTests {
    /// An outbox with three messages waiting and, after them in the file, pages of other data.
    private func outboxWithFiller(at path: String) async throws {
        let outbox = try Outbox(path: path)
        for index in 1...3 { _ = try await outbox.enqueue(id: MessageID("m\(index)"), content: "waiting \(index)") }
        try await outbox.markSent(ids: ["m3"], epoch: 1, connection: "c-1")
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "CREATE TABLE filler (data BLOB)")
            for _ in 0..<40 { try db.execute(sql: "INSERT INTO filler VALUES (zeroblob(4000))") }
        }
        try queue.close()
    }

    @Test func aSoundFileOrNoFileIsNoProblem() async throws {
        let run = try TestRunDirectory()
        #expect(StoredDatabase.problem(at: run.path + "/absent.sqlite") == nil)
        try await outboxWithFiller(at: run.path + "/outbox.sqlite")
        #expect(StoredDatabase.problem(at: run.path + "/outbox.sqlite") == nil)
    }

    @Test func anEmptiedFileIsDamage() throws {
        let run = try TestRunDirectory()
        _ = FileManager.default.createFile(atPath: run.path + "/empty.sqlite", contents: Data())
        #expect(StoredDatabase.problem(at: run.path + "/empty.sqlite") == "the file is empty (0 bytes): it was truncated or zeroed")
        try DatabaseQueue(path: run.path + "/tableless.sqlite").write { db in try db.execute(sql: "PRAGMA user_version = 1") }
        #expect(StoredDatabase.problem(at: run.path + "/tableless.sqlite") == "the file holds no tables: it was emptied")
        let garbage = run.path + "/garbage.sqlite"
        _ = FileManager.default.createFile(atPath: garbage, contents: Data(repeating: 0x5A, count: 8192))
        #expect(StoredDatabase.problem(at: garbage) == "file is not a database")
    }

    @Test func aTruncatedOutboxIsSetAsideAndItsWaitingMessagesReadBack() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/outbox.sqlite"
        try await outboxWithFiller(at: path)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        // The cut falls in the filler: the outbox's own pages are intact.
        try FileHandle(forWritingAtPath: path).map {
            try $0.truncate(atOffset: UInt64(size * 2 / 3)); try $0.close()
        }
        #expect(StoredDatabase.problem(at: path) != nil)

        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let (outbox, replaced) = try await Outbox.openChecked(path: path, now: now)
        let notice = try #require(replaced)
        #expect(notice.movedTo == path + ".damaged-2027-01-15T080000Z")
        #expect(FileManager.default.fileExists(atPath: notice.movedTo ?? ""))
        #expect(notice.words.hasPrefix("the outbox (\(path)) was damaged ("))
        #expect(
            notice.words.hasSuffix("3 messages read back from it, 3 of them still to be sent; any it held that could not be read are lost"),
            "\(notice.words)")
        let pending = try await outbox.pending()
        #expect(pending.map(\.id) == ["m1", "m2", "m3"])
        #expect(pending.map(\.content) == ["waiting 1", "waiting 2", "waiting 3"])
        #expect(pending.last?.status == .sent, "a message written before keeps its mark, so it is looked up or sent with its id")
        // The new file is sound; a second start finds nothing to set aside.
        #expect(StoredDatabase.problem(at: path) == nil)
        #expect(try await Outbox.openChecked(path: path).1 == nil)
    }

    @Test func aDamagedTranscriptStoreKeepsTheEntriesItCanRead() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/snapd.sqlite"
        try await Self.storeFourEntries(at: path)
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "CREATE TABLE filler (data BLOB)")
            for _ in 0..<40 { try db.execute(sql: "INSERT INTO filler VALUES (zeroblob(4000))") }
        }
        try queue.close()
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        try FileHandle(forWritingAtPath: path).map {
            try $0.truncate(atOffset: UInt64(size * 2 / 3)); try $0.close()
        }

        let (fresh, replaced) = try await TranscriptStore.openChecked(path: path)
        #expect(replaced?.words.contains("4 transcript entries were read back from it") == true, "\(replaced?.words ?? "nothing set aside")")
        let page = try await fresh.latest(limit: 10)
        #expect(page.entries.map(\.content) == ["entry 1", "entry 2", "entry 3", "entry 4"])
        #expect(page.entries.allSatisfy { $0.revision == nil }, "revisions belonged to the old journal")
    }

    /// Closed when it returns: its last connection checkpoints the log into the file.
    private static func storeFourEntries(at path: String) async throws {
        let store = try TranscriptStore(path: path)
        for index in 1...4 {
            try await store.apply(
                TranscriptEntry(id: MessageID("e\(index)"), sender: .user, content: "entry \(index)", timestamp: Date(), status: .delivered, revision: index))
        }
    }

    @Test func aFullDiskIsSaidOnceAndItsEndToo() {
        var condition = StorageCondition(program: "tether-protod", path: "/", replaced: [])
        let full = DatabaseError(resultCode: .SQLITE_FULL, message: "database or disk is full")
        let report = condition.writeFailed(full)
        #expect(report?.state == .full)
        #expect(report?.words?.hasPrefix("the disk holding / is full (") == true, "\(report?.words ?? "")")
        #expect(report?.words?.hasSuffix(": free some space; nothing you sent was lost") == true)
        #expect(condition.writeFailed(full) == nil, "said once")
        #expect(condition.writeFailed(DatabaseError(resultCode: .SQLITE_CONSTRAINT)) == nil, "another failure is not a full disk")
        #expect(condition.writeSucceeded()?.state == .ok)
        #expect(condition.writeSucceeded() == nil)
    }
}
