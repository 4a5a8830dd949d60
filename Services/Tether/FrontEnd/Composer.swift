import Foundation

/// The line the user types into: an editable text with a cursor, and the history of what
/// was sent, recalled with the arrow keys. Each character is measured once, as it is typed:
/// drawing the input line after a key adds up widths instead of measuring them again.
public struct Composer: Sendable, Equatable {
    public private(set) var text: [Character] = []
    /// The terminal columns each character of `text` takes.
    public private(set) var widths: [Int] = []
    /// Where the next character goes, from 0 to `text.count`.
    public private(set) var cursor = 0
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
        text.insert(character, at: cursor)
        widths.insert(TerminalText.columns(of: character), at: cursor)
        cursor += 1
    }

    public mutating func deleteBackward() {
        guard cursor > 0 else { return }
        cursor -= 1
        text.remove(at: cursor)
        widths.remove(at: cursor)
    }

    public mutating func deleteForward() {
        guard cursor < text.count else { return }
        text.remove(at: cursor)
        widths.remove(at: cursor)
    }

    public mutating func moveLeft() { cursor = max(0, cursor - 1) }
    public mutating func moveRight() { cursor = min(text.count, cursor + 1) }
    public mutating func moveToStart() { cursor = 0 }
    public mutating func moveToEnd() { cursor = text.count }

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
        cursor = characters.count
    }
}
