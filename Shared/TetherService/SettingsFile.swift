public import FoundationEssentials
import TetherBus
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// Tether's settings as `tether setup` writes them: `$XDG_CONFIG_HOME/tether/tether.env`
/// (else `~/.config/tether/tether.env`), one `NAME=value` a line, `#` starting a comment, a
/// value with spaces in double quotes: the format of systemd's `EnvironmentFile=`.
/// `tether-compose up` reads it: a variable set in its environment wins over the file, and
/// the file over the compose file's `environment:`.
public struct SettingsFile: Sendable {
    /// The file's path.
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// The settings file of the user whose environment this is.
    public static func user(environment: [String: String] = ProcessInfo.processInfo.environment) -> SettingsFile {
        SettingsFile(path: configurationDirectory(environment: environment) + "/tether.env")
    }

    /// `$XDG_CONFIG_HOME/tether`, else `~/.config/tether`: Tether's configuration directory.
    public static func configurationDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") { return config + "/tether" }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        return home + "/.config/tether"
    }

    /// The settings, in the file's order; none when there is no file. A line that is not
    /// `NAME=value` is refused, naming the file and the line.
    public func read() throws(ConfigurationProblem) -> [(name: String, value: String)] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        guard let text = String(data: data, encoding: .utf8) else { throw ConfigurationProblem("\(path) is not UTF-8 text") }
        return try Self.parse(text, path: path)
    }

    /// The settings as a dictionary (a name set twice: the last line wins, as systemd reads it).
    public func values() throws(ConfigurationProblem) -> [String: String] {
        Dictionary(try read().map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
    }

    /// Reads `NAME=value` lines.
    static func parse(_ text: String, path: String) throws(ConfigurationProblem) -> [(name: String, value: String)] {
        var settings: [(name: String, value: String)] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            guard let equals = line.firstIndex(of: "="), case let name = line[..<equals].trimmingWhitespace(), isName(name) else {
                throw ConfigurationProblem("\(path), line \(index + 1), is not NAME=value: \(line)")
            }
            var value = line[line.index(after: equals)...].trimmingWhitespace()
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                value = unquoted(value.dropFirst().dropLast())
            }
            settings.append((name, value))
        }
        return settings
    }

    /// The file's text for `settings`, under a comment that says what it is.
    public static func render(_ settings: [(name: String, value: String)]) -> String {
        var text = "# Tether's settings, written by tether setup; tether-compose and the tether user unit read them.\n"
        for (name, value) in settings {
            let plain = !value.isEmpty && value.allSatisfy { !$0.isWhitespace && $0 != "\"" && $0 != "\\" && $0 != "#" }
            text += plain ? "\(name)=\(value)\n" : "\(name)=\"\(quoted(value))\"\n"
        }
        return text
    }

    /// Writes `settings` (mode 0600, atomically) unless the file already says exactly that;
    /// returns whether it changed.
    public func write(_ settings: [(name: String, value: String)]) throws -> Bool {
        let text = Self.render(settings)
        if let existing = FileManager.default.contents(atPath: path), String(decoding: existing, as: UTF8.self) == text { return false }
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !directory.isEmpty {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        // SecretFile writes the final line's newline itself.
        try SecretFile.write(String(text.dropLast()), to: path)
        return true
    }

    /// A double-quoted value's text: `\"` and `\\` stand for `"` and `\`.
    private static func unquoted(_ text: Substring) -> String {
        var result = ""
        var escaped = false
        for character in text {
            if escaped || character != "\\" {
                result.append(character)
                escaped = false
            } else {
                escaped = true
            }
        }
        return result
    }

    private static func quoted(_ value: String) -> String {
        value.reduce(into: "") { result, character in
            if character == "\"" || character == "\\" { result.append("\\") }
            result.append(character)
        }
    }

    private static func isName(_ name: String) -> Bool {
        guard let first = name.first, first.isLetter || first == "_" else { return false }
        return name.allSatisfy { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "_" }
    }
}
