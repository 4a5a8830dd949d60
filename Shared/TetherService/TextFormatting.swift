import FoundationEssentials

/// Columns of text, each as wide as its widest cell, for tables people read in a terminal.
public struct TextTable: Sendable {
    private var rows: [[String]]

    /// A table with a header row.
    public init(header: [String]) {
        rows = [header]
    }

    public mutating func append(_ row: [String]) {
        rows.append(row)
    }

    /// The table, one line a row; the last column is not padded.
    public func render() -> String {
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count + 2)
            }.joined()
        }.joined(separator: "\n")
    }
}

/// Durations in the short words of `ps`: `42s`, `3m7s`, `2h5m`.
public func uptimeWords(_ seconds: Double) -> String {
    let total = Int(max(0, seconds))
    if total < 60 { return "\(total)s" }
    if total < 3600 { return "\(total / 60)m\(total % 60)s" }
    return "\(total / 3600)h\(total % 3600 / 60)m"
}

extension Duration {
    /// The duration in seconds, with its fraction.
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
