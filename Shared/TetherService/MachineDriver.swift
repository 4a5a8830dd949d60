public import FoundationEssentials
import Synchronization

/// A program's decisions as a value: events in, actions out, time passed in. A
/// ``MachineDriver`` runs it.
public protocol DrivenMachine: Sendable {
    associatedtype Event: Sendable
    associatedtype Action: Sendable
    associatedtype Instant: Comparable & Sendable

    /// Decides what `event` at `now` changes; the actions to carry out, in order.
    mutating func handle(_ event: Event, now: Instant) -> [Action]
    /// The next moment something is due; the driver sends ``timePassed`` then.
    var nextDeadline: Instant? { get }
    /// The event that says time passed.
    static var timePassed: Event { get }
}

/// Where a driver reads the time and waits for it.
public protocol DriverClock: Sendable {
    associatedtype Instant: Comparable & Sendable
    var now: Instant { get }
    /// Returns at `deadline` (at once for one passed), or throws when the task is cancelled.
    func wait(until deadline: Instant) async throws
}

/// The wall clock, for machines that keep `Date`s (they are saved and compared across restarts).
public struct WallClock: DriverClock {
    public init() {}
    public var now: Date { Date() }
    public func wait(until deadline: Date) async throws {
        try await Task.sleep(for: .seconds(max(0, deadline.timeIntervalSinceNow)))
    }
}

extension ContinuousClock: DriverClock {
    public func wait(until deadline: Instant) async throws {
        try await sleep(until: deadline, tolerance: nil)
    }
}

/// Runs a machine: one input at a time, in the order they came, each input's actions carried
/// out in order before the next input is decided; one timer, for the machine's next
/// deadline. A deadline moved later leaves the timer as it is: it fires at the earlier one,
/// the machine finds nothing due, and the timer is set again; so an input that only moves a
/// deadline (a renewal, a reply growing) costs no timer. Cancelling ``run(_:perform:)`` ends
/// it, and a job still waiting then fails with `CancellationError`.
///
/// Inputs are events (``send(_:)``) and jobs (``perform(_:)``, or ``submit(backlog:_:)``
/// when the sender need not wait for it): a job reads or changes the machine and may carry
/// out I/O in between (commit a message, then feed the machine its acceptance) with no other
/// input decided meanwhile.
public final class MachineDriver<Machine: DrivenMachine, Clock: DriverClock>: Sendable where Clock.Instant == Machine.Instant {
    /// What a job is handed: the machine, the time, and the way to carry out actions.
    public struct Context: Sendable {
        public var machine: Machine
        public let now: Machine.Instant
        fileprivate let perform: @Sendable (Machine.Action) async -> Void

        /// Feeds an event and carries out what the machine decides; returns those actions.
        @discardableResult
        public mutating func handle(_ event: Machine.Event) async -> [Machine.Action] {
            let actions = machine.handle(event, now: now)
            await carryOut(actions)
            return actions
        }

        /// Carries out actions a job decided with the machine (a command's request).
        public func carryOut(_ actions: [Machine.Action]) async {
            for action in actions { await perform(action) }
        }
    }

    private enum Input: Sendable {
        case event(Machine.Event)
        case job(run: @Sendable (inout Context) async -> Void, fail: @Sendable (any Error) -> Void)
    }

    private struct Queue {
        var inputs: [Input] = []
        var ended = false
    }

    private let clock: Clock
    private let queue = Mutex(Queue())
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    public init(clock: Clock) {
        self.clock = clock
        (wakeups, wake) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues an event; nothing when the driver has ended.
    public func send(_ event: Machine.Event) {
        enqueue(.event(event))
    }

    /// Runs `body` with the machine when its turn comes, and returns what it returns.
    public func perform<T: Sendable>(_ body: @escaping @Sendable (inout Context) async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let queued = enqueue(
                .job(
                    run: { context in
                        do { continuation.resume(returning: try await body(&context)) } catch { continuation.resume(throwing: error) }
                    },
                    fail: { continuation.resume(throwing: $0) }))
            if !queued { continuation.resume(throwing: CancellationError()) }
        }
    }

    /// Queues a job and returns without waiting for it, while fewer than `backlog` inputs
    /// wait; past that it waits until its job has run. A reader that feeds the machine this
    /// way goes back to its source at once instead of waiting a turn of the machine, and one
    /// faster than the machine is held back (its own buffer fills, and counts what it drops)
    /// rather than queuing here without end. The backlog is short: a command queued behind
    /// it waits for every input before it, and a send's answer must not wait seconds behind
    /// a streamed reply. A job submitted on a driver that has ended is
    /// not run. Never called from a job or an action: past the backlog it would wait for
    /// its own turn.
    public func submit(backlog: Int = 32, _ body: @escaping @Sendable (inout Context) async -> Void) async {
        let waiting = queue.withLock { $0.inputs.count }
        guard waiting < backlog else {
            try? await perform(body)
            return
        }
        enqueue(.job(run: body, fail: { _ in }))
    }

    @discardableResult
    private func enqueue(_ input: Input) -> Bool {
        let queued = queue.withLock { queue in
            guard !queue.ended else { return false }
            queue.inputs.append(input)
            return true
        }
        if queued { wake.yield() }
        return queued
    }

    /// Runs `machine` until the task is cancelled; `perform` carries out each action, and
    /// `observe` is shown the machine after each round of inputs (to save what it keeps).
    public func run(
        _ machine: consuming Machine, perform: @escaping @Sendable (Machine.Action) async -> Void,
        observe: @Sendable (Machine) async -> Void = { _ in }
    ) async {
        var machine = machine
        var timer: (due: Machine.Instant, task: Task<Void, Never>)?
        for await _ in wakeups {
            while let input = queue.withLock({ $0.inputs.isEmpty ? nil : $0.inputs.removeFirst() }) {
                switch input {
                case .event(let event):
                    for action in machine.handle(event, now: clock.now) { await perform(action) }
                case .job(let run, _):
                    // Moved into the job, not copied: with a second reference held here, the
                    // job's first change to each collection of the machine (a reply's text, the
                    // outbox) would copy all of it, once a frame.
                    var context = Context(machine: consume machine, now: clock.now, perform: perform)
                    await run(&context)
                    machine = context.machine
                }
            }
            await observe(machine)
            // One timer, at the machine's next deadline or before it.
            switch (machine.nextDeadline, timer) {
            case (let due?, let set?) where set.due <= due && clock.now < set.due:
                // Still waiting, for the deadline or before it: it fires, what is due is done, it is set again.
                break
            case (let due?, _):
                timer?.task.cancel()
                timer = (due, Task { [clock] in if (try? await clock.wait(until: due)) != nil { self.send(Machine.timePassed) } })
            case (nil, _):
                // Nothing due: a timer still waiting fires once for nothing, rather than being woken to be cancelled.
                break
            }
        }
        timer?.task.cancel()
        let left = queue.withLock { queue in
            queue.ended = true
            defer { queue.inputs = [] }
            return queue.inputs
        }
        for case .job(_, let fail) in left { fail(CancellationError()) }
    }
}
