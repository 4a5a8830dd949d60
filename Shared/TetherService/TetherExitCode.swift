public import ArgumentParser

/// The exit codes of every Tether program and tool, one table for all (README.md, "Exit
/// codes"). A program that ends with an error says what happened in words on standard error
/// as well.
public enum TetherExitCode: Int32, Sendable, CaseIterable {
    /// Done as asked.
    case success = 0
    /// Not done, or not confirmed, and said in words: an error, a refusal by the gateway, a
    /// message not delivered in time, a program that did not answer.
    case notDone = 1
    /// `tether send`: delivered, but no whole reply came.
    case deliveredWithoutReply = 3
    /// The set is not running: no bus to reach (or, for `tether web`, no tether-web).
    case notRunning = 4
    /// `tether send`: refused at send time; nothing was queued.
    case refused = 5
    /// The command line is not valid (the usage error of sysexits.h); nothing was done.
    case usage = 64
    /// A setting is wrong (the configuration error of sysexits.h): a variable unset, a token
    /// file others can read, a URL that does not parse. Said in words naming the setting; a
    /// compose supervisor does not start such a program again until the setting changes.
    case configuration = 78

    /// Whether a program that exited with `status` did so because of its configuration or
    /// its command line: starting it again as it is cannot help.
    public static func isConfigurationProblem(_ status: Int32) -> Bool {
        status == Self.configuration.rawValue || status == Self.usage.rawValue
    }
}

extension ExitCode {
    /// The exit code for `code`.
    public init(_ code: TetherExitCode) {
        self.init(code.rawValue)
    }
}
