import Foundation
import Testing
import TetherSchema

@testable import ConnectionManager

@Suite struct FrontEndTrackerTests {
    private func presence(_ instance: String, _ state: FrontEndPresence.State = .active) -> FrontEndPresence {
        FrontEndPresence(frontEnd: "tether", instance: instance, pid: 1, state: state)
    }

    @Test func firstArrivalAndLastDepartureAreTheOnlyChanges() {
        var tracker = FrontEndTracker(timeout: .seconds(3))
        let start = ContinuousClock.now
        #expect(tracker.observe(presence("a"), at: start) == .firstArrived)
        #expect(tracker.observe(presence("b"), at: start) == nil)
        #expect(tracker.observe(presence("a"), at: start + .seconds(1)) == nil, "a renewal is not an arrival")
        #expect(tracker.observe(presence("a", .leaving), at: start + .seconds(1)) == nil, "b is still there")
        #expect(tracker.observe(presence("b", .leaving), at: start + .seconds(1)) == .lastLeft)
        #expect(tracker.count == 0)
        #expect(tracker.observe(presence("c", .leaving), at: start + .seconds(1)) == nil, "an unknown front end leaving changes nothing")
    }

    @Test func aPresenceThatLapsesCountsAsLeaving() {
        var tracker = FrontEndTracker(timeout: .seconds(3))
        let start = ContinuousClock.now
        _ = tracker.observe(presence("a"), at: start)
        _ = tracker.observe(presence("b"), at: start + .seconds(2))
        #expect(tracker.expire(at: start + .milliseconds(2900)) == nil)
        #expect(tracker.expire(at: start + .milliseconds(3100)) == nil, "a lapsed, b has not")
        #expect(tracker.count == 1)
        #expect(tracker.expire(at: start + .milliseconds(5100)) == .lastLeft)
    }

    @Test func theNextLapseIsDueOnlyWhileAFrontEndIsAttached() {
        var tracker = FrontEndTracker(timeout: .seconds(3))
        let start = ContinuousClock.now
        #expect(tracker.nextExpiry == nil, "nothing is due with no front end")
        _ = tracker.observe(FrontEndPresence(frontEnd: "web", instance: "b", pid: 9, state: .active), at: start)
        _ = tracker.observe(presence("a"), at: start + .seconds(1))
        #expect(tracker.nextExpiry == start + .seconds(3))
        #expect(tracker.attached.map(\.frontEnd) == ["tether", "web"], "by kind")
        _ = tracker.observe(FrontEndPresence(frontEnd: "web", instance: "b", pid: 9, state: .active), at: start + .seconds(2))
        #expect(tracker.nextExpiry == start + .seconds(4), "a renewal moves the lapse")
        _ = tracker.expire(at: start + .seconds(4))
        #expect(tracker.attached.map(\.instance) == ["b"])
        _ = tracker.observe(FrontEndPresence(frontEnd: "web", instance: "b", pid: 9, state: .leaving), at: start + .seconds(4))
        #expect(tracker.nextExpiry == nil)
        #expect(tracker.attached.isEmpty)
    }
}

@Suite struct SleepSignalParserTests {
    /// dbus-monitor's output for logind's signals, as captured from a real bus.
    private let captured = """
        signal time=1795400900.939280 sender=org.freedesktop.DBus -> destination=:1.0 serial=2 path=/org/freedesktop/DBus; interface=org.freedesktop.DBus; member=NameAcquired
           string ":1.0"
        signal time=1795400901.440788 sender=:1.1 -> destination=(null destination) serial=2 path=/org/freedesktop/login1; interface=org.freedesktop.login1.Manager; member=PrepareForSleep
           boolean true
        signal time=1795400901.645525 sender=:1.2 -> destination=(null destination) serial=2 path=/org/freedesktop/login1; interface=org.freedesktop.login1.Manager; member=PrepareForSleep
           boolean false
        signal time=1795400902.000000 sender=:1.3 -> destination=(null destination) serial=3 path=/other; interface=org.example.Other; member=Changed
           boolean true
        """

    @Test func sleepAndWakeAreReadAndOtherSignalsIgnored() {
        var parser = SleepSignalParser()
        let readings = captured.split(separator: "\n").compactMap { parser.read(String($0)) }
        #expect(readings == [true, false])
    }
}
