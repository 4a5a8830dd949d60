import Foundation
import OpenClawWire
import ProtocolHandler
import Testing
import TetherSchema
import TetherWire

/// protod's decisions against what the real OpenClaw gateway does on the wire: a busy
/// session's queue, model failures, the gateway-wide event counter, canonical session keys.
extension OpenClawDeliveryTests {
    /// What the gateway sends for a message it queued: a `final` with no message.
    static func emptyFinal(_ run: String) -> ChatEventPayload { ChatEventPayload(runId: run, sessionKey: "agent:main:main", seq: 1, state: .final) }

    /// Connected, the history answered, m1 written and answered `started` at 0.2 s.
    static func runStarted(stall: TimeInterval = 30, uptime: Double = 1000) -> Driver {
        var driver = Driver(settings: Machine.Settings(probeAfter: 2, probeDeadline: 2, replyStallDeadline: stall, streamInterval: 0))
        driver.connect("c1", epoch: 1, uptime: uptime, at: 0)
        driver.history(Self.earlier, on: "c1", at: 0.1)
        driver.send("m1")
        driver.respond("send:m1", Self.started, at: 0.2)
        return driver
    }

    /// m1 written and answered `started`, then an empty `final`: the gateway queued it.
    static func queuedByTheGateway(uptime: Double = 1000) -> Driver {
        var driver = runStarted(uptime: uptime)
        driver.chat(Self.emptyFinal("m1"), on: "c1")
        return driver
    }

    @Test func anEmptyFinalIsNotAReplyButAPlaceInTheGatewaysQueue() throws {
        var driver = Self.queuedByTheGateway()
        let update = try #require(driver.updates(of: "m1").last)
        #expect(update.status == .accepted && update.detail?.hasPrefix("accepted, waiting in the gateway's queue") == true, "\(update)")
        #expect(driver.entries { $0.id.value == "m1:reply" }.isEmpty, "an empty final shown as a reply")
        #expect(driver.botStates.last == .idle)
        #expect(driver.machine.status(of: "m1") == .accepted)
        // The gateway's follow-up turn runs it under a run id of its own.
        driver.agent("gw-1", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        driver.chat(Self.delta("gw-1", text: "You said"), on: "c1")
        driver.send("m2")
        #expect(driver.sent(on: "c1") == ["m1"], "written while the follow-up turn runs")
        driver.chat(Self.final("gw-1", text: "You said: text of m1"), on: "c1", at: 3)
        driver.history([Self.user("text of m1", at: 2), Self.assistant("You said: text of m1", at: 3)], on: "c1", at: 3.1)
        #expect(driver.deliveries(of: "m1").last == .delivered)
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.content == "You said: text of m1" && reply.inReplyTo?.value == "m1" && reply.attribution == .history)
        #expect(driver.sent(on: "c1") == ["m1", "m2"])
    }

    @Test func aMessageTheGatewaysQueueDroppedIsSaidDroppedNeverDelivered() throws {
        var driver = Self.queuedByTheGateway()
        let summary =
            "[Queued messages while agent was busy]\n\n[Queue overflow] Dropped 2 messages due to cap.\nSummary:\n- [Thu 2026-11-26 08:14 UTC] text of x\n- [Thu 2026-11-26 08:14 UTC] text of m1"
        driver.chat(Self.final("gw-9", text: "Noted."), on: "c1", at: 5)
        driver.history([Self.user(summary, at: 4), Self.assistant("Noted.", at: 5)], on: "c1", at: 5.1)
        let update = try #require(driver.updates(of: "m1").last)
        #expect(update.status == .failed && update.detail?.hasPrefix("dropped by the gateway") == true, "\(update)")
        #expect(!driver.deliveries(of: "m1").contains(.delivered))
        #expect(driver.machine.pendingCount == 0)
    }

    @Test func aGatewayRestartLosesItsQueueAndTheMessageIsWrittenAgain() {
        var driver = Self.queuedByTheGateway()
        driver.handle(.connectionDown, at: 10)
        driver.connect("c2", epoch: 2, uptime: 1, at: 12)
        driver.history([], on: "c2")
        #expect(driver.sent(on: "c2") == ["m1"])
        #expect(!driver.deliveries(of: "m1").contains(.delivered))
    }

