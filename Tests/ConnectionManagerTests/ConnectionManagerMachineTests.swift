import Foundation
import NIOWebSocket
import OpenClawWire
import Testing
import TetherSchema

@testable import ConnectionManager

/// connd's decisions around the state machine: an attempt's steps and deadlines, liveness,
/// what an end means, the waits between attempts, front ends, the network and stopping.
@Suite struct ConnectionManagerMachineTests {
    @Test func aSeedConnectionAuthenticatesOnTheUpgradeAndCarriesFramesWithItsEpoch() {
        var rig = MachineRig()
        #expect(rig.send(.start) == [.prepare(attempt: 1)])
        #expect(rig.published?.phase == .connecting)
        #expect(rig.send(.attempt(1, .prepared(token: "t", identity: nil, deviceToken: nil))) == [.openSocket(attempt: 1, token: "t", authorize: true)])
        #expect(rig.send(.attempt(1, .upgraded)) == [])
        #expect(rig.state == .connected && rig.published?.connectionID == "test-1" && rig.published?.gateway?.dialect == .seed)
        #expect(rig.send(.attempt(1, .text("in", date: Date()))) == [.publishInbound(epoch: 1, text: "in")])
        #expect(rig.send(.outbound(WireFrame(epoch: 1, text: "out"))) == [.write(attempt: 1, "out")])
        #expect(rig.send(.outbound(WireFrame(epoch: nil, text: "any"))) == [.write(attempt: 1, "any")], "a frame for no connection in particular")
        #expect(rig.send(.outbound(WireFrame(epoch: 7, text: "old"))) == [], "a frame for another connection is dropped")
    }

    @Test func aFrameWhileNotConnectedIsDropped() {
        var rig = MachineRig()
        rig.send(.start)
        #expect(rig.send(.outbound(WireFrame(epoch: nil, text: "early"))) == [])
    }

    @Test func theUpgradeIsGivenUpAtItsDeadline() {
        var rig = MachineRig()
        rig.send(.start)
        rig.send(.attempt(1, .prepared(token: "t", identity: nil, deviceToken: nil)))
        #expect(rig.wait(.milliseconds(4999)) == [], "not before the deadline")
        #expect(rig.wait(.milliseconds(1)) == [.end(attempt: 1), .knock(.duringRetryWait)])
        #expect(rig.state == .connecting(attempt: 2, inFlight: false))
        #expect(rig.published?.lastError == "the gateway at \(MachineRig.url) did not complete the WebSocket upgrade within 5.0 seconds")
        #expect(rig.retryIn == .seconds(1), "a first connection's second attempt waits the base delay")
        #expect(rig.send(.attempt(1, .upgraded)) == [] && rig.state == .connecting(attempt: 2, inFlight: false), "the attempt given up is over")
    }

    @Test func aLateReportFromAnAttemptGivenUpChangesNothing() {
        var rig = MachineRig()
        rig.send(.start)
        rig.send(.attempt(1, .prepared(token: "t", identity: nil, deviceToken: nil)))
        let reconnect = rig.command(.reconnect)
        #expect(reconnect.accepted && reconnect.actions == [.end(attempt: 1), .prepare(attempt: 2)])
        #expect(rig.send(.attempt(1, .failed(Unreachable()))) == [])
        #expect(rig.send(.attempt(1, .upgraded)) == [])
        #expect(rig.state == .connecting(attempt: 1, inFlight: true))
        #expect(rig.send(.attempt(2, .prepared(token: "t", identity: nil, deviceToken: nil))) == [.openSocket(attempt: 2, token: "t", authorize: true)])
    }

    @Test func aSeedGatewayThatStopsAnsweringPingsIsDeadWhenTheNextPingIsDue() {
        var rig = MachineRig()
        rig.connect()
        #expect(rig.wait(.milliseconds(9999)) == [])
        #expect(rig.wait(.milliseconds(1)) == [.ping(attempt: 1)])
        #expect(rig.send(.attempt(1, .pinged(previousAnswered: true))) == [])
        #expect(rig.wait(.seconds(10)) == [.ping(attempt: 1)])
        #expect(rig.send(.attempt(1, .pinged(previousAnswered: false))) == [.end(attempt: 1), .knock(.duringRetryWait)])
        #expect(rig.state == .reconnecting(attempt: 1, inFlight: false))
        #expect(rig.published?.lastError == "the gateway went silent (no pong within 10.0 seconds): the connection is dead")
    }

