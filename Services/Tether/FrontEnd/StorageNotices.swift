public import TetherSchema

/// What a front end says of the set's files, from the programs' `storage` reports: each
/// damaged database set aside, once; a full disk while it lasts, and when it has room again.
public struct StorageNotices: Sendable {
    private var reports: [String: StorageReport] = [:]
    /// Notices of files set aside that the person has seen and hidden.
    private var hidden: Set<ReplacedDatabase> = []

    public init() {}

    /// Takes a program's report; returns what is newly worth saying, a sentence each.
    public mutating func apply(_ report: StorageReport) -> [String] {
        let before = reports[report.program]
        reports[report.program] = report
        var lines = report.replaced.filter { before?.replaced.contains($0) != true }.map { "\($0.words)." }
        if report.state == .full, before?.state != .full { lines.append("\(report.words ?? "the disk is full").") }
        if report.state == .ok, before?.state == .full { lines.append("the disk has room again (\(report.program) writes again).") }
        return lines
    }

    /// The problems to show now, a sentence each: a full disk always, files set aside until hidden.
    public var current: [String] {
        reports.values.sorted { $0.program < $1.program }.flatMap { report in
            report.replaced.filter { !hidden.contains($0) }.map { "\($0.words)." }
                + (report.state == .full ? ["\(report.words ?? "the disk is full")."] : [])
        }
    }

    /// The person has read the notices of files set aside (a full disk stays shown).
    public mutating func hide() {
        for report in reports.values { hidden.formUnion(report.replaced) }
    }
}
