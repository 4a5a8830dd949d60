import Foundation
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// The rows about the terminal UI, measured as OpenClaw's own terminal UI was: `tether` in a
/// tmux terminal of 100 × 30 attached to a set of its own whose snapd holds a stored
/// transcript, the development bot at its own pace (20 ms between words). The development
/// gateway stands in for the gateway both front ends talk to, so it is left out of every sum.
struct FrontEndBench {
    struct Settings {
        var idleSeconds: Int
        var storedEntries: Int
        var typedCharacters: Int
        var replyWords: Int
        var pastedBytes: Int
        /// The rows measured, in this order.
        var rows: [Row] = Row.allCases
    }

    /// The rows this measures: each can be left out.
    enum Row: String, CaseIterable {
        case idle, typing, reply, paste
    }

    let settings: Settings

    /// The name the terminal UI's figures go by.
    private static let terminalUI = "tether (terminal UI)"

    func measure(into table: inout BenchTable) async throws {
        guard Tmux.available else {
            table.add(
                BenchRow(
                    measurement: "the terminal UI's rows", tether: "not measured: tmux is not installed", baseline: "—", target: "", met: nil, measured: false))
            return
        }
        let run = try TestRunDirectory()
        let newest = try await Bench.fillTranscript(at: run.path + "/snapd.sqlite", entries: settings.storedEntries)
        let set = try await ComposedSet(environment: ["TETHER_TRANSCRIPT_LIMIT": "\(settings.storedEntries)"], in: run)
        defer { set.stop() }
        let ui = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 100, rows: 30, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        _ = try await ui.waitFor(newest, "Connected", "Ctrl-C quit", timeout: .seconds(60))
        var programs = try Self.programs(of: set)
        programs.append((Self.terminalUI, try ui.pid()))

        let rows = settings.rows
        if rows.contains(.idle) { try await measureIdle(programs, into: &table) }
        if rows.contains(.typing) { try await measureTyping(ui: ui, pid: try ui.pid(), into: &table) }
        if rows.contains(.reply) { try await measureReply(set: set, ui: ui, programs: programs, into: &table) }
        if rows.contains(.paste) { try await measurePaste(ui: ui, pid: try ui.pid(), into: &table) }
        try ui.press("C-c")
    }

    /// The set's programs by name, the development gateway left out.
    private static func programs(of set: ComposedSet) throws -> [(String, Int32)] {
        guard let state = set.state() else { throw BenchError("no compose state") }
        var programs = state.programs.filter { $0.name != "gateway" }.compactMap { program in program.pid.map { (program.name, $0) } }
        programs.append(("compose", state.supervisorPID))
        return programs
    }

    // MARK: Idle

    /// Rows (a) and (b): one quiet minute, the terminal UI attached and showing the newest
    /// of the stored entries.
    private func measureIdle(_ programs: [(String, Int32)], into table: inout BenchTable) async throws {
        try await Task.sleep(for: .seconds(5))
        let before = programs.map { (ProcessUsage(pid: $0.1), ThreadTimes(pid: $0.1)) }
        let start = ContinuousClock.now
        try await Task.sleep(for: .seconds(settings.idleSeconds))
        let elapsed = start.duration(to: .now).seconds
        var wakeups: [(String, Double)] = []
        var cpu: [(String, Double)] = []
        var proportional = 0.0
        for ((name, pid), (firstUsage, firstTimes)) in zip(programs, before) {
            guard let firstUsage, let last = ProcessUsage(pid: pid) else { throw BenchError("\(name) ended during the idle minute") }
            wakeups.append((name, Double(last.contextSwitches(since: firstUsage)) / elapsed))
            cpu.append((name, ThreadTimes(pid: pid).seconds(since: firstTimes) / elapsed * 60))
            proportional += last.proportionalMegabytes
        }
        let totalWakeups = wakeups.reduce(0) { $0 + $1.1 }
        let uiWakeups = wakeups.first { $0.0 == Self.terminalUI }?.1 ?? .nan
        let servicesWithin = wakeups.allSatisfy { $0.0 == Self.terminalUI || $0.1 <= 2 }
        table.add(
            BenchRow(
                measurement:
                    "idle \(settings.idleSeconds) s, the whole set with the terminal UI attached (tmux): wakeups a second, each program and in all (the development gateway left out)",
                tether: wakeups.map { "\($0.0) \(String(format: "%.1f", $0.1))" }.joined(separator: ", ") + String(format: "; in all %.1f/s", totalWakeups),
                baseline: "OpenClaw's terminal UI: 0.2–0.3/s", target: "≤ 10/s in all, each service ≤ 2/s, the terminal UI ≤ 1/s",
                met: totalWakeups <= 10 && servicesWithin && uiWakeups <= 1))
        let totalCPU = cpu.reduce(0) { $0 + $1.1 }
        let uiCPU = cpu.first { $0.0 == Self.terminalUI }?.1 ?? .nan
        table.add(
            BenchRow(
                measurement:
                    "idle \(settings.idleSeconds) s, the whole set with the terminal UI showing \(formatCount(Double(settings.storedEntries))) stored entries: CPU a minute (the terminal UI's own); proportional memory (Pss summed)",
                tether: String(format: "%.3f s (%.3f s); %.1f MB", totalCPU, uiCPU, proportional) + "; by program: "
                    + cpu.map { "\($0.0) \(String(format: "%.3f", $0.1))" }.joined(separator: ", "),
                baseline: "OpenClaw's terminal UI: 0.00 s", target: "≤ 0.05 s; ≤ 60 MB", met: totalCPU <= 0.05 && proportional <= 60))
    }

