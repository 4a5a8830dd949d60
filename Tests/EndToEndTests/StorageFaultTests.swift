#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TetherTesting

/// Damaged databases and a full disk, through the real programs: never a silent loss, always
/// words, and the set carries on by itself.
@Suite(.serialized) struct StorageFaultTests {
    enum Damage: String, CaseIterable, Sendable {
        /// The file cut to 0 bytes.
        case zeroed
        /// The file cut to half its length.
        case truncated
        /// Its middle half overwritten with garbage, the header kept.
        case middle

        func apply(to path: String) throws {
            guard let handle = FileHandle(forUpdatingAtPath: path) else { throw TestFailure("cannot open \(path)") }
            defer { try? handle.close() }
            let size = try handle.seekToEnd()
            switch self {
            case .zeroed: try handle.truncate(atOffset: 0)
            case .truncated: try handle.truncate(atOffset: size / 2)
            case .middle:
                try handle.seek(toOffset: size / 4)
                try handle.write(contentsOf: Data((0..<Int(size / 2)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }))
            }
        }
    }

    @Test(arguments: Damage.allCases)
    func damagedDatabasesAreSetAsideAndSaidInWords(_ damage: Damage) async throws {
        let first = try await ComposedSet()
        #expect(try first.tether(["send", "before the damage"]).status == 0)
        // Three messages wait in the outbox while the connection is suspended.
        #expect(try first.tether(["suspend"]).status == 0)
        for index in 1...3 {
            let queued = try first.tether(["send", "--timeout", "1", "queued \(index)"])
            #expect(queued.standardError.contains("queued"), "\(queued.standardError)")
        }
        first.stop()
        for file in ["protod.sqlite", "conversation.sqlite", "snapd.sqlite"] {
            let path = first.run.path + "/" + file
            #expect(!FileManager.default.fileExists(atPath: path + "-wal") || (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) == 0)
            try damage.apply(to: path)
        }

        let set = try await ComposedSet(reusing: first)
        defer { set.stop() }
        let status = try set.tether(["status"])
        let said = status.standardOutput
        for what in ["the outbox", "the conversation journal", "the transcript store"] {
            #expect(said.contains("storage: \(what) (\(set.run.path)/"), "\(what) not named: \(said)")
        }
        #expect(said.contains("was damaged ("), "\(said)")
        let asides = try FileManager.default.contentsOfDirectory(atPath: set.run.path).filter { $0.contains(".sqlite.damaged-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
        #expect(asides.count == 3, "set aside: \(asides)")
        // The programs started once: no restart loop.
        for program in set.state()?.programs ?? [] where ["protod", "snapd"].contains(program.name) {
            #expect(program.restarts == 0, "\(program.name) restarted \(program.restarts) times")
        }

        // What was read back is sent; what was not is said lost; nothing is sent twice.
        let recovered = Self.messagesStillToBeSent(in: said)
        #expect(recovered != nil, "the words say nothing of the queued messages: \(said)")
        let after = try set.tether(["send", "after the damage"])
        #expect(after.status == 0, "\(after.standardError)")
        let received = await eventually(timeout: .seconds(15)) {
            set.gatewayRecord().compactMap { $0["content"] as? String }.filter { $0.hasPrefix("queued ") }.count >= (recovered ?? 0)
        }
        #expect(received)
        let contents = set.gatewayRecord().compactMap { $0["content"] as? String }
        #expect(Set(contents).count == contents.count, "sent twice: \(contents)")
        #expect(contents.filter { $0.hasPrefix("queued ") }.count == recovered, "recovered \(recovered ?? -1), delivered \(contents)")
        if damage == .zeroed {
            #expect(said.contains("no message could be read from it: any it held that were waiting to be sent are lost"), "\(said)")
        }
        print("damage \(damage.rawValue): \(recovered ?? 0) of 3 queued messages recovered and delivered; status said:\n\(said)")
    }

    /// "…; 3 messages read back from it, 3 of them still to be sent" → 3; none read → 0.
    static func messagesStillToBeSent(in said: String) -> Int? {
        if said.contains("no message could be read from it") { return 0 }
        guard let range = said.range(of: #"(\d+) of them still to be sent"#, options: .regularExpression) else { return nil }
        return Int(said[range].split(separator: " ")[0])
    }
}