    @Test func whatTheEndOfAnOpenConnectionMeans() {
        var rig = MachineRig()
        rig.connect()
        rig.send(.attempt(1, .ended(GatewayCloseFrame(code: .goingAway, reason: "restarting"))))
        #expect(rig.published?.lastError?.hasPrefix("the gateway closed the connection (") == true)
        #expect(rig.published?.lastError?.hasSuffix(": restarting)") == true)
        #expect(rig.state == .reconnecting(attempt: 1, inFlight: false))

        var dropped = MachineRig()
        dropped.connect()
        dropped.send(.attempt(1, .ended(nil)))
        #expect(dropped.published?.lastError == "lost the connection to the gateway: it went away")

        var failed = MachineRig()
        failed.connect()
        failed.send(.attempt(1, .failed(Unreachable())))
        #expect(failed.published?.lastError == "cannot connect to \(MachineRig.url): connection refused")
        #expect(failed.state == .reconnecting(attempt: 1, inFlight: false))
    }

    @Test func aRefusedUpgradeIsAskedWhyAndARejectedTokenIsWatchedUntilItChanges() {
        var rig = MachineRig()
        rig.send(.start)
        rig.send(.attempt(1, .prepared(token: "wrong", identity: nil, deviceToken: nil)))
        #expect(rig.send(.attempt(1, .upgradeRefused(httpStatus: 401))) == [.end(attempt: 1)])
        #expect(rig.state == .failed(.credentialRejected))
        #expect(rig.published?.lastError == "the gateway at \(MachineRig.url) rejected the token (HTTP 401)")
        #expect(rig.wait(.seconds(1)) == [.checkCredential])
        #expect(rig.wait(.seconds(5)) == [], "one reading at a time")
        #expect(rig.send(.credentialChecked(token: "wrong")) == [], "the same token")
        #expect(rig.wait(.seconds(1)) == [.checkCredential])
        #expect(rig.send(.credentialChecked(token: nil)) == [])
        #expect(rig.wait(.seconds(1)) == [.checkCredential])
        #expect(rig.send(.credentialChecked(token: "right")) == [.prepare(attempt: 2)])
        #expect(rig.wait(.seconds(10)) == [], "connecting: the token is not watched")

        #expect(
            ConnectionProblem.upgradeRefused(httpStatus: 503, url: "ws://g")
                == ConnectionProblem(.unreachable, "the gateway at ws://g refused the connection (HTTP 503)"))
        #expect(
            ConnectionProblem.upgradeRefused(httpStatus: nil, url: "ws://g")
                == ConnectionProblem(.unreachable, "the gateway at ws://g refused the WebSocket upgrade"))
    }

    @Test func anUnreadableTokenIsReadAgainEverySecond() {
        var rig = MachineRig()
        rig.send(.start)
        #expect(rig.send(.attempt(1, .credentialUnreadable("it must not be readable by others"))) == [.end(attempt: 1)])
        #expect(rig.state == .failed(.credentialUnavailable))
        #expect(rig.published?.lastError == "the token cannot be read: it must not be readable by others")
        #expect(rig.wait(.seconds(1)) == [.checkCredential])
        #expect(rig.send(.credentialChecked(token: nil)) == [])
        #expect(rig.wait(.seconds(1)) == [.checkCredential])
        #expect(rig.send(.credentialChecked(token: "t")) == [.prepare(attempt: 2)])
    }

    @Test func aRestartedGatewayIsTriedAsSoonAsItsPortTakesConnectionsAgain() {
        var rig = MachineRig()
        rig.connect()
        #expect(rig.send(.attempt(1, .ended(nil))) == [.end(attempt: 1), .knock(.duringRetryWait)])
        #expect(rig.send(.knockAnswered(.refused, .duringRetryWait)) == [], "restarting")
        #expect(rig.wait(.milliseconds(49)) == [])
        #expect(rig.wait(.milliseconds(1)) == [.knock(.duringRetryWait)], "again 50 ms later")
        #expect(rig.send(.knockAnswered(.accepted, .duringRetryWait)) == [.prepare(attempt: 2)], "back: tried at once")
        #expect(rig.state == .reconnecting(attempt: 1, inFlight: true))
    }

    @Test func aPortThatTakesTheFirstKnockIsLeftToTheBackoff() {
        var rig = MachineRig()
        rig.connect()
        rig.send(.attempt(1, .ended(nil)))
        #expect(rig.send(.knockAnswered(.accepted, .duringRetryWait)) == [])
        #expect(rig.wait(.milliseconds(999)) == [])
        #expect(rig.wait(.milliseconds(1)) == [.prepare(attempt: 2)])
        // More than a minute after the gateway was lost, a retry waits without knocking.
        rig.send(.attempt(2, .credentialUnreadable("gone")))
        rig.send(.credentialChecked(token: nil))
        rig.wait(.seconds(61))
        #expect(rig.command(.reconnect).actions == [.prepare(attempt: 3)])
        rig.send(.attempt(3, .prepared(token: "t", identity: nil, deviceToken: nil)))
        #expect(rig.send(.attempt(3, .failed(Unreachable()))) == [.end(attempt: 3)])
    }

    @Test func afterTheAttemptsRunOutTheGatewaysPortIsKnockedAtSlowly() {
        var rig = MachineRig(maxAttempts: 1)
        rig.send(.start)
        rig.send(.attempt(1, .prepared(token: "t", identity: nil, deviceToken: nil)))
        #expect(rig.send(.attempt(1, .failed(Unreachable()))) == [.end(attempt: 1)])
        #expect(rig.state == .failed(.unreachable))
        #expect(rig.wait(.milliseconds(29_999)) == [])
        #expect(rig.wait(.milliseconds(1)) == [.knock(.whileFailed)])
        #expect(rig.send(.knockAnswered(.silent, .whileFailed)) == [])
        #expect(rig.wait(.seconds(30)) == [.knock(.whileFailed)])
        #expect(rig.send(.knockAnswered(.accepted, .whileFailed)) == [.prepare(attempt: 2)])
        #expect(rig.wait(.seconds(60)) == [], "connecting: no knocking")

        var never = MachineRig(maxAttempts: 1, failedKnockInterval: nil)
        never.send(.start)
        never.send(.attempt(1, .failed(Unreachable())))
        #expect(never.wait(.seconds(300)) == [], "no knocking asked for")
    }

    @Test func suspendClosesGracefullyAndResumeConnectsAgain() {
        var rig = MachineRig()
        rig.connect()
        let suspend = rig.command(.suspend)
        #expect(suspend.accepted && suspend.actions == [.closeGracefully(attempt: 1)])
        #expect(rig.state == .suspended(.command))
        #expect(rig.send(.outbound(WireFrame(epoch: 1, text: "late"))) == [], "closing: nothing more is written")
        #expect(rig.send(.attempt(1, .text("last", date: Date()))) == [.publishInbound(epoch: 1, text: "last")], "what the gateway still sends is carried")
        #expect(rig.send(.attempt(1, .ended(nil))) == [.end(attempt: 1)], "closed in time")
        #expect(rig.state == .suspended(.command), "a closing connection's end is no loss")
        let resume = rig.command(.resume)
        #expect(resume.accepted && resume.actions == [.prepare(attempt: 2)])
        #expect(rig.command(.resume).accepted == false, "not suspended")
    }

    @Test func aConnectionThatDoesNotCloseInTimeIsCut() {
        var rig = MachineRig()
        rig.connect()
        rig.command(.suspend)
        #expect(rig.wait(.milliseconds(4999)) == [])
        #expect(rig.wait(.milliseconds(1)) == [.end(attempt: 1)])
        #expect(rig.send(.attempt(1, .ended(nil))) == [], "cut already")
    }

    @Test func stopFinishesOnceTheConnectionIsClosed() {
        var rig = MachineRig()
        rig.connect()
        #expect(rig.send(.stop) == [.closeGracefully(attempt: 1)])
        #expect(rig.command(.resume).accepted == false, "stopping")
        #expect(rig.send(.attempt(1, .ended(nil))) == [.end(attempt: 1), .finished])
        #expect(rig.send(.start) == [], "finished")

        var cut = MachineRig()
        cut.connect()
        cut.send(.stop)
        #expect(cut.wait(.seconds(5)) == [.end(attempt: 1), .finished])

        var attempting = MachineRig()
        attempting.send(.start)
        #expect(attempting.send(.stop) == [.end(attempt: 1), .finished], "an attempt is given up at once")
    }

    @Test func theLastFrontEndLeavingSuspendsAfterTheGracePeriodAndTheFirstBackResumes() {
        var rig = MachineRig()
        rig.connect()
        let first = FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .active)
        #expect(rig.send(.frontEnd(first)) == [.retainAttached([first])])
        #expect(rig.send(.frontEnd(FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .leaving))) == [.retainAttached([])])
        #expect(rig.wait(.milliseconds(29_999)) == [.ping(attempt: 1), .ping(attempt: 1)], "only the heartbeat meanwhile")
        #expect(rig.wait(.milliseconds(1)) == [.closeGracefully(attempt: 1)])
        #expect(rig.state == .suspended(.idle))
        rig.send(.attempt(1, .ended(nil)))
        let second = FrontEndPresence(frontEnd: "web", instance: "b", pid: 2, state: .active)
        #expect(rig.send(.frontEnd(second)) == [.retainAttached([second]), .prepare(attempt: 2)])
        #expect(rig.wait(.seconds(3)) == [.retainAttached([])], "its presence lapsed")
    }

    /// Suspended, the connection could not hear the gateway's approvals (the gateway gives up
    /// at once on one nobody can answer): one that holds them stays, and sleep still suspends.
    @Test func aConnectionThatHoldsTheGatewaysApprovalsIsNotSuspendedForIdleness() {
        var rig = MachineRig()
        rig.connect()
        rig.machine.gateway = GatewayInfo(dialect: .openclaw, protocolVersion: 4, scopes: OpenClawProtocol.chatScopes + [OpenClawProtocol.approvalsScope])
        let first = FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .active)
        rig.send(.frontEnd(first))
        rig.send(.frontEnd(FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .leaving)))
        #expect(!rig.wait(.seconds(31)).contains(.closeGracefully(attempt: 1)))
        #expect(rig.state == .connected)
        #expect(rig.send(.machineSleeps(true)) == [.closeGracefully(attempt: 1)])

        var chatOnly = MachineRig()
        chatOnly.connect()
        chatOnly.machine.gateway = GatewayInfo(dialect: .openclaw, protocolVersion: 4, scopes: OpenClawProtocol.chatScopes)
        chatOnly.send(.frontEnd(first))
        chatOnly.send(.frontEnd(FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .leaving)))
        #expect(chatOnly.wait(.seconds(31)).contains(.closeGracefully(attempt: 1)), "without the scope, idleness suspends as before")
    }

    @Test func sleepSuspendsAndWakingResumes() {
        var rig = MachineRig()
        rig.connect()
        #expect(rig.send(.machineSleeps(true)) == [.closeGracefully(attempt: 1)])
        #expect(rig.state == .suspended(.sleep))
        #expect(rig.send(.machineSleeps(false)) == [.prepare(attempt: 2)])
    }

    @Test func losingTheNetworkClosesAndItsReturnConnectsAtOnce() {
        var rig = MachineRig()
        rig.connect()
        let up = NetworkPath(satisfied: true, interface: "eth0", kind: nil, expensive: false)
        #expect(rig.send(.networkPath(up)) == [], "the path connd started with")
        #expect(rig.send(.networkPath(up)) == [], "no change")
        #expect(
            rig.send(.networkPath(NetworkPath(satisfied: true, interface: "wlan0", kind: nil, expensive: false))) == [
                .end(attempt: 1), .prepare(attempt: 2),
            ])
        rig.send(.attempt(2, .prepared(token: "t", identity: nil, deviceToken: nil)))
        rig.send(.attempt(2, .upgraded))
        let down = NetworkPath(satisfied: false, interface: nil, kind: nil, expensive: false)
        #expect(rig.send(.networkPath(down)) == [.end(attempt: 2)])
        #expect(rig.state == .waitingForNetwork)
        #expect(rig.send(.networkPath(down)) == [])
        #expect(rig.send(.networkPath(up)) == [.prepare(attempt: 3)])
    }
}
