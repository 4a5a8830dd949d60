import Foundation
import Testing
import TetherSchema

@testable import TetherBus

/// The bus client's decisions, each event in each state, with time passed in: no sockets, no sleeps.
@Suite struct RequestTrackerTests {
    let start = ContinuousClock.now
    let endpoint = "ipc:///run/protod.cmd"
    let frames: [[UInt8]] = [Array("r1".utf8), Array("status".utf8), Array("{}".utf8)]
    let reply: [[UInt8]] = [Array("r1".utf8), Array("ok".utf8), Array("{}".utf8)]

    private func tracker(attempts: Int = 3) -> RequestTracker {
        var tracker = RequestTracker()
        let first = tracker.start(
            id: 1, name: "protod.cmd", endpoint: endpoint, replyKey: Array("r1".utf8), frames: frames, timeout: .seconds(2), attempts: attempts,
            now: start)
        #expect(first == .send(id: 1, endpoint: endpoint, frames: frames))
        return tracker
    }

    @Test func aRequestWaitsForTheReplyThatNamesItUntilItsDeadline() {
        var tracker = tracker()
        #expect(tracker.count == 1)
        #expect(tracker.nextDeadline == start + .seconds(2))
        #expect(tracker.timePassed(now: start + .milliseconds(1999)).isEmpty)
        // A reply naming another request, or on another endpoint, is not this one's.
        #expect(tracker.replied(on: endpoint, frames: [Array("r0".utf8), Array("ok".utf8), []]) == nil)
        #expect(tracker.replied(on: "ipc:///run/snapd.cmd", frames: reply) == nil)
        #expect(tracker.replied(on: endpoint, frames: []) == nil)
        #expect(tracker.replied(on: endpoint, frames: reply) == .finish(id: 1, result: .success(reply)))
        #expect(tracker.count == 0 && tracker.nextDeadline == nil)
        // A late copy of the reply (the request was sent twice) does nothing.
        #expect(tracker.replied(on: endpoint, frames: reply) == nil)
        #expect(tracker.timePassed(now: start + .seconds(10)).isEmpty)
    }

    @Test func anUnansweredAttemptReplacesTheSocketAndIsSentAgainThenTheRequestTimesOut() {
        var tracker = tracker(attempts: 3)
        let again: [RequestTracker.Action] = [.replaceSocket(endpoint: endpoint), .send(id: 1, endpoint: endpoint, frames: frames)]
        #expect(tracker.timePassed(now: start + .seconds(2)) == again)
        #expect(tracker.nextDeadline == start + .seconds(4))
        #expect(tracker.timePassed(now: start + .milliseconds(3999)).isEmpty)
        #expect(tracker.timePassed(now: start + .seconds(4)) == again)
        #expect(tracker.timePassed(now: start + .seconds(6)) == [.finish(id: 1, result: .failure(.timedOut(endpoint: "protod.cmd", attempts: 3)))])
        #expect(tracker.count == 0)
    }

