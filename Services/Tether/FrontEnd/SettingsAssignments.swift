/// `tether session set`'s arguments: `model=NAME`, `thinking=LEVEL` (or `think=LEVEL`).
public struct SettingsAssignments: Sendable, Equatable {
    public var model: String?
    public var thinking: String?

    public init(model: String? = nil, thinking: String? = nil) {
        self.model = model
        self.thinking = thinking
    }

    /// Reads `NAME=VALUE` words; what cannot be read is said in words.
    public static func read(_ words: [String]) -> Result<SettingsAssignments, Problem> {
        var read = SettingsAssignments()
        guard !words.isEmpty else { return .failure(Problem("nothing to set: give model=NAME, thinking=LEVEL or both")) }
        for word in words {
            guard let equals = word.firstIndex(of: "="), equals != word.startIndex else {
                return .failure(Problem("\(word) is not NAME=VALUE: give model=NAME or thinking=LEVEL"))
            }
            let value = String(word[word.index(after: equals)...])
            guard !value.isEmpty else { return .failure(Problem("\(word) gives no value")) }
            switch word[..<equals].lowercased() {
            case "model": read.model = value
            case "thinking", "think": read.thinking = value
            default: return .failure(Problem("\(word[..<equals]) is not a setting Tether changes: model or thinking"))
            }
        }
        return .success(read)
    }

    /// Why arguments could not be read.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var description: String

        init(_ description: String) {
            self.description = description
        }
    }
}
