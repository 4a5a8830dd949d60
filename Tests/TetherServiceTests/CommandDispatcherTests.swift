import Foundation
import Logging
import Synchronization
import Testing
import TetherBus
import TetherSchema
import TetherService
import TetherTesting

/// The dispatcher's turns: a command that waits on a peer runs alongside the others, and a
/// retry of a command still running is answered with that command's answer, run once.
@Suite(.timeLimit(.minutes(1))) struct CommandDispatcherTests {
    /// Asks for a word; answered by whatever handler the test gives.
    enum Slow: BusCommand {
        struct Request: Codable, Sendable { var word: String }
        struct Reply: Codable, Sendable, Equatable { var word: String }
        static let method = "slow"
        static let endpoint = "dispatcher-test.cmd"
    }

    enum Quick: BusCommand {
        struct Request: Codable, Sendable {}
        struct Reply: Codable, Sendable, Equatable { var done: Bool }
        static let method = "quick"
        static let endpoint = "dispatcher-test.cmd"
    }

    /// Holds every caller until it is opened.
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>], runs: Int)>((false, [], 0))

        var runs: Int { state.withLock { $0.runs } }

        func pass() async {
            await withCheckedContinuation { continuation in
                let open = state.withLock { state in
                    state.runs += 1
                    if !state.open { state.waiting.append(continuation) }
                    return state.open
                }
                if open { continuation.resume() }
            }
        }

        func open() {
            for waiting in state.withLock({ state in
                state.open = true
                defer { state.waiting = [] }
                return state.waiting
            }) {
                waiting.resume()
            }
        }
    }

    static func serving(_ turn: CommandDispatcher.Turn, gate: Gate) async throws -> (InMemoryBus.Client, Task<Void, Never>) {
        let bus = InMemoryBus()
        let owner = bus.client("owner")
        var dispatcher = CommandDispatcher(bus: owner, logger: Logger(label: "test"))
        dispatcher.on(Slow.self, turn) { request in
            await gate.pass()
            return .init(word: request.word)
        }
        dispatcher.on(Quick.self) { _ in .init(done: true) }
        let commands = try await owner.serve(endpoint: Slow.endpoint)
        let serving = Task { [dispatcher] in await dispatcher.run(commands) }
        return (bus.client("caller"), serving)
    }

    /// Asks `Slow` and returns once its handler waits at the gate.
    static func heldAtTheGate(_ gate: Gate, _ caller: InMemoryBus.Client, word: String, requestID: String) async throws -> Task<Slow.Reply, any Error> {
        let asked = Task { try await caller.request(Slow.self, .init(word: word), requestID: requestID, timeout: .seconds(30), attempts: 1) }
        while gate.runs == 0 { try await Task.sleep(for: .milliseconds(5)) }
        return asked
    }

    @Test func aCommandRunAlongsideDoesNotHoldUpTheOnesBehindIt() async throws {
        let gate = Gate()
        let (caller, serving) = try await Self.serving(.alongside, gate: gate)
        defer { serving.cancel() }
        let slow = try await Self.heldAtTheGate(gate, caller, word: "late", requestID: "slow-1")
        // The slow one still waits at the gate: the quick one is answered all the same.
        let quick = try await caller.request(Quick.self, .init(), requestID: "quick-1", timeout: .seconds(5), attempts: 1)
        #expect(quick == .init(done: true))
        gate.open()
        #expect(try await slow.value == .init(word: "late"))
    }

    @Test func aCommandTakenInTurnHoldsUpTheOnesBehindIt() async throws {
        let gate = Gate()
        let (caller, serving) = try await Self.serving(.inTurn, gate: gate)
        defer { serving.cancel() }
        let slow = try await Self.heldAtTheGate(gate, caller, word: "late", requestID: "slow-1")
        await #expect(throws: BusError.self) {
            try await caller.request(Quick.self, .init(), requestID: "quick-1", timeout: .milliseconds(300), attempts: 1)
        }
        gate.open()
        #expect(try await slow.value == .init(word: "late"))
    }

    @Test func aRetryOfACommandStillRunningGetsItsAnswerAndItRunsOnce() async throws {
        let gate = Gate()
        let (caller, serving) = try await Self.serving(.alongside, gate: gate)
        defer { serving.cancel() }
        let first = try await Self.heldAtTheGate(gate, caller, word: "once", requestID: "same")
        // The caller's retry: its first socket is gone, so the retry's answer is the one it reads.
        let asking = Mutex(false)
        let retry = Task {
            asking.withLock { $0 = true }
            return try await caller.request(Slow.self, .init(word: "once"), requestID: "same", timeout: .seconds(30), attempts: 1)
        }
        while !asking.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        // The retry has arrived once a command sent after it is answered. (One that came after
        // the first's answer would be given the kept reply: run once all the same.)
        try await Task.sleep(for: .milliseconds(50))
        _ = try await caller.request(Quick.self, .init(), requestID: "quick-1", timeout: .seconds(5), attempts: 1)
        gate.open()
        #expect(try await first.value == .init(word: "once"))
        #expect(try await retry.value == .init(word: "once"))
        #expect(gate.runs == 1)
        // Asked again after its answer: the same answer, not run again.
        let again = try await caller.request(Slow.self, .init(word: "once"), requestID: "same", timeout: .seconds(5), attempts: 1)
        #expect(again == .init(word: "once"))
        #expect(gate.runs == 1)
    }
}
