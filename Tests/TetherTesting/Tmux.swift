import Foundation

/// A program running in a tmux session of its own (its own server socket in the test's run
/// directory): keys are typed into it and its screen is read back as text.
public final class Tmux {
    public static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux") }

    private let socket: String
    private let session = "tether"
    private let directory: String
    /// The tmux server and the program in the pane, killed by pid too: the socket may be
    /// gone with the run directory by the time this is dropped.
    private var pids: [Int32] = []

    /// Starts `command` (an executable and its arguments) in a `columns` × `rows` terminal.
    public init(_ command: [String], columns: Int = 100, rows: Int = 30, directory: String, environment: [String: String] = [:]) throws {
        socket = directory + "/tmux.socket"
        self.directory = directory
        let exports = environment.map { "\($0.key)=\($0.value)" }
        try run(["new-session", "-d", "-s", session, "-x", "\(columns)", "-y", "\(rows)", "--", "env"] + exports + command)
        let found = try run(["display-message", "-p", "-t", session, "#{pid} #{pane_pid}"])
        pids = found.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
    }

    /// Starts an interactive bash (no startup files, the prompt "$ ") in a `columns` × `rows`
    /// terminal: a shell with job control, where Ctrl-Z stops a job and `fg` continues it.
    public static func shell(columns: Int = 100, rows: Int = 30, directory: String, environment: [String: String] = [:]) throws -> Tmux {
        try Tmux(
            ["bash", "--norc", "--noprofile", "-i"], columns: columns, rows: rows, directory: directory, environment: environment.merging(["PS1": "$ "]) { $1 })
    }

    /// Types a command line into the shell (every word quoted) and presses Enter.
    public func run(command: [String]) throws {
        try type(command.map { "'" + $0.replacingOccurrences(of: "'", with: #"'\''"#) + "'" }.joined(separator: " "))
        try press("Enter")
    }

    deinit {
        _ = try? run(["kill-server"])
        for pid in pids { kill(pid, SIGKILL) }
    }

    /// The screen, one line a row, as the terminal shows it now.
    public func screen() -> String {
        (try? run(["capture-pane", "-p", "-t", session])) ?? ""
    }

    /// Types `text` as it is.
    public func type(_ text: String) throws {
        try run(["send-keys", "-t", session, "-l", text])
    }

    /// Pastes `text` as a terminal pastes it: written to the program at once, through a tmux
    /// buffer (a command line of its own would be too long for a large paste).
    public func paste(_ text: String) throws {
        let file = directory + "/tmux-paste.txt"
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        try run(["load-buffer", "-b", "paste", file])
        try run(["paste-buffer", "-d", "-b", "paste", "-t", session])
    }

    /// Presses keys by tmux's names: `Enter`, `Escape`, `C-z`, `PageUp`.
    public func press(_ keys: String...) throws {
        try run(["send-keys", "-t", session] + keys)
    }

    /// Changes the terminal's size.
    public func resize(columns: Int, rows: Int) throws {
        try run(["resize-window", "-t", session, "-x", "\(columns)", "-y", "\(rows)"])
    }

    /// The pid of the program in the pane.
    public func pid() throws -> Int32 {
        let text = try run(["display-message", "-p", "-t", session, "#{pane_pid}"])
        guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw TestFailure("no pane pid: \(text)") }
        return pid
    }

    /// Whether the program in the pane is still there.
    public var isRunning: Bool {
        ((try? run(["list-panes", "-t", session, "-F", "#{pane_dead}"])) ?? "").trimmingCharacters(in: .whitespacesAndNewlines) == "0"
    }

    /// Waits until the screen contains every one of `texts`; returns the screen.
    public func waitFor(_ texts: String..., timeout: Duration = .seconds(15)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let shown = screen()
            if texts.allSatisfy({ shown.contains($0) }) { return shown }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw TestFailure("the screen did not show \(texts) within \(timeout):\n\(screen())")
    }

    /// Waits until the screen contains none of `texts`; returns the screen.
    public func waitForAbsence(of texts: String..., timeout: Duration = .seconds(15)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let shown = screen()
            if !texts.contains(where: { shown.contains($0) }) { return shown }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw TestFailure("the screen still showed one of \(texts) after \(timeout):\n\(screen())")
    }

    @discardableResult
    private func run(_ arguments: [String]) throws -> String {
        let process = try ChildProcess("/usr/bin/tmux", ["-S", socket] + arguments, outputDirectory: directory, name: "tmux")
        let status = try process.waitForExit(timeout: .seconds(10))
        guard status == 0 else { throw TestFailure("tmux \(arguments.first ?? "") failed: \(process.standardError)") }
        return process.standardOutput
    }
}
