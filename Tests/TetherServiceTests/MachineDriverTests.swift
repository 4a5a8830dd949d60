import Synchronization
import Testing
import TetherService
import TetherTesting

/// The driver every program's machine runs on: inputs one at a time in order, one timer at
/// the machine's deadline, cancellation. Time is a manual clock of whole milliseconds.
@Suite struct MachineDriverTests {
    /// A machine that says what it was given and when, with a deadline it is told.
    struct Machine: DrivenMachine {
        enum Event: Sendable {
            case say(String)
            case due(Int?)
            case tick
        }

        var deadline: Int?
        /// Storage a job may change in place: the driver holds no second reference to it.
        var storage = Storage()

        mutating func handle(_ event: Event, now: Int) -> [String] {
            switch event {
            case .say(let words): return ["\(words) at \(now)", "after \(words)"]
            case .due(let deadline):
                self.deadline = deadline
                return []
            case .tick:
                guard let deadline, now >= deadline else { return [] }
                self.deadline = nil
                return ["due \(deadline), at \(now)"]
            }
        }

        var nextDeadline: Int? { deadline }
        static var timePassed: Event { .tick }
    }

    /// A reference the machine holds, as its collections hold their storage.
    final class Storage: Sendable {}

    /// Time that moves only when told.
    final class ManualClock: DriverClock {
        private struct State {
            var now = 0
            var sleepers: [Int: (deadline: Int, continuation: CheckedContinuation<Void, any Error>)] = [:]
            var next = 0
        }

        private let state = Mutex(State())

        var now: Int { state.withLock { $0.now } }

        /// How many waits are under way.
        var waiting: Int { state.withLock { $0.sleepers.count } }

        /// How many waits were begun.
        var begun: Int { state.withLock { $0.next } }

