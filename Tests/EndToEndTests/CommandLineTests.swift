import Foundation
import Testing
import TetherService
import TetherTesting

/// Every rule a program's command line is checked by, through the real executables: the
/// usage exit code, the words that say what is wrong, and nothing started.
@Suite struct CommandLineTests {
    /// A program, a command line one rule refuses, and the words that say so.
    static let refusals: [(program: String, arguments: [String], words: String)] = [
        ("tether", ["send", "   "], "the message is empty"),
        ("tether", ["send", "--timeout", "0", "hello"], "--timeout must be positive"),
        ("tether", ["send", "--strategy", "latestOnly", "hello"], "--strategy latestOnly needs --kind"),
        (
            "tether", ["send", "--retry", "sometimes", "hello"],
            "The value 'sometimes' is invalid for '--retry <retry>'. Please provide one of 'default', 'patient' or 'none'."
        ),
        ("tether", ["send", "--wait", "0", "hello"], "--wait must be positive"),
        ("tether", ["cancel"], "give a message id or --all, not both"),
        ("tether", ["cancel", "m1", "--all"], "give a message id or --all, not both"),
        (
            "tether-protod", ["--retry", "sometimes"],
            "The value 'sometimes' is invalid for '--retry <retry>'. Please provide one of 'default', 'patient' or 'none'."
        ),
        ("tether-protod", ["--max-pending", "0"], "--max-pending must be at least 1"),
        (
            "tether-protod", ["--when-full", "panic"],
            "The value 'panic' is invalid for '--when-full <when-full>'. Please provide one of 'refuse' and 'drop-oldest'."
        ),
        ("tether-protod", ["--expiry", "0"], "--expiry must be positive"),
        ("tether-snapd", ["--max-entries", "9"], "--max-entries must be at least 10"),
        ("tether-bus", ["--curve-key", "/nonexistent"], "--curve-key and --allowed-keys go with --tcp"),
        ("tether-bus", ["--tcp", "127.0.0.1:1"], "--tcp needs --curve-key FILE"),
        ("tether-tap", ["--count", "0"], "--count must be positive"),
        ("tether-tap", ["--rate", "--json"], "--rate and --json cannot be combined"),
        ("tether-tap", ["replay", "/nonexistent", "--speed=-1"], "--speed must be 0 or more"),
        ("tether-connd", ["--url", "http://gateway/ws"], "--url must be a ws:// or wss:// URL with a host"),
        ("tether-connd", ["--url", "wss://127.0.0.1/ws"], "wss:// needs a host name, not an address (127.0.0.1)"),
        ("tether-connd", ["--url", "ws://gateway/ws", "--preset", "eager"], "--preset must be default or aggressive"),
        ("tether-connd", ["--url", "ws://gateway/ws", "--heartbeat", "0"], "--heartbeat must be positive"),
        ("tether-connd", ["--url", "ws://gateway/ws", "--jitter", "2"], "--jitter must be between 0 and 1"),
        ("tether-connd", ["--url", "ws://gateway/ws", "--max-attempts", "0"], "--max-attempts must be at least 1"),
        ("tether-connd", ["--url", "ws://gateway/ws", "--dialect", "irc"], "--dialect must be seed, openclaw or auto"),
        ("tether-gateway", ["--dialect", "irc"], "--dialect must be seed or openclaw"),
        ("tether-gateway", ["--protocols", "0"], "--protocols must be like 3-4, 3 or 4"),
        ("tether-gateway", ["--port", "70000"], "--port must be between 0 and 65535"),
        ("tether-gateway", ["--tls-cert", "/nonexistent"], "--tls-cert and --tls-key go together"),
        ("tether-web", ["--port", "70000"], "--port must be 0 to 65535"),
    ]

    @Test(arguments: refusals.indices)
    func aRefusedCommandLineSaysWhyAndStartsNothing(index: Int) throws {
        let refusal = Self.refusals[index]
        let run = try TestRunDirectory()
        let process = try ChildProcess(
            Programs.path(refusal.program), refusal.arguments + ["--run-dir", run.path], outputDirectory: run.path, name: "refused")
        let status = try process.waitForExit(timeout: .seconds(20))
        #expect(status == TetherExitCode.usage.rawValue, "\(refusal.program) \(refusal.arguments): exit \(status)")
        #expect(process.standardError.contains(refusal.words), "\(refusal.program) \(refusal.arguments): \(process.standardError)")
        let left = try FileManager.default.contentsOfDirectory(atPath: run.path).filter { $0.hasSuffix(".cmd") || $0.hasSuffix(".sqlite") }
        #expect(left.isEmpty, "\(refusal.program) started anyway: \(left)")
    }
}
