/// Text from outside (the gateway, the bus, a user) made safe to write to a terminal: no
/// character in it can move the cursor, change colours, set the title or reorder the line.
///
/// C0 controls other than tab and newline are shown in caret notation (`ESC` as `^[`, `BEL`
/// as `^G`, `CR` as `^M`), DEL as `^?`, and C1 controls and the bidirectional overrides and
/// isolates as `<U+XXXX>`. Everything else, wide characters and emoji included, is kept.
public enum TerminalSafe {
    /// `text` with every terminal-driving character made visible; newlines are kept unless
    /// `newlines` is false (a one-line field), when they show as `^J`.
    public static func visible(_ text: String, newlines: Bool = true) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0, newlines: newlines) }) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar, newlines: newlines) else {
                result.append(scalar)
                continue
            }
            let shown: String =
                switch scalar.value {
                case 0x00...0x1F: "^" + String(Unicode.Scalar(UInt8(scalar.value + 0x40)))
                case 0x7F: "^?"
                default: "<U+" + String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4) + ">"
                }
            result.append(contentsOf: shown.unicodeScalars)
        }
        return String(result)
    }

    private static func needsEscape(_ scalar: Unicode.Scalar, newlines: Bool) -> Bool {
        switch scalar.value {
        case 0x09: false
        case 0x0A: !newlines
        case 0x00...0x1F, 0x7F, 0x80...0x9F: true
        // Bidirectional embeddings, overrides and isolates: they can make a line read other than it is.
        case 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
