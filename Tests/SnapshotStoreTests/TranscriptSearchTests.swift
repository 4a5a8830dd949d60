import Foundation
import GRDB
import SnapshotStore
import Testing
import TetherSchema
import TetherTesting
import TetherWire

/// snapd's full-text index: kept as entries come, change and go; words found as words or
/// their starts, in any case and with or without accents; newest first, a page at a time.
@Suite struct TranscriptSearchTests {
    private func entry(_ id: String, _ content: String, session: String? = nil, sender: Sender = .user) -> TranscriptEntry {
        var entry = TranscriptEntry(
            id: MessageID(id), sender: sender, content: content, timestamp: Date(timeIntervalSince1970: 1_800_000_000), status: .delivered)
        entry.session = session
        return entry
    }

    private func found(_ store: TranscriptStore, _ words: String, limit: Int = 20, before: Int? = nil, session: String? = nil) async throws -> [String] {
        try await store.search(words, limit: limit, before: before, session: session)?.hits.map(\.entry.id.value) ?? ["nothing to search for"]
    }

    @Test func wordsAreFoundAsWordsOrTheirStartsInAnyCaseWithOrWithoutAccents() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        try await store.apply(entry("a", "Deploy the build to staging"))
        try await store.apply(entry("b", "The café is closed on Sundays"))
        try await store.apply(entry("c", "deployed: version 2.3 is live", sender: .bot(name: "Opta")))
        try await store.apply(entry("d", "nothing here"))
        #expect(try await found(store, "deploy") == ["c", "a"], "newest first; deployed starts with deploy")
        #expect(try await found(store, "DEPLOY build") == ["a"], "every word must be there")
        #expect(try await found(store, "cafe") == ["b"])
        #expect(try await found(store, "Café") == ["b"])
        #expect(try await found(store, "staging production") == [])
        #expect(try await found(store, "\"deploy* (the") == ["a"], "what the query language would read as operators are words")
        #expect(try await found(store, "deploy OR nothing") == [], "OR is a word too")
        #expect(try await found(store, "?! …") == ["nothing to search for"])
        let hit = try #require(try await store.search("build", limit: 1)?.hits.first)
        #expect(hit.excerpt == "Deploy the \u{2}build\u{3} to staging")
    }

    @Test func theIndexFollowsChangedTextAndCompactionButNotStatusChanges() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite", maximumEntries: 10)
        try await store.apply(entry("grown", "the reply so"))
        var whole = entry("grown", "the reply so far is whole now")
        whole.revision = 2
        try await store.apply(whole)
        #expect(try await found(store, "whole") == ["grown"])
        try await store.apply(DeliveryUpdate(id: MessageID("grown"), status: .delivered))
        #expect(try await found(store, "reply") == ["grown"])
        for index in 0..<30 { try await store.apply(entry("later-\(index)", "later message \(index)")) }
        #expect(try await found(store, "whole") == [], "compacted away, also from the index")
        #expect(try await found(store, "later").count == 11, "the cap and a tenth")
    }

    @Test func pagesGoOlderAndASessionIsChosen() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        for index in 0..<25 {
            try await store.apply(entry("m\(index)", "note \(index)", session: index % 2 == 0 ? "agent:main:main" : "agent:main:side"))
        }
        try await store.apply(entry("none", "note without a session"))
        let first = try #require(try await store.search("note", limit: 10))
        #expect(first.hits.map(\.entry.id.value) == ["none"] + (16...24).reversed().map { "m\($0)" })
        let second = try #require(try await store.search("note", limit: 10, before: first.nextBefore))
        #expect(second.hits.map(\.entry.id.value) == (6...15).reversed().map { "m\($0)" })
        let last = try #require(try await store.search("note", limit: 10, before: second.nextBefore))
        #expect(last.hits.count == 6 && last.nextBefore == nil)
        #expect(try await found(store, "note", limit: 3, session: "agent:main:side") == ["none", "m23", "m21"])
    }

    @Test func aHitIsShownWithTheMessagesAroundItInItsSession() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite", maximumEntries: 10)
        for index in 0..<10 {
            try await store.apply(entry("m\(index)", "note \(index)", session: index % 2 == 0 ? "agent:main:main" : "agent:main:side"))
        }
        let hit = try #require(try await store.search("4", limit: 1)?.hits.first)
        #expect(hit.entry.id.value == "m4")
        let all = try await store.around(hit.position, count: 2)
        #expect(all.entries.map(\.id.value) == ["m2", "m3", "m4", "m5", "m6"] && all.focus == 2)
        let inSession = try await store.around(hit.position, count: 2, session: "agent:main:main")
        #expect(inSession.entries.map(\.id.value) == ["m0", "m2", "m4", "m6", "m8"] && inSession.focus == 2)
        let first = try #require(try await store.search("0", limit: 1)?.hits.first)
        let atStart = try await store.around(first.position, count: 3)
        #expect(atStart.entries.map(\.id.value) == ["m0", "m1", "m2", "m3"] && atStart.focus == 0)
        #expect(try await store.around(hit.position, count: 0).entries.map(\.id.value) == ["m4"])
        // Compacted away: the messages around where it was, none marked.
        for index in 10..<20 { try await store.apply(entry("m\(index)", "later \(index)")) }
        let gone = try await store.around(hit.position, count: 2)
        #expect(gone.focus == nil && gone.entries.count <= 2 && !gone.entries.contains { $0.id.value == "m4" }, "\(gone.entries.map(\.id.value))")
    }

    /// Starts longer than the index keeps as terms are searched as the words that begin with
    /// them, found in the index; beyond ``TranscriptStore/searchedWordsLimit`` such words, as a
    /// start again. Either way every word beginning so is found, newest first.
    @Test func aLongStartFindsEveryWordBeginningWithIt() async throws {
        let run = try TestRunDirectory()
        let store = try TranscriptStore(path: run.path + "/snapd.sqlite")
        try await store.apply(entry("a", "the deployment failed"))
        try await store.apply(entry("b", "deploy again"))
        try await store.apply(entry("c", "two deployments are running"))
        try await store.apply(entry("d", "Déploiement fini"))
        try await store.apply(entry("e", "deployment of deployments"))
        #expect(try await found(store, "deploym") == ["e", "c", "a"])
        #expect(try await found(store, "deployments") == ["e", "c"])
        #expect(try await found(store, "deployment running") == ["c"])
        #expect(try await found(store, "deploiement") == ["d"])
        #expect(try await found(store, "deploymentz") == [], "no word begins so")
        #expect(try await found(store, "deploymentz deploy") == [])
        let many = TranscriptStore.searchedWordsLimit + 5
        for index in 0..<many { try await store.apply(entry("w\(index)", "configuration\(index) changed")) }
        #expect(try await found(store, "configurat", limit: 100) == (0..<many).reversed().map { "w\($0)" })
        #expect(try await found(store, "configuration1") == ((10...19).reversed() + [1]).map { "w\($0)" }, "configuration1 and 10 to 19")
    }

    /// A store made before the index existed gets it, with what it holds, when it is opened.
    @Test func anOlderStoreIsIndexedWhenOpened() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/snapd.sqlite"
        do {
            let store = try TranscriptStore(path: path)
            try await store.apply(entry("kept", "written before the index"))
        }
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "DROP TABLE transcript_terms; DROP TABLE transcript_search; DROP TRIGGER transcript_search_insert")
            try db.execute(sql: "DROP TRIGGER transcript_search_delete; DROP TRIGGER transcript_search_update")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier IN ('add search', 'index word starts')")
        }
        try queue.close()
        let reopened = try TranscriptStore(path: path)
        #expect(try await found(reopened, "written") == ["kept"])
    }

    /// A store indexed before word starts were kept as terms is indexed again when opened.
    @Test func aStoreIndexedWithoutWordStartsIsIndexedAgain() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/snapd.sqlite"
        do {
            let store = try TranscriptStore(path: path)
            try await store.apply(entry("kept", "written with the first index"))
        }
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            // The index as the migration "add search" made it.
            try db.execute(sql: "DROP TABLE transcript_terms; DROP TABLE transcript_search")
            try db.execute(
                sql: """
                    CREATE VIRTUAL TABLE transcript_search USING fts5(
                        content, content='transcript', content_rowid='position', tokenize='unicode61 remove_diacritics 2');
                    INSERT INTO transcript_search(transcript_search) VALUES ('rebuild');
                    DELETE FROM grdb_migrations WHERE identifier = 'index word starts';
                    """)
        }
        try queue.close()
        let reopened = try TranscriptStore(path: path)
        #expect(try await found(reopened, "writ") == ["kept"])
        #expect(try await found(reopened, "written with") == ["kept"])
        try await reopened.apply(entry("new", "written after"))
        #expect(try await found(reopened, "written") == ["new", "kept"])
        let reader = try DatabaseQueue(path: path)
        let definition = try await reader.read { db in
            try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'transcript_search'")
        }
        #expect(definition?.contains("prefix='1 2 3 4 5 6'") == true, "\(definition ?? "no index")")
    }
}
