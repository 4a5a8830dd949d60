import Foundation
import GRDB
import ProtocolHandler
import SnapshotStore
import Testing
import TetherBus
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
        let (outbox, replaced, _) = try await Outbox.openChecked(path: path, now: now)
        let notice = try #require(replaced)
        #expect(notice.movedTo == path + ".damaged-2027-01-15T080000Z")
        #expect(FileManager.default.fileExists(atPath: notice.movedTo ?? ""))
        #expect(notice.words.hasPrefix("the outbox (\(path)) was damaged ("))
        #expect(
            notice.words.hasSuffix(
                "3 messages read back from it; the conversation journal held no other message waiting; 3 messages to be sent; any that neither held are lost"),
            "\(notice.words)")
        let pending = try await outbox.pending()
        #expect(pending.map(\.id) == ["m1", "m2", "m3"])
        #expect(pending.map(\.content) == ["waiting 1", "waiting 2", "waiting 3"])
        #expect(pending.last?.status == .sent, "a message written before keeps its mark, so it is looked up or sent with its id")
        // The new file is sound; a second start finds nothing to set aside.
        #expect(StoredDatabase.problem(at: path) == nil)
        #expect(try await Outbox.openChecked(path: path).1 == nil)
    }

    @Test func aZeroedOutboxTakesBackFromTheJournalWhatWasNeverConfirmed() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/outbox.sqlite"
        try await outboxWithFiller(at: path)
        try FileHandle(forWritingAtPath: path).map {
            try $0.truncate(atOffset: 0); try $0.close()
        }
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        func entry(_ id: String, _ status: DeliveryStatus, _ seconds: Double, images: [AttachmentNote]? = nil) -> TranscriptEntry {
            TranscriptEntry(
                id: MessageID(id), sender: .user, content: "waiting \(id)", timestamp: t0.addingTimeInterval(seconds), status: status,
                attachments: images)
        }
        let journal = [
            entry("m1", .delivered, 1), entry("m2", .queued, 2), entry("m3", .sent, 3),
            entry("m4", .queued, 4, images: [AttachmentNote(name: "cat.png", mimeType: "image/png", bytes: 10)]),
        ]
        let (outbox, replaced, lost) = try await Outbox.openChecked(path: path, recoveringFrom: journal, now: t0)
        let notice = try #require(replaced)
        #expect(
            notice.words.hasSuffix(
                "no message could be read from it; the conversation journal held 3 messages never confirmed, put back under their own ids; "
                    + "1 of them cannot be sent again (images kept in the outbox alone) and is marked lost; 2 messages to be sent; any that neither held are lost"
            ),
            "\(notice.words)")
        let pending = try await outbox.pending()
        #expect(pending.map(\.id) == ["m2", "m3"])
        #expect(pending.map(\.status) == [.queued, .sent])
        let outcome = try #require(lost)
        #expect(outcome.lost.map(\.id) == [MessageID("m4")])
        #expect(outcome.words == notice.words, "the words the outcome gives again are those said")
        #expect((outcome.salvaged, outcome.recovered, outcome.toSend) == (0, 3, 2))
        #expect(try await outbox.message(id: "m4")?.status == .lost, "kept as lost, so the same id is not taken as new")
        let again = try await outbox.enqueue(id: MessageID("m4"), content: "waiting m4")
        #expect(!again.inserted && again.0.status == .lost)
    }

    /// Marks the store at `path` as changed by a migration this version does not know.
    static func markWrittenByANewerVersion(_ path: String) throws {
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('from a later release')") }
        try queue.close()
    }

    @Test func aStoreANewerVersionWroteIsRefusedInWordsAndLeftAsItIs() async throws {
        let run = try TestRunDirectory()
        let outboxPath = run.path + "/protod.sqlite"
        _ = try await Outbox(path: outboxPath).enqueue(id: MessageID("m1"), content: "kept")
        _ = try ConversationJournal(path: run.path + "/conversation.sqlite")
        _ = try TranscriptStore(path: run.path + "/snapd.sqlite")
        for (file, what) in [("protod.sqlite", "the outbox"), ("conversation.sqlite", "the conversation journal"), ("snapd.sqlite", "the transcript store")] {
            let path = run.path + "/" + file
            try Self.markWrittenByANewerVersion(path)
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            let refusal: NewerStoreRefusal?
            do {
                switch file {
                case "protod.sqlite": _ = try await Outbox.openChecked(path: path)
                case "conversation.sqlite": _ = try await ConversationJournal.openChecked(path: path)
                default: _ = try await TranscriptStore.openChecked(path: path)
                }
                refusal = nil
            } catch let error as NewerStoreRefusal {
                refusal = error
            }
            let words = try #require(refusal, "\(file) was opened").description
            #expect(words.hasPrefix("\(what) (\(path)) was written by a newer version of Tether than this one (\(TetherVersion.current))"), "\(words)")
            #expect(words.contains("(\"from a later release\")"), "\(words)")
            #expect(words.hasSuffix("it is left as it is: install that version again (or a newer one) to use it"), "\(words)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(file) was changed")
            #expect(try FileManager.default.contentsOfDirectory(atPath: run.path).allSatisfy { !$0.contains(".damaged-") }, "set aside as damaged")
        }
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
