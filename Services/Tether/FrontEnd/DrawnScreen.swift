/// What the terminal shows, as the terminal UI last wrote it: so that a frame writes only
/// the rows that differ (a growing reply its own lines) and a key only the input line.
struct DrawnScreen {
    /// A row to write, and where.
    struct Write: Equatable {
        var index: Int
        var row: ScreenRow
    }

    private var rows: [ScreenRow] = []
    private var width = 0
    private var height = 0

    /// The rows of `frame` to write on a terminal of `width` × `height`: those that differ
    /// from what it shows, every one after a change of size or ``forget()``; none below the
    /// terminal's last row.
    mutating func writes(for frame: ScreenFrame, width: Int, height: Int) -> [Write] {
        if (width, height) != (self.width, self.height) { forget() }
        (self.width, self.height) = (width, height)
        let writes = frame.rows.enumerated().filter { index, row in index < height && (index >= rows.count || rows[index] != row) }
        rows = Array(frame.rows.prefix(height))
        return writes.map { Write(index: $0.offset, row: $0.element) }
    }

    /// Where the input line `row` goes (the last row drawn), if a whole frame of this size
    /// was drawn; nil when the whole screen must be drawn first.
    mutating func inputLine(_ row: ScreenRow, width: Int, height: Int) -> Write? {
        guard (width, height) == (self.width, self.height), !rows.isEmpty else { return nil }
        rows[rows.count - 1] = row
        return Write(index: rows.count - 1, row: row)
    }

    /// The terminal no longer shows what was written (it was given back and taken again).
    mutating func forget() {
        rows = []
    }
}
