import Foundation
import GRDB
import ProtocolHandler
import Testing
import TetherBus
import TetherStorage
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// Stores an earlier Tether kept in the run directory, moved to the state directory on real
/// files: whole, once, and the old place emptied only after the new one holds everything.
@Suite struct StoreRelocationTests {
    /// An old place and a new one, side by side in a private folder.
    struct Places {
        let root = try! TestRunDirectory()
        var old: String { root.path + "/run" }
        var new: String { root.path + "/state" }

        init() throws {
            try FileManager.default.createDirectory(atPath: old, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: new, withIntermediateDirectories: true)
        }
    }

    /// An outbox with `count` messages waiting, left with its write-ahead log unmerged: the
    /// connection is not closed, as a program killed would leave it.
    static func outboxLeftOpen(at path: String, count: Int) async throws -> Outbox {
        let outbox = try Outbox(path: path)
        for index in 1...count { _ = try await outbox.enqueue(id: MessageID("m\(index)"), content: "waiting \(index) ✓ 你好") }
        return outbox
    }

    static func contents(of path: String) throws -> [String] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT content FROM outbox ORDER BY rowid") }
    }

    @Test func aStoreInTheOldPlaceIsMovedWholeWithItsLog() async throws {
        let places = try Places()
        let outbox = try await Self.outboxLeftOpen(at: places.old + "/protod.sqlite", count: 5)
        let walSize = (try FileManager.default.attributesOfItem(atPath: places.old + "/protod.sqlite-wal")[.size] as? Int) ?? 0
        #expect(walSize > 0, "the rows are in the write-ahead log, not yet in the file")
        let outcome = try StoreRelocation.move("protod.sqlite", what: "the outbox", from: [places.old], to: places.new)
        withExtendedLifetime(outbox) {}
        #expect(
            outcome
                == .moved(
                    from: places.old + "/protod.sqlite",
                    words: "moved the outbox from \(places.old)/protod.sqlite, which logout and reboot empty, to \(places.new)/protod.sqlite"))
        #expect(try Self.contents(of: places.new + "/protod.sqlite") == (1...5).map { "waiting \($0) ✓ 你好" })
        for extra in ["", "-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: places.old + "/protod.sqlite" + extra), "protod.sqlite\(extra) left in the old place")
        }
        // The moved file opens as the outbox it was, and a second start moves nothing.
        let reopened = try Outbox(path: places.new + "/protod.sqlite")
        #expect(try await reopened.pending().count == 5)
        #expect(try StoreRelocation.move("protod.sqlite", what: "the outbox", from: [places.old], to: places.new) == .nothingToMove)
        #expect(!(try FileManager.default.contentsOfDirectory(atPath: places.new)).contains { $0.contains(".moving-") })
    }

    @Test func aStoreAlreadyInTheNewPlaceWinsAndTheOldOneIsLeftAsItIs() async throws {
        let places = try Places()
        _ = try await Self.outboxLeftOpen(at: places.old + "/protod.sqlite", count: 2)
        _ = try await Self.outboxLeftOpen(at: places.new + "/protod.sqlite", count: 3)
        let outcome = try StoreRelocation.move("protod.sqlite", what: "the outbox", from: [places.old], to: places.new)
        guard case .leftBehind(let at, let words) = outcome else { Issue.record("\(outcome)"); return }
        #expect(at == places.old + "/protod.sqlite")
        #expect(words.contains("is used; an older one is still at \(places.old)/protod.sqlite"), "\(words)")
        #expect(try Self.contents(of: places.new + "/protod.sqlite").count == 3)
        #expect(try Self.contents(of: places.old + "/protod.sqlite").count == 2)
    }

    @Test func aDamagedStoreIsMovedAsItIsForTheDamageHandlingToRead() throws {
        let places = try Places()
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        _ = FileManager.default.createFile(atPath: places.old + "/snapd.sqlite", contents: garbage)
        let outcome = try StoreRelocation.move("snapd.sqlite", what: "the transcript", from: [places.old], to: places.new)
        guard case .moved = outcome else { Issue.record("\(outcome)"); return }
        #expect(FileManager.default.contents(atPath: places.new + "/snapd.sqlite") == garbage, "byte for byte")
        #expect(!FileManager.default.fileExists(atPath: places.old + "/snapd.sqlite"))
        #expect(StoredDatabase.problem(at: places.new + "/snapd.sqlite") != nil, "still found damaged at the new place")
    }

    @Test func theFirstOldPlaceHoldingOneIsTakenAndNothingIsNothing() throws {
        let places = try Places()
        #expect(try StoreRelocation.move("protod.sqlite", what: "the outbox", from: [places.old], to: places.new) == .nothingToMove)
        #expect(try StoreRelocation.moveStores([.init("protod.sqlite", what: "the outbox")], into: places.new, from: []).isEmpty)
    }

    @Test func theStateDirectoryIsChosenInOrder() {
        let home = ["HOME": "/home/me"]
        #expect(StateDirectory.resolve(environment: home).path == "/home/me/.local/state/tether")
        #expect(StateDirectory.resolve(environment: home.merging(["XDG_STATE_HOME": "/s"]) { $1 }).path == "/s/tether")
        #expect(StateDirectory.resolve(environment: home.merging(["XDG_STATE_HOME": "relative"]) { $1 }).path == "/home/me/.local/state/tether")
        // A run directory named on purpose holds everything, unless the state directory is named too.
        #expect(StateDirectory.resolve(environment: home.merging(["TETHER_RUN": "/r"]) { $1 }).path == "/r")
        #expect(StateDirectory.resolve(runDirectory: "/r2", environment: home.merging(["TETHER_RUN": "/r"]) { $1 }).path == "/r2")
        #expect(StateDirectory.resolve(environment: home.merging(["TETHER_RUN": "/r", "TETHER_STATE": "/t"]) { $1 }).path == "/t")
        #expect(StateDirectory.resolve("/x", runDirectory: "/r", environment: home.merging(["TETHER_STATE": "/t"]) { $1 }).path == "/x")
    }

    @Test func theOldPlacesAreTheRunDirectoryAndItsDefault() {
        let state = StateDirectory(path: "/home/me/.local/state/tether")
        let environment = ["XDG_RUNTIME_DIR": "/run/user/7", "TETHER_RUN": "/ignored"]
        #expect(state.legacyDirectories(runDirectory: RunDirectory(path: "/run/user/7/tether"), environment: environment) == ["/run/user/7/tether"])
        #expect(
            state.legacyDirectories(runDirectory: RunDirectory(path: "/elsewhere"), environment: environment) == ["/elsewhere", "/run/user/7/tether"])
        // Everything in one directory: nothing to move from anywhere.
        #expect(StateDirectory(path: "/r").legacyDirectories(runDirectory: RunDirectory(path: "/r"), environment: environment).isEmpty)
        #expect(
            state.legacyDirectories(runDirectory: RunDirectory(path: "/run/user/7/tether"), environment: [:]) == [
                "/run/user/7/tether", "/tmp/tether-\(getuid())",
            ])
    }
}