    @Test func theOtherRequestsWaitingOnAReplacedSocketAreSentAgainWithoutUsingAnAttempt() {
        var tracker = tracker(attempts: 2)
        let second: [[UInt8]] = [Array("r2".utf8), Array("transcript".utf8), Array("{}".utf8)]
        _ = tracker.start(
            id: 2, name: "protod.cmd", endpoint: endpoint, replyKey: Array("r2".utf8), frames: second, timeout: .seconds(2), attempts: 1,
            now: start + .seconds(1))
        _ = tracker.start(
            id: 3, name: "snapd.cmd", endpoint: "ipc:///run/snapd.cmd", replyKey: Array("r3".utf8), frames: second, timeout: .seconds(2),
            attempts: 1, now: start + .seconds(1))
        #expect(
            tracker.timePassed(now: start + .seconds(2)) == [
                .replaceSocket(endpoint: endpoint), .send(id: 1, endpoint: endpoint, frames: frames), .send(id: 2, endpoint: endpoint, frames: second),
            ])
        // Request 2 keeps its own deadline and its one attempt: at 3 s it fails; request 3 on another endpoint too.
        #expect(
            tracker.timePassed(now: start + .seconds(3)) == [
                .finish(id: 2, result: .failure(.timedOut(endpoint: "protod.cmd", attempts: 1))),
                .finish(id: 3, result: .failure(.timedOut(endpoint: "snapd.cmd", attempts: 1))),
            ])
        #expect(tracker.count == 1 && tracker.nextDeadline == start + .seconds(4))
    }

    @Test func aLateTimerMakesOneAttemptNotOneForEveryDeadlineMissed() {
        var tracker = tracker(attempts: 3)
        #expect(tracker.timePassed(now: start + .seconds(7)).count == 2)
        #expect(tracker.nextDeadline == start + .seconds(9))
    }

    @Test func oneAttemptOrFewerMeansNoRetry() {
        for attempts in [1, 0, -2] {
            var tracker = tracker(attempts: attempts)
            #expect(tracker.timePassed(now: start + .seconds(2)) == [.finish(id: 1, result: .failure(.timedOut(endpoint: "protod.cmd", attempts: 1)))])
        }
    }

    @Test func aFailedSendEndsTheRequestWithItsError() {
        var tracker = tracker()
        let error = BusError.endpointTooLong(path: "/long")
        #expect(tracker.sendFailed(id: 1, error: error) == .finish(id: 1, result: .failure(error)))
        #expect(tracker.sendFailed(id: 1, error: error) == nil)
        #expect(tracker.sendFailed(id: 9, error: error) == nil)
    }

    @Test func aCancelledCallerIsAnsweredAtOnceAndNothingIsSentAgain() {
        var tracker = tracker()
        #expect(tracker.cancel(id: 1) == .finish(id: 1, result: .failure(.cancelled)))
        #expect(tracker.cancel(id: 1) == nil)
        #expect(tracker.timePassed(now: start + .seconds(2)).isEmpty)
        #expect(tracker.replied(on: endpoint, frames: reply) == nil)
    }

    @Test func closingAnswersEveryRequest() {
        var tracker = tracker()
        _ = tracker.start(
            id: 2, name: "snapd.cmd", endpoint: "ipc:///run/snapd.cmd", replyKey: [], frames: frames, timeout: .seconds(5), attempts: 1, now: start)
        #expect(tracker.closeAll() == [.finish(id: 1, result: .failure(.closed)), .finish(id: 2, result: .failure(.closed))])
        #expect(tracker.count == 0 && tracker.closeAll().isEmpty)
    }
}

@Suite struct SubscriptionProbesTests {
    let start = ContinuousClock.now
    let topic = "sys.probe.tether.abc"

    private func probes(timeout: Duration = .seconds(5)) -> SubscriptionProbes {
        var probes = SubscriptionProbes(busLocation: "/run/tether")
        #expect(probes.start(id: 7, topic: topic, timeout: timeout, now: start) == [.subscribe(topic: topic), .publishProbe(topic: topic)])
        return probes
    }

    @Test func aProbeGoesAtOnceThenEveryIntervalUntilItComesBack() {
        var probes = probes()
        #expect(probes.count == 1)
        #expect(probes.nextDeadline == start + SubscriptionProbes.resendInterval)
        #expect(probes.timePassed(now: start + .milliseconds(49)).isEmpty)
        #expect(probes.timePassed(now: start + .milliseconds(50)) == [.publishProbe(topic: topic)])
        #expect(probes.nextDeadline == start + .milliseconds(100))
        #expect(probes.probeArrived(topic: topic) == [.finish(id: 7, topic: topic, failure: nil)])
        #expect(probes.count == 0 && probes.nextDeadline == nil)
        // A second copy of the probe (sent twice, both came back) confirms nothing more.
        #expect(probes.probeArrived(topic: topic).isEmpty)
    }

    @Test func theProxyReportingTheProbesSubscriptionSendsItAtOnce() {
        let probes = probes()
        #expect(probes.proxySubscribed(to: topic) == [.publishProbe(topic: topic)])
        #expect(probes.proxySubscribed(to: "conv.").isEmpty)
    }

    @Test func noAnswerByTheDeadlineMeansTheBusIsNotThere() {
        var probes = probes(timeout: .milliseconds(120))
        #expect(probes.nextDeadline == start + .milliseconds(50))
        _ = probes.timePassed(now: start + .milliseconds(100))
        #expect(probes.nextDeadline == start + .milliseconds(120), "the deadline comes before the next probe")
        #expect(probes.timePassed(now: start + .milliseconds(120)) == [.finish(id: 7, topic: topic, failure: .busUnavailable(path: "/run/tether"))])
        #expect(probes.timePassed(now: start + .seconds(1)).isEmpty)
    }

    @Test func aConfirmationNoLongerWantedEndsWithTheReasonGiven() {
        var probes = probes()
        #expect(probes.cancel(id: 7, because: .cancelled) == [.finish(id: 7, topic: topic, failure: .cancelled)])
        #expect(probes.cancel(id: 7, because: .closed).isEmpty)
    }

