/// Colours for the code of a code block, by a small table per language: its keywords, how
/// its comments and strings start, and numbers. A line at a time, carrying an open block
/// comment to the next line. A language it does not know is plain text.
struct CodeHighlighter {
    /// What colours a language's code.
    struct Language {
        var keywords: Set<Substring>
        /// Comments to the end of the line (`//`, `#`); `#` only at a line's start or after a space.
        var lineComments: [String]
        /// A comment's opening and closing marks (`/*`, `*/`).
        var blockComment: (open: String, close: String)?
        /// The characters that open and close a string.
        var quotes: Set<Character>
    }

    private static let cKeywords: Set<Substring> = [
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float", "for", "goto",
        "if", "inline", "int", "long", "register", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union",
        "unsigned", "void", "volatile", "while", "bool", "true", "false", "NULL",
    ]
    private static let scriptKeywords: Set<Substring> = [
        "async", "await", "break", "case", "catch", "class", "const", "continue", "default", "delete", "do", "else", "export", "extends",
        "false", "finally", "for", "function", "if", "import", "from", "in", "instanceof", "let", "new", "null", "of", "return", "static",
        "super", "switch", "this", "throw", "true", "try", "typeof", "undefined", "var", "void", "while", "yield", "interface", "type",
        "enum", "implements", "private", "public", "protected", "readonly", "as",
    ]

    /// The languages known, by the names a fence gives them.
    static let languages: [String: Language] = {
        let swift = Language(
            keywords: [
                "actor", "any", "as", "associatedtype", "async", "await", "break", "case", "catch", "class", "continue", "default", "defer",
                "deinit", "do", "else", "enum", "extension", "fallthrough", "false", "fileprivate", "for", "func", "guard", "if", "import", "in",
                "init", "inout", "internal", "is", "let", "nil", "open", "private", "protocol", "public", "repeat", "rethrows", "return", "self",
                "Self", "some", "static", "struct", "subscript", "super", "switch", "throw", "throws", "true", "try", "typealias", "var", "where",
                "while", "mutating", "nonisolated", "sending", "consuming", "borrowing",
            ], lineComments: ["//"], blockComment: ("/*", "*/"), quotes: ["\""])
        let python = Language(
            keywords: [
                "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except", "False", "finally",
                "for", "from", "global", "if", "import", "in", "is", "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True",
                "try", "while", "with", "yield", "match", "case", "self",
            ], lineComments: ["#"], blockComment: nil, quotes: ["\"", "'"])
        let script = Language(keywords: scriptKeywords, lineComments: ["//"], blockComment: ("/*", "*/"), quotes: ["\"", "'", "`"])
        let json = Language(keywords: ["true", "false", "null"], lineComments: [], blockComment: nil, quotes: ["\""])
        let shell = Language(
            keywords: [
                "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "in", "function", "return", "exit",
                "local", "export", "readonly", "set", "unset", "echo", "cd", "source", "shift", "trap", "exec", "eval",
            ], lineComments: ["#"], blockComment: nil, quotes: ["\"", "'"])
        let go = Language(
            keywords: [
                "break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough", "for", "func", "go", "goto", "if",
                "import", "interface", "map", "package", "range", "return", "select", "struct", "switch", "type", "var", "true", "false", "nil",
            ], lineComments: ["//"], blockComment: ("/*", "*/"), quotes: ["\"", "`", "'"])
        let rust = Language(
            keywords: [
                "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn", "for", "if", "impl",
                "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
                "true", "type", "unsafe", "use", "where", "while", "Some", "None", "Ok", "Err",
            ], lineComments: ["//"], blockComment: ("/*", "*/"), quotes: ["\""])
        let c = Language(keywords: cKeywords, lineComments: ["//"], blockComment: ("/*", "*/"), quotes: ["\"", "'"])
        return [
            "swift": swift, "python": python, "py": python, "javascript": script, "js": script, "jsx": script, "typescript": script,
            "ts": script, "tsx": script, "json": json, "jsonc": json, "sh": shell, "bash": shell, "shell": shell, "zsh": shell, "go": go,
            "golang": go, "rust": rust, "rs": rust, "c": c, "h": c,
        ]
    }()

    private let language: Language?
    private var inBlockComment = false

    /// A highlighter for code in `language` (a fence's name, any case).
    init(language: String) {
        self.language = Self.languages[language.lowercased()]
    }

    /// The spans of one line of code, in order; the line's characters are all there.
    mutating func spans(of line: String) -> [StyledSpan] {
        guard let language else { return [StyledSpan(line)] }
        let characters = Array(line)
        var spans: [StyledSpan] = []
        var index = 0
        func add(_ end: Int, _ tone: SpanStyle.Tone) {
            let text = String(characters[index..<end])
            if let last = spans.last, last.style.tone == tone {
                spans[spans.count - 1].text += text
            } else {
                spans.append(StyledSpan(text, SpanStyle(tone: tone)))
            }
            index = end
        }
        func starts(_ mark: String, at position: Int) -> Bool {
            let mark = Array(mark)
            return position + mark.count <= characters.count && Array(characters[position..<position + mark.count]) == mark
        }
        while index < characters.count {
            if inBlockComment, let close = language.blockComment?.close {
                var end = index
                while end < characters.count && !starts(close, at: end) { end += 1 }
                if end < characters.count {
                    end += close.count
                    inBlockComment = false
                }
                add(end, .comment)
                continue
            }
            let character = characters[index]
            if let open = language.blockComment?.open, starts(open, at: index) {
                inBlockComment = true
                add(index + open.count, .comment)
                continue
            }
            let afterSpace = index == 0 || characters[index - 1] == " " || characters[index - 1] == "\t"
            if language.lineComments.contains(where: { starts($0, at: index) && ($0 != "#" || afterSpace) }) {
                add(characters.count, .comment)
                continue
            }
            if language.quotes.contains(character) {
                var end = index + 1
                while end < characters.count && characters[end] != character {
                    end += characters[end] == "\\" ? 2 : 1
                }
                add(min(characters.count, end + 1), .string)
                continue
            }
            let previousIsWord = index > 0 && Self.isWord(characters[index - 1])
            if character.isASCII, character.isNumber, !previousIsWord {
                var end = index + 1
                while end < characters.count, characters[end].isASCII, characters[end].isHexDigit || "xXoObB._".contains(characters[end]) { end += 1 }
                add(end, .number)
                continue
            }
            if Self.isWord(character) {
                var end = index + 1
                while end < characters.count && Self.isWord(characters[end]) { end += 1 }
                let word = String(characters[index..<end])
                add(end, language.keywords.contains(Substring(word)) && !previousIsWord ? .keyword : .plain)
                continue
            }
            add(index + 1, .plain)
        }
        return spans
    }

    private static func isWord(_ character: Character) -> Bool {
        character == "_" || character.isLetter || character.isNumber
    }
}
