import CNcursesw
import TetherService

#if canImport(Glibc)
import Glibc
#endif

/// Text measured in terminal columns: a wide character (CJK, most emoji) takes two, a
/// combining mark none.
enum TerminalText {
    /// wcwidth answers by the locale's character set: make sure it is UTF-8.
    private static let utf8Locale: Void = {
        let current = String(cString: setlocale(LC_CTYPE, nil))
        if !current.uppercased().contains("UTF-8") && !current.uppercased().contains("UTF8") { setlocale(LC_CTYPE, "C.UTF-8") }
    }()

    /// Columns `character` takes.
    static func columns(of character: Character) -> Int {
        _ = utf8Locale
        var columns = 0
        for scalar in character.unicodeScalars {
            let width = Int(tether_tui_scalar_width(scalar.value))
            columns += max(0, width)
        }
        // An emoji sequence (with a variation selector or joiners) is one glyph of two columns.
        if character.unicodeScalars.count > 1, character.unicodeScalars.first?.properties.isEmojiPresentation == true { return 2 }
        return min(2, max(columns, character.unicodeScalars.first.map { $0.value < 0x20 ? 0 : 1 } ?? 0))
    }

    static func columns(of text: some Sequence<Character>) -> Int {
        text.reduce(0) { $0 + columns(of: $1) }
    }

    /// `text` cut to at most `width` columns, its control characters shown as text.
    static func fit(_ text: String, width: Int) -> String {
        var result = ""
        var used = 0
        for character in TerminalSafe.visible(text, newlines: false) {
            let taken = columns(of: character)
            guard used + taken <= width else { break }
            result.append(character)
            used += taken
        }
        return result
    }

    /// `text` in lines of at most `width` columns, broken at spaces where possible; a line
    /// break in the text starts a new line; control characters are shown as text.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        for paragraph in TerminalSafe.visible(text).split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            var used = 0
            var lastSpace: String.Index?
            for character in paragraph {
                let taken = columns(of: character)
                if used + taken > width {
                    if let space = lastSpace, space > line.startIndex {
                        let rest = String(line[line.index(after: space)...])
                        lines.append(String(line[..<space]))
                        line = rest
                        used = columns(of: rest)
                    } else {
                        lines.append(line)
                        line = ""
                        used = 0
                    }
                    lastSpace = nil
                }
                if character == " " { lastSpace = line.endIndex }
                line.append(character)
                used += taken
            }
            lines.append(line)
        }
        return lines
    }

    /// The part of `characters` to show in `width` columns so that the cursor is visible, and
    /// the cursor's column within it. The window moves in steps of half the width: it starts
    /// at the first character from the last step that leaves the cursor within the width (the
    /// line's start while the cursor fits there). Typing at the end so moves it once every
    /// half width, and each key in between changes one character of the line, the one it
    /// adds, rather than every column of it. `widths` are the characters' columns and
    /// `cursorColumns` the columns before the cursor, both kept as the text was edited: a key
    /// costs the window's length, not the text's, and measures nothing.
    static func window(_ characters: [Character], widths: [Int], cursor: Int, cursorColumns: Int, width: Int) -> (String, Int) {
        let step = max(1, width / 2)
        let firstColumn = cursorColumns < width ? 0 : ((cursorColumns - width) / step + 1) * step
        var start = cursor
        var beforeCursor = 0
        while start > 0, cursorColumns - beforeCursor - widths[start - 1] >= firstColumn {
            start -= 1
            beforeCursor += widths[start]
        }
        var end = start
        var used = 0
        while end < characters.count, used + widths[end] <= width {
            used += widths[end]
            end += 1
        }
        // Appended one by one: String's initializer from a sequence of characters is generic
        // and took most of a key's time in Swift.
        var shown = ""
        shown.reserveCapacity(end - start)
        for character in characters[start..<end] { shown.append(character) }
        return (shown, beforeCursor)
    }
}
