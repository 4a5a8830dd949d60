import Foundation
import Testing
import TetherSchema

@testable import ConnectionManager

@Suite struct FrontEndTrackerTests {
    private func presence(_ instance: String, _ state: FrontEndPresence.State = .active, frontEnd: String = "tether") -> FrontEndPresence {
        FrontEndPresence(frontEnd: frontEnd, instance: instance, pid: 1, state: state)
    }

    private let start = ContinuousClock.now

    @Test func firstArrivalAndLastDepartureAreTheOnlyTurns() {
        var tracker = FrontEndTracker(idleSuspendAfter: .seconds(30))
        #expect(tracker.observe(presence("a"), at: start) == [.attachedChanged([presence("a")]), .firstArrived])
        #expect(tracker.observe(presence("b"), at: start) == [.attachedChanged([presence("a"), presence("b")])])
        #expect(tracker.observe(presence("a"), at: start + .seconds(1)) == [], "a renewal is not an arrival")
        #expect(tracker.observe(presence("a", .leaving), at: start + .seconds(1)) == [.attachedChanged([presence("b")])], "b is still there")
        #expect(tracker.observe(presence("b", .leaving), at: start + .seconds(1)) == [.attachedChanged([]), .graceStarted(.seconds(30))])
        #expect(tracker.count == 0)
        #expect(tracker.observe(presence("c", .leaving), at: start + .seconds(1)) == [], "an unknown front end leaving changes nothing")
    }

    @Test func aChangeOfAttentionIsPublishedAndIsNoArrival() {
        var tracker = FrontEndTracker(idleSuspendAfter: .seconds(30))
        _ = tracker.observe(presence("a"), at: start)
        let away = FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .active, attention: .away)
        #expect(tracker.observe(away, at: start + .seconds(1)) == [.attachedChanged([away])], "tether-notify follows attention on frontend.attached")
        #expect(tracker.observe(away, at: start + .seconds(2)) == [], "the same attention renewed changes nothing")
    }

    @Test func aPresenceThatLapsesCountsAsLeaving() {
        var tracker = FrontEndTracker(idleSuspendAfter: .seconds(1))
        _ = tracker.observe(presence("a"), at: start)
        _ = tracker.observe(presence("b"), at: start + .seconds(2))
        #expect(tracker.timePassed(at: start + .milliseconds(2900)) == [])
        #expect(tracker.timePassed(at: start + .milliseconds(3100)) == [.attachedChanged([presence("b")])], "a lapsed, b has not")
        #expect(tracker.timePassed(at: start + .milliseconds(5100)) == [.attachedChanged([]), .graceStarted(.seconds(1))])
        #expect(tracker.nextDeadline == start + .milliseconds(6100), "the grace period runs from the lapse")
    }

    @Test func eachPresenceLapsesAfterThreeOfItsOwnRenewals() {
        var tracker = FrontEndTracker(idleSuspendAfter: .seconds(30))
        let seldom = FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .active, renewalSeconds: 30)
        let everySecond = presence("b", frontEnd: "example-python")
        _ = tracker.observe(seldom, at: start)
        _ = tracker.observe(everySecond, at: start)
        #expect(tracker.nextDeadline == start + .seconds(3), "b says nothing of its renewal: every second, as front ends did before")
        #expect(tracker.timePassed(at: start + .seconds(3)) == [.attachedChanged([seldom])])
        #expect(tracker.nextDeadline == start + .seconds(90), "a renews every 30 s: nothing is due before three are missed")
        _ = tracker.observe(seldom, at: start + .seconds(30))
        #expect(tracker.nextDeadline == start + .seconds(120))
        #expect(tracker.timePassed(at: start + .seconds(119)) == [])
        #expect(tracker.timePassed(at: start + .seconds(120)) == [.attachedChanged([]), .graceStarted(.seconds(30))], "a crashed")
    }

    @Test func aRenewalSaidIsTakenWithinBounds() {
        func lapse(_ seconds: Int?) -> Duration {
            FrontEndPresence(frontEnd: "x", instance: "x", pid: 1, state: .active, renewalSeconds: seconds).lapsesAfter
        }
        #expect(lapse(nil) == .seconds(3))
        #expect(lapse(0) == .seconds(3), "not gone at once")
        #expect(lapse(-5) == .seconds(3))
        #expect(lapse(30) == .seconds(90))
        #expect(lapse(1_000_000) == .seconds(900), "not present for ever")
    }

    @Test func theGracePeriodEndsInASuspendUnlessAFrontEndComesBack() {
        var tracker = FrontEndTracker(idleSuspendAfter: .seconds(1))
        _ = tracker.observe(presence("a"), at: start)
        _ = tracker.observe(presence("a", .leaving), at: start + .seconds(1))
        #expect(tracker.nextDeadline == start + .seconds(2))
        #expect(tracker.timePassed(at: start + .milliseconds(1900)) == [], "not yet")
        #expect(tracker.timePassed(at: start + .seconds(2)) == [.graceElapsed])
        #expect(tracker.nextDeadline == nil, "suspended: nothing is due until a front end comes")
        #expect(tracker.timePassed(at: start + .seconds(10)) == [], "elapsed once")
        // One comes back during the next grace period: no suspend.
        #expect(tracker.observe(presence("b"), at: start + .seconds(11)) == [.attachedChanged([presence("b")]), .firstArrived])
        _ = tracker.observe(presence("b", .leaving), at: start + .seconds(12))
        #expect(tracker.observe(presence("c"), at: start + .milliseconds(12500)) == [.attachedChanged([presence("c")]), .firstArrived])
        #expect(tracker.nextDeadline == start + .milliseconds(15500), "only c's lapse is due: the grace period is over")
        #expect(tracker.timePassed(at: start + .seconds(13)) == [], "the grace period ended when c came")
    }

    @Test func withoutAGracePeriodTheLastLeavingSuspendsNothing() {
        var tracker = FrontEndTracker(idleSuspendAfter: nil)
        _ = tracker.observe(presence("a"), at: start)
        #expect(tracker.observe(presence("a", .leaving), at: start + .seconds(1)) == [.attachedChanged([])])
        #expect(tracker.nextDeadline == nil)
    }

    @Test func theNextDeadlineIsDueOnlyWhileAFrontEndIsAttachedOrTheGracePeriodRuns() {
        var tracker = FrontEndTracker(idleSuspendAfter: .seconds(30))
        #expect(tracker.nextDeadline == nil, "nothing is due with no front end")
        _ = tracker.observe(presence("b", frontEnd: "web"), at: start)
        _ = tracker.observe(presence("a"), at: start + .seconds(1))
        #expect(tracker.nextDeadline == start + .seconds(3))
        #expect(tracker.attached.map(\.frontEnd) == ["tether", "web"], "by kind")
        _ = tracker.observe(presence("b", frontEnd: "web"), at: start + .seconds(2))
        #expect(tracker.nextDeadline == start + .seconds(4), "a renewal moves the lapse")
        _ = tracker.timePassed(at: start + .seconds(4))
        #expect(tracker.attached.map(\.instance) == ["b"])
        _ = tracker.observe(presence("b", .leaving, frontEnd: "web"), at: start + .seconds(4))
        #expect(tracker.nextDeadline == start + .seconds(34), "the grace period")
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
