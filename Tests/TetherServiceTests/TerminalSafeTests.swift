import Testing
import TetherService

@Suite struct TerminalSafeTests {
    @Test func controlsAndOverridesAreShownAndTextIsKept() {
        #expect(TerminalSafe.visible("plain 你好 🙂\tand\nlines") == "plain 你好 🙂\tand\nlines")
        #expect(TerminalSafe.visible("\u{1B}[2J\u{1B}]0;title\u{07}") == "^[[2J^[]0;title^G")
        #expect(TerminalSafe.visible("a\rb\u{7F}\u{00}") == "a^Mb^?^@")
        #expect(TerminalSafe.visible("\u{9B}31m \u{202E}abc\u{2066}") == "<U+009B>31m <U+202E>abc<U+2066>")
        #expect(TerminalSafe.visible("one\ntwo", newlines: false) == "one^Jtwo")
    }
}