    @Test func aFailedHandshakeFailsEveryConfirmationOnceAndNewOnesUntilOneSucceeds() {
        var probes = probes()
        #expect(probes.start(id: 8, topic: "sys.probe.tether.def", timeout: .seconds(5), now: start).count == 2)
        let refused = BusError.keyRefused(endpoint: "tcp://bus:5555")
        #expect(
            probes.handshakeFailed(refused) == [
                .reportHandshakeFailure(refused), .finish(id: 7, topic: topic, failure: refused),
                .finish(id: 8, topic: "sys.probe.tether.def", failure: refused),
            ])
        #expect(probes.handshakeFailure == refused)
        // Every reconnection fails again: said once.
        #expect(probes.handshakeFailed(.handshakeFailed(endpoint: "tcp://bus:5556")).isEmpty)
        #expect(probes.start(id: 9, topic: "sys.probe.tether.ghi", timeout: .seconds(5), now: start) == [.finish(id: 9, topic: nil, failure: refused)])
        #expect(probes.count == 0)
        #expect(probes.handshakeSucceeded() == [.reportHandshakeRecovered])
        #expect(probes.handshakeSucceeded().isEmpty)
        #expect(probes.start(id: 10, topic: "sys.probe.tether.jkl", timeout: .seconds(5), now: start).count == 2)
    }

    @Test func aProbeStillWaitingAtItsDeadlineAfterAFailedHandshakeSaysWhy() {
        var probes = SubscriptionProbes(busLocation: "tcp://bus:5555")
        _ = probes.handshakeFailed(.handshakeFailed(endpoint: "tcp://bus:5555"))
        _ = probes.handshakeSucceeded()
        _ = probes.start(id: 1, topic: topic, timeout: .seconds(1), now: start)
        #expect(probes.timePassed(now: start + .seconds(1)) == [.finish(id: 1, topic: topic, failure: .busUnavailable(path: "tcp://bus:5555"))])
    }

    @Test func closingAnswersEveryConfirmation() {
        var probes = probes()
        #expect(probes.closeAll() == [.finish(id: 7, topic: topic, failure: .closed)])
        #expect(probes.closeAll().isEmpty)
    }
}

@Suite struct UpstreamInterestTests {
    @Test func theProxysReportsAreReadFromTheFirstFrame() {
        #expect(UpstreamInterest.Report(frame: [1] + Array("conv.".utf8)) == .subscribed(prefix: "conv."))
        #expect(UpstreamInterest.Report(frame: [0] + Array("conv.".utf8)) == .unsubscribed(prefix: "conv."))
        #expect(UpstreamInterest.Report(frame: [1]) == .subscribed(prefix: ""))
        #expect(UpstreamInterest.Report(frame: []) == nil)
    }

    @Test func retainedValuesGoAgainToEachSubscriptionThatCoversThem() {
        var interest = UpstreamInterest()
        #expect(interest.proxyReported(.subscribed(prefix: "conn.")).isEmpty, "nothing retained yet")
        interest.retain(Array("old".utf8), on: "conn.state")
        interest.retain(Array("new".utf8), on: "conn.state")
        interest.retain(Array("up".utf8), on: "conn.path")
        interest.retain(Array("3".utf8), on: "outbox.summary")
        let both: [UpstreamInterest.Action] = [.replay(topic: "conn.path", body: Array("up".utf8)), .replay(topic: "conn.state", body: Array("new".utf8))]
        #expect(interest.proxyReported(.subscribed(prefix: "conn.")) == both, "the latest value of each, again for a repeated subscription")
        #expect(interest.proxyReported(.subscribed(prefix: "conn.state")) == [.replay(topic: "conn.state", body: Array("new".utf8))])
        #expect(interest.proxyReported(.subscribed(prefix: "")).count == 3)
        #expect(interest.proxyReported(.subscribed(prefix: "conv.")).isEmpty)
        #expect(interest.proxyReported(.unsubscribed(prefix: "conn.")).isEmpty)
    }

