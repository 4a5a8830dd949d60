public import Foundation
public import TetherSchema

/// What a program says of its files on the `storage` topic: the databases set aside at
/// start, and whether its disk is full now. Writes report in; a changed report comes out.
public struct StorageCondition: Sendable {
    /// The report as last published.
    public private(set) var report: StorageReport
    private let path: String

    /// - Parameters:
    ///   - path: a file the program writes, whose disk is the one watched.
    ///   - replaced: the databases set aside as it opened them.
    public init(program: String, path: String, replaced: [ReplacedDatabase], now: Date = Date()) {
        self.path = path
        report = StorageReport(program: program, state: .ok, replaced: replaced, since: now)
    }

    /// A write failed with `error`: when the disk is full, the report says so in words and
    /// is returned to be published (once, when the state changes); nil otherwise.
    public mutating func writeFailed(_ error: any Error, now: Date = Date()) -> StorageReport? {
        guard StoredDatabase.isDiskFull(error, path: path) else { return nil }
        guard report.state != .full else { return nil }
        report.state = .full
        report.words = StoredDatabase.diskFullWords(path: path)
        report.since = now
        return report
    }

    /// What is said of a database set aside changed (more was recovered from it later): the
    /// report with the new words, to be published; nil when no such database is in it.
    public mutating func reword(file: String, as words: String) -> StorageReport? {
        guard let index = report.replaced.firstIndex(where: { $0.file == file }) else { return nil }
        report.replaced[index].words = words
        return report
    }

    /// A write succeeded: a full disk has room again; the report to publish when that changed.
    public mutating func writeSucceeded(now: Date = Date()) -> StorageReport? {
        guard report.state == .full else { return nil }
        report.state = .ok
        report.words = nil
        report.since = now
        return report
    }

    /// Whether a write failure is a full disk, and its words.
    public func fullDiskWords(for error: any Error) -> String? {
        StoredDatabase.isDiskFull(error, path: path) ? StoredDatabase.diskFullWords(path: path) : nil
    }
}
