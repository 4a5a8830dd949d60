import Foundation

/// Durations measured for one path, in milliseconds.
struct Samples {
    private(set) var milliseconds: [Double] = []

    mutating func add(_ duration: Duration) {
        milliseconds.append(Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15)
    }

    /// The `fraction` quantile (0.5 for the median), nearest rank.
    func quantile(_ fraction: Double) -> Double {
        guard !milliseconds.isEmpty else { return .nan }
        let sorted = milliseconds.sorted()
        let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    var median: Double { quantile(0.5) }
    var p99: Double { quantile(0.99) }
    var maximum: Double { milliseconds.max() ?? .nan }
    var count: Int { milliseconds.count }
}

/// One line of the table: what was measured, Tether's figure, the baseline's, the target.
struct BenchRow {
    var measurement: String
    var tether: String
    var baseline: String
    var target: String
    /// Nil where the row has no target of its own.
    var met: Bool?
    /// False where the row could not be measured (``tether`` says why).
    var measured = true
}

struct BenchTable {
    var rows: [BenchRow] = []
    var notes: [String] = []

    mutating func add(_ row: BenchRow) {
        rows.append(row)
        // Each row as it is measured, for a run that is watched or cut short.
        FileHandle.standardError.write(Data("bench: \(row.measurement): \(row.tether) | \(row.baseline) | \(row.target) | \(Self.verdict(row))\n".utf8))
    }

    /// Rows that could not be measured.
    var unmeasured: [BenchRow] { rows.filter { !$0.measured } }

    /// A table cell: one line (a reason may hold a program's output), its bars escaped.
    private static func cell(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ").replacingOccurrences(
            of: "|", with: "\\|")
    }

    private static func verdict(_ row: BenchRow) -> String {
        guard row.measured else { return "**not measured**" }
        return switch row.met {
        case true?: "met"
        case false?: "**missed**"
        case nil: ""
        }
    }

    var markdown: String {
        var lines = [
            "| measurement | Tether | baseline (same run) | target | |",
            "|---|---|---|---|---|",
        ]
        for row in rows {
            let cells = [row.measurement, row.tether, row.baseline, row.target, Self.verdict(row)].map(Self.cell)
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        if !notes.isEmpty {
            lines.append("")
            lines += notes.map { "- \($0)" }
        }
        return lines.joined(separator: "\n")
    }
}

/// Milliseconds, with as many decimals as the size needs.
func formatMilliseconds(_ value: Double) -> String {
    guard value.isFinite else { return "—" }
    return value < 1 ? String(format: "%.3f ms", value) : value < 10 ? String(format: "%.2f ms", value) : String(format: "%.0f ms", value)
}

/// A rate with thousands separated.
func formatRate(_ perSecond: Double, unit: String) -> String {
    guard perSecond.isFinite else { return "—" }
    return "\(formatCount(perSecond)) \(unit)/s"
}

/// A count with thousands separated.
func formatCount(_ value: Double) -> String {
    guard value.isFinite else { return "—" }
    let formatter = NumberFormatter()
    formatter.numberStyle = .decimal
    formatter.maximumFractionDigits = 0
    return formatter.string(from: NSNumber(value: value)) ?? "\(Int(value))"
}

/// Bytes in B, KB or MB (powers of 1000).
func formatBytes(_ bytes: Int) -> String {
    switch bytes {
    case ..<1_000: "\(bytes) B"
    case ..<1_000_000: String(format: "%.1f KB", Double(bytes) / 1_000)
    default: String(format: "%.2f MB", Double(bytes) / 1_000_000)
    }
}
