/// How a run of text in a row is drawn.
public struct SpanStyle: Sendable, Hashable {
    /// The colour a span takes, by what it is; the terminal picks the colours.
    public enum Tone: Sendable, Hashable {
        case plain
        /// Less important: a quote's bar, a frame, a link's address shown after its text.
        case dim
        /// Code within a line.
        case code
        /// In a code block: a keyword, a string, a comment, a number.
        case keyword, string, comment, number
        /// A link's text.
        case link
    }

    public var bold = false
    public var italic = false
    public var underline = false
    /// Struck-through text (drawn dim where the terminal has no strikethrough).
    public var struck = false
    public var tone = Tone.plain
    /// The address the text links to as an OSC 8 hyperlink; nil for text that links nowhere.
    public var link: String?

    public init(bold: Bool = false, italic: Bool = false, underline: Bool = false, struck: Bool = false, tone: Tone = .plain, link: String? = nil) {
        self.bold = bold
        self.italic = italic
        self.underline = underline
        self.struck = struck
        self.tone = tone
        self.link = link
    }

    /// The plain style: no attribute, no colour.
    public static let plain = SpanStyle()
}

/// A run of text drawn in one style.
public struct StyledSpan: Sendable, Hashable {
    public var text: String
    public var style: SpanStyle

    public init(_ text: String, _ style: SpanStyle = .plain) {
        self.text = text
        self.style = style
    }
}

/// What the terminal can show beyond text in colours.
public struct TerminalCapabilities: Sendable, Hashable {
    /// Whether links are OSC 8 hyperlinks (`ESC ]8;;URL ESC \ text ESC ]8;; ESC \`); without,
    /// a link shows as `text (url)`.
    public var hyperlinks: Bool

    public init(hyperlinks: Bool) {
        self.hyperlinks = hyperlinks
    }

    /// What the terminal of `environment` can show, decided conservatively: hyperlinks only
    /// where the terminal is known to show them, never under tmux or screen (which may not
    /// pass them on), unless `TETHER_HYPERLINKS` says `on` or `off`.
    public static func detect(environment: [String: String]) -> TerminalCapabilities {
        switch environment["TETHER_HYPERLINKS"]?.lowercased() {
        case "on", "1", "yes", "always": return TerminalCapabilities(hyperlinks: true)
        case "off", "0", "no", "never": return TerminalCapabilities(hyperlinks: false)
        default: break
        }
        let term = environment["TERM"] ?? ""
        if environment["TMUX"] != nil || environment["STY"] != nil || term.hasPrefix("screen") || term.hasPrefix("tmux") || term == "linux" || term == "dumb" {
            return TerminalCapabilities(hyperlinks: false)
        }
        let knownPrograms: Set = ["iTerm.app", "WezTerm", "vscode", "ghostty", "Hyper", "rio"]
        let knownTerms: Set = ["xterm-kitty", "foot", "foot-extra", "alacritty", "xterm-ghostty", "wezterm"]
        let vte = Int(environment["VTE_VERSION"] ?? "") ?? 0
        let known =
            knownPrograms.contains(environment["TERM_PROGRAM"] ?? "") || knownTerms.contains(term) || vte >= 5000 || environment["WT_SESSION"] != nil
            || environment["KITTY_WINDOW_ID"] != nil
        return TerminalCapabilities(hyperlinks: known)
    }
}
