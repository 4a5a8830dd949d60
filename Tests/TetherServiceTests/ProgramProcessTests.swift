import Foundation
import Testing

@testable import TetherService

#if canImport(Glibc)
import Glibc
#endif

/// A program's run as the supervisor sees it, through real processes: its output lines in
/// order, then its exit, last.
@Suite struct ProgramProcessTests {
    private func events(of process: ProgramProcess, within deadline: Duration = .seconds(20)) async throws -> [ProgramProcess.Event] {
        try await withThrowingTaskGroup(of: [ProgramProcess.Event]?.self) { group in
            group.addTask {
                var events: [ProgramProcess.Event] = []
                for await event in process.events { events.append(event) }
                return events
            }
            group.addTask {
                try await Task.sleep(for: deadline)
                return nil
            }
            defer { group.cancelAll() }
            guard let events = try await group.next() ?? nil else {
                process.signalGroup(SIGKILL)
                throw CancellationError()
            }
            return events
        }
    }

    private func shell(_ script: String) throws -> ProgramProcess {
        try ProgramProcess(executable: "/bin/sh", arguments: ["-c", script], environment: ["PATH": "/usr/bin:/bin", "WORD": "beside"])
    }

    @Test func outputFromBothStreamsInOrderThenTheExitStatus() async throws {
        let process = try shell("echo one; echo two >&2; printf 'no newline at the end'; exit 3")
        #expect(try await events(of: process) == [.line("one"), .line("two"), .line("no newline at the end"), .exited(.exited(3))])
    }

    @Test func theProgramGetsExactlyTheEnvironmentGiven() async throws {
        let process = try shell("echo \"$WORD ${HOME:-no home}\"")
        #expect(try await events(of: process) == [.line("beside no home"), .exited(.exited(0))])
    }

    @Test func aStopReachesTheWholeGroupAndShowsAsTheSignal() async throws {
        // The shell waits on a child of its own: SIGTERM to the group ends both at once.
        let process = try shell("echo ready; sleep 30; echo never")
        let collected = Task { try await events(of: process) }
        try await Task.sleep(for: .milliseconds(200))
        process.signalGroup(SIGTERM)
        let seen = try await collected.value
        #expect(seen == [.line("ready"), .exited(.signaled(SIGTERM))])
        // The sleep is reaped by whoever adopted it: give that a moment.
        let end = ContinuousClock.now + .seconds(5)
        while kill(-process.pid, 0) == 0, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(20)) }
        #expect(kill(-process.pid, 0) == -1, "nothing of the group is left")
    }

    @Test func theExitIsReportedWhileSomethingItStartedStillHoldsTheOutput() async throws {
        // The background sleep keeps the pipe open after the shell exits.
        let process = try shell("sleep 30 & echo left one behind; exit 0")
        let started = ContinuousClock.now
        let seen = try await events(of: process)
        #expect(seen == [.line("left one behind"), .exited(.exited(0))])
        #expect(started.duration(to: .now) < .seconds(10), "reported when the shell ended, not when the sleep did")
        kill(-process.pid, SIGKILL)
    }

    @Test func aSignalTheSupervisorIgnoresIsTheProgramsDefaultAgain() async throws {
        // The supervisor ignores SIGTERM and SIGINT (it reads them from a signal source);
        // an ignored signal would stay ignored in a program started without resetting it.
        let previous = signal(SIGUSR2, SIG_IGN)
        defer { signal(SIGUSR2, previous) }
        let process = try shell("kill -USR2 $$; sleep 5; exit 0")
        #expect(try await events(of: process) == [.exited(.signaled(SIGUSR2))])
    }

    @Test func aMissingExecutableIsAClearError() {
        #expect(throws: ProgramStartError.self) {
            try ProgramProcess(executable: "/nonexistent/tether-nothing", arguments: [], environment: [:])
        }
    }

    @Test func linesAreCutAtNewlinesAndAtTheLongestLength() {
        var splitter = LineSplitter(longest: 4)
        #expect(splitter.append(Array("ab\ncd".utf8)) == ["ab"])
        #expect(splitter.append(Array("efgh\n\n".utf8)) == ["cdef", "gh", ""])
        #expect(splitter.append([0x68, 0xFF, 0x69]) == [])
        #expect(splitter.rest() == "h\u{FFFD}i")
        #expect(splitter.rest() == nil)
    }
}
