import Foundation

/// The line the user types into: an editable text with a cursor, and the history of what
/// was sent, recalled with the arrow keys. Each character is measured once, as it is typed,
/// and the columns before the cursor are kept as the text is edited: drawing the input line
/// after a key neither measures characters again nor adds up the line's widths.
public struct Composer: Sendable, Equatable {
    public private(set) var text: [Character] = []
    /// The terminal columns each character of `text` takes.
    public private(set) var widths: [Int] = []
    /// Where the next character goes, from 0 to `text.count`.
    public private(set) var cursor = 0
    /// The columns the characters before the cursor take.
    public private(set) var cursorColumns = 0
    /// The columns the whole text takes.
    private var columns = 0
    /// Messages sent, oldest first.
    public private(set) var history: [String]
    /// While recalling: which history entry is shown; nil while editing a new line.
    private var recalling: Int?
    private var unsent: [Character] = []

    public init(draft: String = "", history: [String] = []) {
        self.history = history
        show(Array(draft))
    }

    public var draft: String { String(text) }
    public var isEmpty: Bool { text.isEmpty }

    public mutating func insert(_ character: Character) {
        let width = TerminalText.columns(of: character)
        text.insert(character, at: cursor)
        widths.insert(width, at: cursor)
        cursor += 1
        cursorColumns += width
        columns += width
    }

    public mutating func deleteBackward() {
        guard cursor > 0 else { return }
        cursor -= 1
        text.remove(at: cursor)
        let width = widths.remove(at: cursor)
        cursorColumns -= width
        columns -= width
    }

    public mutating func deleteForward() {
        guard cursor < text.count else { return }
        text.remove(at: cursor)
        columns -= widths.remove(at: cursor)
    }

    public mutating func moveLeft() {
        guard cursor > 0 else { return }
        cursor -= 1
        cursorColumns -= widths[cursor]
    }

    public mutating func moveRight() {
        guard cursor < text.count else { return }
        cursorColumns += widths[cursor]
        cursor += 1
    }

    public mutating func moveToStart() {
        cursor = 0
        cursorColumns = 0
    }

    public mutating func moveToEnd() {
        cursor = text.count
        cursorColumns = columns
    }

    /// Shows the previous history entry (the line being typed is kept for coming back).
    public mutating func recallOlder() {
        guard !history.isEmpty else { return }
        let index: Int
        if let recalling {
            index = max(0, recalling - 1)
        } else {
            unsent = text
            index = history.count - 1
        }
        recalling = index
        show(Array(history[index]))
    }

    /// Shows the next history entry, or the line that was being typed after the newest.
    public mutating func recallNewer() {
        guard let recalling else { return }
        if recalling + 1 < history.count {
            self.recalling = recalling + 1
            show(Array(history[recalling + 1]))
        } else {
            self.recalling = nil
            show(unsent)
        }
    }

    /// Takes the line to send (trimmed; nil when blank), adds it to the history and clears it.
    public mutating func submit() -> String? {
        let line = String(text).trimmingCharacters(in: .whitespaces)
        guard !line.isEmpty else { return nil }
        if history.last != line { history.append(line) }
        if history.count > 500 { history.removeFirst(history.count - 500) }
        recalling = nil
        unsent = []
        show([])
        return line
    }

    private mutating func show(_ characters: [Character]) {
        text = characters
        widths = characters.map(TerminalText.columns(of:))
        columns = widths.reduce(0, +)
        cursor = characters.count
        cursorColumns = columns
    }
}
