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
}

extension ExitCode {
    /// The exit code for `code`.
    public init(_ code: TetherExitCode) {
        self.init(code.rawValue)
    }
}
