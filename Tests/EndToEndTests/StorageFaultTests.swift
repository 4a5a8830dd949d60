import Foundation
import Testing
import TetherSchema
import TetherTesting

#if canImport(Glibc)
import Glibc
#endif

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
        /// Its first 4 KiB (the SQLite header and the first page) overwritten with garbage.
        case header

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
            case .header:
                try handle.seek(toOffset: 0)
                try handle.write(contentsOf: Data((0..<Int(min(size, 4096))).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }))
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
        let stopped = first.supervisor.standardOutput.split(separator: "\n").suffix(12).joined(separator: "\n")
        for file in ["protod.sqlite", "conversation.sqlite", "snapd.sqlite"] {
            let path = first.run.path + "/" + file
            let walSize = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            #expect(walSize == 0, "\(file)-wal (\(walSize) bytes) left behind by the stop:\n\(stopped)")
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
        let asides = try FileManager.default.contentsOfDirectory(atPath: set.run.path).filter {
            $0.contains(".sqlite.damaged-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm")
        }
        #expect(asides.count == 3, "set aside: \(asides)")
        // The programs started once: no restart loop.
        for program in set.state()?.programs ?? [] where ["protod", "snapd"].contains(program.name) {
            #expect(program.restarts == 0, "\(program.name) restarted \(program.restarts) times")
        }

        // What was read back is sent, and what the transcript still shows of the rest (snapd
        // offers it once protod's journal is new); nothing is sent twice, nothing stays queued.
        let recovered = Self.messagesStillToBeSent(in: said)
        #expect(recovered != nil, "the words say nothing of the queued messages: \(said)")
        let after = try set.tether(["send", "after the damage"])
        #expect(after.status == 0, "\(after.standardError)")
        let received = await eventually(timeout: .seconds(15)) {
            set.gatewayRecord().compactMap { $0["content"] as? String }.filter { $0.hasPrefix("queued ") }.count >= (recovered ?? 0)
        }
        #expect(received)
        let settled = await eventually(timeout: .seconds(15)) {
            let own = (try? await DamagedOutboxTests.ownMessages(in: set)) ?? [:]
            return own.values.allSatisfy { $0.status.isFinal }
        }
        let own = try await DamagedOutboxTests.ownMessages(in: set)
        #expect(settled, "left unsettled: \(own.values.filter { !$0.status.isFinal }.map { "\($0.content): \($0.status.rawValue)" })")
        let contents = set.gatewayRecord().compactMap { $0["content"] as? String }
        #expect(Set(contents).count == contents.count, "sent twice: \(contents)")
        let delivered = contents.filter { $0.hasPrefix("queued ") }.count
        #expect(delivered >= (recovered ?? 0), "recovered \(recovered ?? -1), delivered \(contents)")
        for entry in own.values where entry.content.hasPrefix("queued ") {
            #expect(entry.status == .delivered, "\(entry.content) is \(entry.status.rawValue) though the transcript held it whole")
        }
        if damage == .zeroed {
            #expect(said.contains("no message could be read from it; the conversation journal held no other message waiting"), "\(said)")
            // The terminal UI says it too, until Esc.
            if Tmux.available {
                let ui = try Tmux(
                    [Programs.path("tether"), "--run-dir", set.run.path], columns: 200, rows: 24, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
                // protod's notices and snapd's come from two programs, each in its time: both are waited for.
                _ = try await ui.waitFor("Storage: the outbox (\(set.run.path)/protod.sqlite) was damaged", "Storage: the transcript store")
            }
        }
        print(
            "damage \(damage.rawValue): \(recovered ?? 0) of 3 queued messages read back from the outbox, \(delivered) delivered in all; status said:\n\(said)")
    }

    /// "…; 3 messages to be sent; …" → 3.
    static func messagesStillToBeSent(in said: String) -> Int? {
        guard let range = said.range(of: #"(\d+) messages? to be sent"#, options: .regularExpression) else { return nil }
        return Int(said[range].split(separator: " ")[0])
    }
}

/// The run directory on a small file system of its own, filled while the set runs.
@Suite(.serialized) struct FullDiskTests {
    /// Mounts a tmpfs of `megabytes` on a new run directory; nil (with the reason printed) where it cannot.
    static func smallFileSystem(megabytes: Int) throws -> TestRunDirectory? {
        guard getuid() == 0 else {
            print("skipped: mounting a small tmpfs for the run directory needs root")
            return nil
        }
        let run = try TestRunDirectory()
        let mount = try ChildProcess(
            "/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700", "tmpfs", run.path], outputDirectory: NSTemporaryDirectory(), name: "mount")
        guard try mount.waitForExit(timeout: .seconds(10)) == 0 else {
            print("skipped: cannot mount a tmpfs here: \(mount.standardError)")
            return nil
        }
        return run
    }

    static func unmount(_ run: TestRunDirectory) {
        _ = try? ChildProcess("/bin/umount", ["-l", run.path], outputDirectory: NSTemporaryDirectory(), name: "umount").waitForExit(timeout: .seconds(10))
    }

    /// Fills the file system holding `directory`; returns the filler's path.
    static func fill(_ directory: String) -> String {
        let path = directory + "/filler"
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        guard let handle = FileHandle(forWritingAtPath: path) else { return path }
        let block = Data(repeating: 0x46, count: 64 * 1024)
        while (try? handle.write(contentsOf: block)) != nil {}
        // The last partial block.
        while (try? handle.write(contentsOf: Data(repeating: 0x46, count: 512))) != nil {}
        try? handle.close()
        return path
    }

    @Test func aFullDiskRefusesInWordsAndTheSetCarriesOnWhenSpaceReturns() async throws {
        guard let run = try Self.smallFileSystem(megabytes: 24) else { return }
        defer { Self.unmount(run) }
        let outputs = try TestRunDirectory()
        let set = try await ComposedSet(in: run, outputs: outputs)
        defer { set.stop() }
        #expect(try set.tether(["send", "before the disk fills"]).status == 0)
        let supervisorPID = try #require(set.state()?.supervisorPID)

        let filler = Self.fill(run.path)
        var delivered = 0
        var refused = 0
        for index in 1...6 {
            let send = try set.tether(["send", "--timeout", "10", "while full \(index)"])
            if send.status == 0 {
                delivered += 1
            } else {
                refused += 1
                #expect(send.status == 5, "refused at send time, nothing queued: \(send.status) \(send.standardError)")
                #expect(send.standardError.contains("the disk holding \(run.path) is full (tmpfs at \(run.path), "), "\(send.standardError)")
                #expect(send.standardError.contains("free some space; nothing you sent was lost"), "\(send.standardError)")
            }
        }
        let whileFull = try set.tether(["status"]).standardOutput
        #expect(kill(supervisorPID, 0) == 0, "the supervisor is alive while its log cannot be written")
        if refused > 0 {
            #expect(whileFull.contains("storage: the disk holding \(run.path) is full"), "\(whileFull)")
        }

        try FileManager.default.removeItem(atPath: filler)
        var after = 0
        for index in 1...3 where try set.tether(["send", "after space returned \(index)"]).status == 0 { after += 1 }
        #expect(after == 3, "the set carries on by itself once space returns")
        let status = try set.tether(["status"]).standardOutput
        #expect(!status.contains("is full"), "\(status)")
        #expect(status.contains("storage: ok"), "\(status)")
        #expect(kill(supervisorPID, 0) == 0)
        for program in set.state()?.programs ?? [] { #expect(program.phase == "running", "\(program.name) is \(program.phase)") }

        // Every message the gateway had, once; none of the refused ones. (The gateway's record is
        // on the same full disk: lines it could not write while full are missing from it.)
        let contents = set.gatewayRecord().compactMap { $0["content"] as? String }
        #expect(Set(contents).count == contents.count, "sent twice: \(contents)")
        #expect(contents.filter { $0.hasPrefix("while full") }.count <= delivered, "\(contents)")
        #expect(contents.filter { $0.hasPrefix("after space returned") }.count == 3, "\(contents)")
        print("full disk: \(delivered) of 6 sends delivered while full, \(refused) refused in words; \(after) of 3 delivered after space returned")
        print("tether status while full:\n\(whileFull)")
    }
}