        func wait(until deadline: Int) async throws {
            let id = state.withLock { state in
                state.next += 1
                return state.next
            }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let due = state.withLock { state in
                        guard state.now < deadline else { return true }
                        state.sleepers[id] = (deadline, continuation)
                        return false
                    }
                    if due { continuation.resume() }
                }
            } onCancel: {
                state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
            }
        }

        func advance(to now: Int) {
            let woken = state.withLock { state in
                state.now = now
                let due = state.sleepers.filter { $0.value.deadline <= now }
                for id in due.keys { state.sleepers[id] = nil }
                return due.values.map(\.continuation)
            }
            for continuation in woken { continuation.resume() }
        }
    }

    final class Said: Sendable {
        private let lines = Mutex<[String]>([])
        func add(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    @Test func eventsAndJobsAreDecidedOneAtATimeAndTheirActionsCarriedOutInOrder() async throws {
        let clock = ManualClock()
        let driver = MachineDriver<Machine, ManualClock>(clock: clock)
        let said = Said()
        let running = Task { await driver.run(Machine()) { said.add($0) } }
        defer { running.cancel() }
        driver.send(.say("one"))
        driver.send(.say("two"))
        let fromJob = try await driver.perform { context in
            await context.handle(.say("three"))
        }
        #expect(fromJob == ["three at 0", "after three"])
        #expect(said.all == ["one at 0", "after one", "two at 0", "after two", "three at 0", "after three"])
        // A job reads the machine as the inputs before it left it.
        driver.send(.due(40))
        #expect(try await driver.perform { $0.machine.deadline } == 40)
    }

    @Test func oneTimerFollowsTheDeadlineMovedEarlierAndLater() async throws {
        let clock = ManualClock()
        let driver = MachineDriver<Machine, ManualClock>(clock: clock)
        let said = Said()
        let running = Task { await driver.run(Machine()) { said.add($0) } }
        defer { running.cancel() }
        driver.send(.due(100))
        _ = try await driver.perform { _ in }
        #expect(await eventually { clock.waiting == 1 })
        clock.advance(to: 50)
        driver.send(.due(30))  // earlier, and already passed: due at once
        #expect(await eventually { said.all == ["due 30, at 50"] }, "\(said.all)")
        #expect(await eventually { clock.waiting == 0 }, "the timer for 100 was left waiting")
        driver.send(.due(200))
        _ = try await driver.perform { _ in }
        #expect(await eventually { clock.waiting == 1 })
        let begun = clock.begun
        driver.send(.due(300))  // later: the timer for 200 stays, and is not woken to be replaced
        _ = try await driver.perform { _ in }
        #expect(clock.waiting == 1 && clock.begun == begun, "a deadline moved later started a wait of its own")
        clock.advance(to: 250)
        #expect(await eventually { clock.begun == begun + 1 }, "the timer for 200 fired and was set for 300")
        _ = try await driver.perform { _ in }
        #expect(said.all == ["due 30, at 50"], "a deadline moved later fired at the old one")
        clock.advance(to: 300)
        #expect(await eventually { said.all == ["due 30, at 50", "due 300, at 300"] }, "\(said.all)")
    }

    @Test func theMachineIsShownAfterEachRoundOfInputs() async throws {
        let driver = MachineDriver<Machine, ManualClock>(clock: ManualClock())
        let seen = Said()
        let running = Task { await driver.run(Machine(), perform: { _ in }, observe: { seen.add("deadline \($0.deadline.map(String.init) ?? "none")") }) }
        defer { running.cancel() }
        driver.send(.due(10))
        _ = try await driver.perform { _ in }
        driver.send(.due(nil))
        _ = try await driver.perform { _ in }
        #expect(seen.all.first == "deadline 10" && seen.all.last == "deadline none", "\(seen.all)")
    }

    @Test func cancellingEndsTheRunItsTimerAndWhatStillWaits() async throws {
        let clock = ManualClock()
        let driver = MachineDriver<Machine, ManualClock>(clock: clock)
        let running = Task { await driver.run(Machine()) { _ in } }
        driver.send(.due(100))
        _ = try await driver.perform { _ in }
        #expect(await eventually { clock.waiting == 1 })
        running.cancel()
        await running.value
        #expect(clock.waiting == 0, "the timer outlived the run")
        await #expect(throws: CancellationError.self) {
            try await driver.perform { $0.machine.deadline }
        }
    }

    @Test func aJobHoldsTheOnlyReferenceToTheMachineItChanges() async throws {
        let driver = MachineDriver<Machine, ManualClock>(clock: ManualClock())
        let running = Task { await driver.run(Machine()) { _ in } }
        defer { running.cancel() }
        driver.send(.say("first"))
        // A second reference would make the job's first change to a collection copy all of it.
        let unique = try await driver.perform { isKnownUniquelyReferenced(&$0.machine.storage) }
        #expect(unique, "the driver kept a reference to the machine while a job changed it")
        let stillUnique = try await driver.perform { isKnownUniquelyReferenced(&$0.machine.storage) }
        #expect(stillUnique, "the job's machine was not taken back whole")
    }

    /// A job that holds the machine until `gate` opens, once it holds it: what comes after it waits.
    static func held(_ driver: MachineDriver<Machine, ManualClock>, at gate: Gate) async -> Task<Void, any Error> {
        let holding = Task { try await driver.perform { _ in await gate.wait() } }
        #expect(await eventually { gate.isWaited })
        return holding
    }

    // A submit that waits would hang here rather than fail: the limit ends it.
    @Test(.timeLimit(.minutes(1))) func aSubmittedJobRunsInItsTurnWithoutItsSenderWaiting() async throws {
        let clock = ManualClock()
        let driver = MachineDriver<Machine, ManualClock>(clock: clock)
        let said = Said()
        let gate = Gate()
        let running = Task { await driver.run(Machine()) { said.add($0) } }
        defer { running.cancel() }
        let holding = await Self.held(driver, at: gate)
        driver.send(.say("one"))
        await driver.submit { context in await context.handle(.say("two")) }
        driver.send(.say("three"))
        #expect(said.all.isEmpty, "submit waited for its job")
        gate.open()
        try await holding.value
        _ = try await driver.perform { _ in }
        #expect(said.all == ["one at 0", "after one", "two at 0", "after two", "three at 0", "after three"])
    }

    @Test(.timeLimit(.minutes(1))) func submitWaitsForItsJobOnceTheBacklogIsFull() async throws {
        let driver = MachineDriver<Machine, ManualClock>(clock: ManualClock())
        let said = Said()
        let gate = Gate()
        let running = Task { await driver.run(Machine()) { said.add($0) } }
        defer { running.cancel() }
        let holding = await Self.held(driver, at: gate)
        for index in 0..<3 { await driver.submit(backlog: 3) { context in await context.handle(.say("\(index)")) } }
        let returned = Said()
        let fourth = Task {
            await driver.submit(backlog: 3) { context in await context.handle(.say("3")) }
            returned.add("fourth")
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(said.all.isEmpty)
        #expect(returned.all.isEmpty, "the fourth submit returned with the backlog full")
        gate.open()
        await fourth.value
        // It returned once its job had run, after the three before it.
        #expect(said.all.count == 8 && said.all.last == "after 3", "\(said.all)")
        try await holding.value
    }
}

/// Holds a job until opened.
final class Gate: Sendable {
    private struct State {
        var open = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    /// Whether a job waits at the gate now.
    var isWaited: Bool { state.withLock { $0.waiter != nil } }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = state.withLock { state in
                if !state.open { state.waiter = continuation }
                return state.open
            }
            if open { continuation.resume() }
        }
    }

    func open() {
        state.withLock { state in
            state.open = true
            defer { state.waiter = nil }
            return state.waiter
        }?.resume()
    }
}