    @Test func aRestartedProtodStillKnowsTheMessageIsInTheGatewaysQueueAndMatchesItsFollowUpTurn() throws {
        let queued = Self.queuedByTheGateway()
        let kept = try #require(queued.log.compactMap { if case .persistInGatewayQueue(let id, let at) = $0 { (id, at) } else { nil } }.first)
        #expect(kept.0 == "m1")
        // protod restarts: the outbox gives m1 back as the gateway holds it.
        var message = DeliveryStateMachineTests.outboxMessage("m1", sequence: 1, status: .accepted, createdAt: 0, sentConnection: "c1")
        message.acceptedAt = kept.1
        var driver = Driver()
        driver.handle(.started(pending: [message], session: .init(sessionID: nil, lastSequence: 0)), at: 5)
        #expect(driver.machine.status(of: "m1") == .accepted)
        driver.connect("c2", epoch: 2, uptime: 1005, at: 6)
        driver.history([], on: "c2")
        #expect(driver.sent(on: "c2").isEmpty, "written again while the gateway still holds it")
        #expect(!driver.deliveries(of: "m1").contains(.delivered), "delivered while only in the gateway's memory")
        driver.agent("gw-1", stream: "lifecycle", ["phase": .string("start")], on: "c2")
        driver.chat(Self.final("gw-1", text: "You said: text of m1"), on: "c2", at: 8)
        driver.history([Self.user("text of m1", at: 7), Self.assistant("You said: text of m1", at: 8)], on: "c2", at: 8.1)
        #expect(driver.deliveries(of: "m1").last == .delivered)
        #expect(driver.entries { $0.id.value == "m1:reply" }.last?.inReplyTo?.value == "m1")
    }

    @Test func aProtodThatJoinsAnOpenConnectionTakesTheGatewaysStartFromTheHandshake() {
        var message = DeliveryStateMachineTests.outboxMessage("m1", sequence: 1, status: .accepted, createdAt: 0, sentConnection: "c1")
        message.acceptedAt = Self.at(2)
        var driver = Driver()
        driver.handle(.started(pending: [message], session: .init(sessionID: nil, lastSequence: 0)), at: 10)
        // The handshake was at 0, when the gateway had been up for 5 s; this protod starts at 10.
        let gateway = GatewayInfo(
            dialect: .openclaw, protocolVersion: 3, uptimeMilliseconds: 5000, startedAt: Self.at(-5), tickIntervalMilliseconds: 30000,
            mainSessionKey: "agent:main:main", clockOffsetMilliseconds: 0)
        driver.handle(.connectionUp(epoch: 1, id: "c1", gateway: gateway), at: 10)
        driver.handle(.wirePath(heard: true), at: 10)
        driver.history([], on: "c1", at: 10.1)
        #expect(driver.sent(on: "c1").isEmpty, "taken for a gateway that restarted after it queued the message")
        #expect(driver.machine.status(of: "m1") == .accepted)
    }

    @Test func aReconnectToTheSameGatewayLeavesTheMessageInItsQueue() {
        var driver = Self.queuedByTheGateway()
        driver.handle(.connectionDown, at: 10)
        driver.connect("c2", epoch: 2, uptime: 1012, at: 12)
        driver.history([], on: "c2")
        #expect(driver.sent(on: "c2").isEmpty, "written again while the gateway still holds it")
        #expect(driver.machine.status(of: "m1") == .accepted)
    }