    // MARK: Typing

    /// Row (c): a message typed a key at a time (one tmux command each, so each key reaches
    /// the terminal UI on its own, as typed keys do), until the composer shows its end.
    private func measureTyping(ui: Tmux, pid: Int32, into table: inout BenchTable) async throws {
        let letters = Array("abcdefghijklmnopqrstuvwxyz")
        let text = String((0..<settings.typedCharacters - 3).map { letters[$0 % letters.count] }) + "END"
        try await Task.sleep(for: .seconds(1))
        let before = ThreadTimes(pid: pid)
        let start = ContinuousClock.now
        for character in text { try ui.type(String(character)) }
        let shown = await eventually(timeout: .seconds(30), every: .milliseconds(5)) {
            ui.screen().split(separator: "\n").last { $0.hasPrefix(">") }?.hasSuffix(String(text.suffix(40))) == true
        }
        let elapsed = start.duration(to: .now)
        let cpu = ThreadTimes(pid: pid).seconds(since: before)
        guard shown else { throw BenchError("the typed message was not shown:\n\(ui.screen())") }
        table.add(
            BenchRow(
                measurement:
                    "typing a message of \(formatCount(Double(text.count))) characters into the terminal UI, a key at a time: its CPU (time to type it)",
                tether: String(format: "%.3f s", cpu) + " (\(formatMilliseconds(elapsed.seconds * 1000)))",
                baseline: "OpenClaw's terminal UI: 0.07 s for 901 characters", target: "≤ 0.1 s", met: cpu <= 0.1))
        // Sent, so the composer is empty again; its reply is whole before the next row.
        try ui.press("Enter")
        _ = try await ui.waitFor("Opta: You said:", timeout: .seconds(30))
        _ = try await ui.waitForAbsence(of: "▍", timeout: .seconds(30))
    }

    // MARK: A reply