    @Test func presenceIsToldNowAndAtEachChange() {
        var interest = UpstreamInterest()
        #expect(interest.watch(id: 1, topic: "conv.message") == [.tell(watch: 1, present: false)])
        #expect(interest.proxyReported(.subscribed(prefix: "sys.")).isEmpty, "a prefix that does not cover the topic")
        #expect(interest.proxyReported(.subscribed(prefix: "conv.")) == [.tell(watch: 1, present: true)])
        #expect(interest.proxyReported(.subscribed(prefix: "conv.message")).isEmpty, "still present: not told again")
        #expect(interest.watch(id: 2, topic: "conv.delivery") == [.tell(watch: 2, present: true)])
        #expect(interest.proxyReported(.unsubscribed(prefix: "conv.")) == [.tell(watch: 2, present: false)], "conv.message is still covered")
        #expect(interest.isPresent("conv.message") && !interest.isPresent("conv.delivery"))
        #expect(interest.proxyLost() == [.tell(watch: 1, present: false)])
        #expect(!interest.isPresent("sys.heartbeat"))
        interest.unwatch(id: 1)
        #expect(interest.proxyReported(.subscribed(prefix: "")) == [.tell(watch: 2, present: true)])
        #expect(interest.proxyLost() == [.tell(watch: 2, present: false)])
        #expect(interest.proxyLost().isEmpty)
    }
}

@Suite struct CommandFramesTests {
    let identity: [UInt8] = [0, 1, 2, 3]

    @Test func aCommandIsTheCallerThenRequestIDMethodAndBody() {
        let read = CommandFrames([identity, Array("r1".utf8), Array("send".utf8), Array("{}".utf8)])
        #expect(read == .command(requestID: "r1", method: "send", body: Array("{}".utf8), identity: identity))
    }

    @Test func theWrongNumberOfFramesIsRefusedInWordsToTheCaller() throws {
        let read = CommandFrames([identity, Array("r1".utf8), Array("send".utf8)])
        guard case .refused(let drop, let reply, let answer) = read else { Issue.record("accepted: \(read)"); return }
        #expect(drop == BusDrop.malformedCommand)
        #expect(reply == CommandErrorReply(.malformed, "a command is three frames (request id, method, JSON body); this one had 2"))
        let frames = try #require(answer)
        #expect(Array(frames.prefix(3)) == [identity, Array("r1".utf8), Array("error".utf8)])
        #expect(try JSONDecoder().decode(CommandErrorReply.self, from: Data(frames[3])) == reply)
    }

    @Test func aRequestIDOrMethodThatIsNotUTF8IsRefused() {
        for frames in [[identity, [0xFF], Array("send".utf8), []], [identity, Array("r1".utf8), [0xC3], []]] {
            guard case .refused(let drop, let reply, _) = CommandFrames(frames) else { Issue.record("accepted \(frames)"); continue }
            #expect(drop == BusDrop.malformedCommand && reply.message == "the request id and the method must be UTF-8 text")
        }
    }

    @Test func aBodyOverItsMethodsLimitIsRefusedAsTooLarge() {
        // Every command but send: 1 MiB.
        let body = [UInt8](repeating: 0x20, count: BusSchema.maximumBodySize + 1)
        guard case .refused(let drop, let reply, let answer) = CommandFrames([identity, Array("r1".utf8), Array("transcript".utf8), body]) else {
            Issue.record("accepted")
            return
        }
        #expect(drop == BusDrop.oversizedCommand && reply.code == .tooLarge)
        #expect(reply.message == "the body is 1048577 bytes; a transcript command's body is at most 1048576 bytes")
        #expect(answer?[1] == Array("r1".utf8))
        let atTheLimit = CommandFrames([identity, Array("r1".utf8), Array("transcript".utf8), Array(body.dropLast())])
        if case .refused = atTheLimit { Issue.record("a body at the limit was refused") }
        // send carries a message's images: 32 MiB.
        if case .refused = CommandFrames([identity, Array("r2".utf8), Array("send".utf8), body]) { Issue.record("a send of 1 MiB and a byte was refused") }
        let largest = [UInt8](repeating: 0x20, count: BusSchema.maximumFrameBodySize)
        if case .refused = CommandFrames([identity, Array("r3".utf8), Array("send".utf8), largest]) { Issue.record("a send at its limit was refused") }
        guard case .refused(_, let over, _) = CommandFrames([identity, Array("r4".utf8), Array("send".utf8), largest + [0x20]]) else {
            Issue.record("a send over 32 MiB was accepted")
            return
        }
        #expect(over == CommandErrorReply(.tooLarge, "the body is 33554433 bytes; a send command's body is at most 33554432 bytes"))
    }

    @Test func aCallerWithoutIdentityIsNotAnsweredAndALongRequestIDIsNotEchoed() {
        guard case .refused(_, _, let none) = CommandFrames([[]]) else { Issue.record("accepted"); return }
        #expect(none == nil)
        let long = [UInt8](repeating: 0x61, count: 257)
        guard case .refused(_, _, let answer) = CommandFrames([identity, long]) else { Issue.record("accepted"); return }
        #expect(answer?[1] == [])
    }
}