    @Test func aModelFailureIsSaidAtOnceAndTheReplyIsIncompleteAfterTheStall() throws {
        var driver = Self.runStarted(stall: 10)
        let error = "500 Internal Server Error"
        for second in [1.0, 6.0] {
            driver.now = second
            driver.agent("m1", stream: "lifecycle", ["phase": .string("error"), "error": .string(error)], on: "c1")
        }
        let said = driver.log.compactMap { if case .diagnose(let event) = $0, event.kind == .replyFailed { event } else { nil } }
        #expect(said.count == 2 && said.first?.detail == "the model failed: \(error); the gateway is retrying")
        let thinking = driver.log.compactMap { if case .retainBotState(let state) = $0 { state } else { nil } }.last
        #expect(thinking?.state == .thinking && thinking?.detail == "the model failed: \(error); the gateway is retrying")
        #expect(driver.deliveries(of: "m1").last == .delivered, "a run that failed had its message")
        driver.handle(.tick, at: 15)
        #expect(driver.entries { $0.id.value == "m1:reply" }.isEmpty, "cut before the stall")
        driver.handle(.tick, at: 16.1)
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.status == .incomplete && reply.detail == "the model failed: \(error)")
        #expect(driver.botStates.last == .idle)
    }

    /// The gateway says nothing when it gives up on a failing model; asking with the message's
    /// key says it: `in_flight` while it retries, `ok` once the run ended.
    @Test func aFailingRunIsAskedAfterWhetherItGoesOnAndEndsWhenTheGatewayGaveUp() throws {
        var driver = Self.runStarted()
        driver.now = 1
        driver.agent("m1", stream: "lifecycle", ["phase": .string("error"), "error": .string("500")], on: "c1")
        driver.handle(.tick, at: 3.1)
        let asks = (driver.requests["c1"] ?? []).filter { $0.id == "ask:m1" }
        #expect(asks.count == 1 && asks.first?.method == "chat.send" && asks.first?.params?["idempotencyKey"]?.stringValue == "m1")
        driver.respond("ask:m1", try? JSONValue(encoding: ChatSendResult(runId: "m1", status: "in_flight")), at: 3.2)
        #expect(driver.entries { $0.id.value == "m1:reply" }.isEmpty, "ended while the gateway retries")
        driver.handle(.tick, at: 5.3)
        #expect((driver.requests["c1"] ?? []).count { $0.id == "ask:m1" } == 2)
        driver.respond("ask:m1", try? JSONValue(encoding: ChatSendResult(runId: "m1", status: "ok")), at: 5.4)
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.status == .incomplete && reply.detail == "the model failed: 500; the gateway gave up")
        #expect(driver.botStates.last == .idle)
    }

    @Test func aReplyThatStopsIsIncompleteAfterTheStallOnOpenClawToo() throws {
        var driver = Self.runStarted(stall: 10)
        driver.chat(Self.delta("m1", text: "half"), on: "c1")
        driver.handle(.tick, at: 10.3)
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.status == .incomplete && reply.content == "half" && reply.detail == "the reply stopped: nothing came for 10 s")
        #expect(driver.botStates.last == .idle)
    }

    /// The counter is the whole gateway's: a gap while no reply of Tether's is under way loses nothing.
    @Test func aGapWithNoReplyUnderWayLooksNothingUp() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history([], on: "c1")
        driver.event("tick", .object([:]), on: "c1", sequence: 40)
        driver.event("tick", .object([:]), on: "c1", sequence: 45)
        #expect(driver.lookups(on: "c1") == 1)
        let gap = try #require(driver.log.compactMap { if case .diagnose(let event) = $0, event.kind == .sequenceGap { event } else { nil } }.last)
        #expect(gap.detail?.contains("the gateway numbers events for all its clients") == true, "\(gap.detail ?? "")")
    }

    @Test func eventsUnderTheCanonicalOrTheTypedKeyAreThisSession() throws {
        var driver = Driver(settings: Machine.Settings(probeAfter: 2, probeDeadline: 2, streamInterval: 0, sessionKey: "side"))
        driver.connect("c1", epoch: 1)
        #expect(driver.requests["c1"]?.first?.params?["sessionKey"]?.stringValue == "agent:main:side")
        driver.history([], on: "c1")
        driver.send("m1")
        let send = try #require(driver.requests["c1"]?.first { $0.method == "chat.send" })
        #expect(send.params?["sessionKey"]?.stringValue == "agent:main:side")
        driver.respond("send:m1", Self.started)
        driver.chat(Self.delta("m1", text: "You said", session: "agent:main:side"), on: "c1")
        driver.chat(Self.final("m1", text: "You said: text of m1", session: "agent:main:side"), on: "c1")
        #expect(driver.entries { $0.id.value == "m1:reply" }.last?.status == .received)
        driver.send("m2")
        driver.respond("send:m2", Self.started)
        // `aborted` echoes the key as the client sent it.
        driver.chat(ChatEventPayload(runId: "m2", sessionKey: "side", seq: nil, state: .aborted, stopReason: "rpc"), on: "c1")
        #expect(driver.entries { $0.id.value == "m2:reply" }.last?.status == .incomplete)
        driver.chat(Self.final("x", text: "elsewhere", session: "agent:main:main"), on: "c1")
        #expect(driver.lookups(on: "c1") == 1, "another session's run looked up")
    }
}

extension OpenClawDeliveryTests {
    /// A gateway whose queue never runs the message (another queue mode) holds Tether back only
    /// until its session has been quiet for the reply stall deadline.
    @Test func aMessageTheGatewayNeverRunsHoldsTheNextBackOnlyUntilTheSessionIsQuiet() {
        var driver = Driver(settings: Machine.Settings(probeAfter: 2, probeDeadline: 2, replyStallDeadline: 10, streamInterval: 0))
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1", at: 0.1)
        driver.send("m1")
        driver.respond("send:m1", Self.started, at: 0.2)
        driver.chat(Self.emptyFinal("m1"), on: "c1")
        driver.send("m2")
        driver.chat(Self.delta("phone-1", text: "busy"), on: "c1", at: 5)
        driver.chat(Self.final("phone-1", text: "busy, done"), on: "c1", at: 6)
        driver.history([], on: "c1", at: 6.1)
        driver.handle(.tick, at: 15)
        #expect(driver.sent(on: "c1") == ["m1"], "written while the session was busy")
        driver.handle(.tick, at: 16.1)
        #expect(driver.sent(on: "c1") == ["m1", "m2"])
        #expect(driver.machine.status(of: "m1") == .accepted, "still said waiting in the gateway's queue")
    }
}
