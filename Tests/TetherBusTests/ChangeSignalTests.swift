import Testing
import TetherBus

@Suite struct ChangeSignalTests {
    actor WakeCount {
        private(set) var value = 0
        func add() { value += 1 }
    }

    @Test func everyWaiterWakesAndABurstReadsAsOneChange() async throws {
        let signal = ChangeSignal()
        let streams = [signal.changes(), signal.changes()]
        // Five changes before anyone reads.
        for _ in 0..<5 { signal.notify() }
        let counts = [WakeCount(), WakeCount()]
        let readers = zip(streams, counts).map { changes, count in
            Task { for await _ in changes { await count.add() } }
        }
        defer { readers.forEach { $0.cancel() } }

        for count in counts { #expect(await Self.settled(count) == 1, "five changes before a read are one wake") }
        signal.notify()
        for count in counts { #expect(await Self.settled(count) == 2, "a later change wakes every waiter again") }
    }

    /// The count once it has not changed for 100 ms (at most 5 s).
    private static func settled(_ count: WakeCount) async -> Int {
        var last = await count.value
        var stableSince = ContinuousClock.now
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
            let now = await count.value
            if now != last {
                (last, stableSince) = (now, .now)
            } else if stableSince.duration(to: .now) >= .milliseconds(100), now > 0 {
                return now
            }
        }
        return last
    }
}