    /// Row (d): the whole set's CPU for one streamed reply of `replyWords` words, from the
    /// message sent (by the bench, on the bus) to the terminal UI showing the reply whole.
    private func measureReply(set: ComposedSet, ui: Tmux, programs: [(String, Int32)], into table: inout BenchTable) async throws {
        let client = try set.busClient("bench-front-end")
        defer { Task { await client.close() } }
        // The development bot answers "You said: " and the message, a word at a time.
        let words = (1...(settings.replyWords - 2)).map { "w\($0)" }
        let last = words.last ?? ""
        try await Task.sleep(for: .seconds(2))
        let before = programs.map { ThreadTimes(pid: $0.1) }
        let start = ContinuousClock.now
        _ = try await client.request(SendMessageCommand.self, .init(id: .random(), content: words.joined(separator: " ")), timeout: .seconds(30))
        // Whole on the screen: the message and the reply both end with the last word, and no reply is growing.
        let whole = await eventually(timeout: .seconds(30), every: .milliseconds(5)) {
            let screen = ui.screen()
            return screen.components(separatedBy: last).count - 1 >= 2 && !screen.contains("▍")
        }
        let elapsed = start.duration(to: .now)
        guard whole else { throw BenchError("the reply was not shown whole:\n\(ui.screen())") }
        let cpu = zip(programs, before).map { ($0.0.0, ThreadTimes(pid: $0.0.1).seconds(since: $0.1)) }
        let total = cpu.reduce(0) { $0 + $1.1 }
        table.add(
            BenchRow(
                measurement:
                    "a streamed reply of \(settings.replyWords) words at the development bot's pace, sent to shown whole in the terminal UI: the whole set's CPU (the development gateway left out)",
                tether: String(format: "%.3f s", total) + " in \(formatMilliseconds(elapsed.seconds * 1000)); by program: "
                    + cpu.map { "\($0.0) \(String(format: "%.3f", $0.1))" }.joined(separator: ", "),
                baseline: "OpenClaw's terminal UI: 0.06–0.08 s", target: "≤ 0.08 s", met: total <= 0.08))
    }

    // MARK: A paste

    /// A paste of `pastedBytes` into the composer, then one key: how long each takes to show,
    /// and the terminal UI's CPU for the paste.
    private func measurePaste(ui: Tmux, pid: Int32, into table: inout BenchTable) async throws {
        let text = String(repeating: "0123456789", count: settings.pastedBytes / 10) + "PASTED"
        try await Task.sleep(for: .seconds(1))
        let before = ThreadTimes(pid: pid)
        let start = ContinuousClock.now
        try ui.paste(text)
        let pasted = await eventually(timeout: .seconds(60), every: .milliseconds(5)) {
            ui.screen().split(separator: "\n").last { $0.hasPrefix(">") }?.hasSuffix("PASTED") == true
        }
        let shown = start.duration(to: .now)
        let cpu = ThreadTimes(pid: pid).seconds(since: before)
        guard pasted else { throw BenchError("the paste was not shown:\n\(ui.screen())") }
        let typed = ContinuousClock.now
        try ui.type("!")
        let answered = await eventually(timeout: .seconds(30), every: .milliseconds(1)) {
            ui.screen().split(separator: "\n").last { $0.hasPrefix(">") }?.hasSuffix("PASTED!") == true
        }
        let key = typed.duration(to: .now)
        guard answered else { throw BenchError("the key after the paste was not shown:\n\(ui.screen())") }
        table.add(
            BenchRow(
                measurement:
                    "a paste of \(formatBytes(text.utf8.count)) into the terminal UI's composer: shown after; its CPU; a key after it shown after (tmux's own time included)",
                tether: "\(formatMilliseconds(shown.seconds * 1000)); \(String(format: "%.3f s", cpu)); \(formatMilliseconds(key.seconds * 1000))",
                baseline: "—", target: "shown ≤ 1 s, the key ≤ 100 ms", met: shown <= .seconds(1) && key <= .milliseconds(100)))
    }
}

/// A process's CPU time to the nanosecond: each thread's time on a CPU, from
/// `/proc/PID/task/TID/schedstat` (`/proc/PID/stat` counts in 10 ms ticks, too coarse for a
/// reply's few milliseconds a program).
struct ThreadTimes {
    private var nanoseconds: [Int: UInt64] = [:]

    init(pid: Int32) {
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for thread in threads {
            guard let id = Int(thread), let line = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/schedstat", encoding: .utf8),
                let onCPU = line.split(separator: " ").first.flatMap({ UInt64($0) })
            else { continue }
            nanoseconds[id] = onCPU
        }
    }

    /// Seconds on a CPU since `earlier`, of the threads running now: a thread started since
    /// counts whole; one that ended since is missed.
    func seconds(since earlier: ThreadTimes) -> Double {
        Double(nanoseconds.reduce(UInt64(0)) { $0 + $1.value - min($1.value, earlier.nanoseconds[$1.key] ?? 0) }) / 1e9
    }
}
