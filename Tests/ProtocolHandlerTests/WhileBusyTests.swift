import Foundation
import OpenClawWire
import Testing
import TetherSchema
import TetherWire

@testable import ProtocolHandler

/// A message sent to steer or interrupt the reply in progress: written into it with
/// `queueMode` where the gateway takes that, and said for what the gateway did; held for a
/// reply of its own, in words, where it does not.
@Suite struct WhileBusyTests {
    typealias Driver = OpenClawDeliveryTests.Driver

    /// `m1`'s reply streaming on a gateway that does (`chat.steer` in its methods) or does not take queue modes.
    static func replying(queueModes: Bool) throws -> Driver {
        var driver = Driver()
        driver.connect("c1", epoch: 1, methods: queueModes ? ["chat.send", "chat.steer"] : ["chat.send"])
        driver.history(OpenClawDeliveryTests.earlier, on: "c1")
        driver.send("m1")
        let send = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        driver.respond(send.id, OpenClawDeliveryTests.started)
        driver.chat(OpenClawDeliveryTests.delta("m1", text: "Hel", increment: "Hel"), on: "c1")
        return driver
    }

    static func send(_ driver: inout Driver, _ id: String, _ choice: WhileBusy) {
        let request = SendMessageCommand.Request(id: MessageID(id), content: "text of \(id)", whileBusy: choice)
        guard case .commit = driver.machine.admit(request, now: OpenClawDeliveryTests.at(driver.now)) else {
            Issue.record("refused")
            return
        }
        var message = DeliveryStateMachineTests.outboxMessage(id, sequence: 9, createdAt: driver.now)
        message.content = request.content
        message.whileBusy = choice.rawValue
        driver.handle(.accepted(message, fallbackFrom: nil))
    }

    static func sessionsAnswer(_ outcome: BusyMessageOutcome?) -> JSONValue? {
        try? JSONValue(
            encoding: SessionsListResult(
                sessions: [SessionsListResult.Session(key: "agent:main:main", displayName: nil, updatedAt: nil, lastBusyMessageOutcome: outcome)],
                defaults: nil))
    }

    @Test func aSteeredMessageIsWrittenIntoTheRunAndDeliveredWithItsReplyOnceTheGatewaySaysItTookIt() throws {
        var driver = try Self.replying(queueModes: true)
        Self.send(&driver, "m2", .steer)
        let steer = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        #expect(steer.params?["idempotencyKey"]?.stringValue == "m2" && steer.params?["queueMode"]?.stringValue == "steer")
        driver.respond(steer.id, try JSONValue(encoding: ChatSendResult(runId: "m2", status: "started")))
        #expect(driver.deliveries(of: "m2").last == .accepted)
        // The gateway admitted it: an empty final under its key; the session's row says where it went.
        driver.chat(ChatEventPayload(runId: "m2", sessionKey: "agent:main:main", seq: nil, state: .final, message: nil), on: "c1")
        let asked = try #require(driver.requests["c1"]?.last { $0.method == "sessions.list" })
        driver.respond(asked.id, Self.sessionsAnswer(BusyMessageOutcome(kind: "active_run_steer_accepted")))
        let delivered = try #require(driver.updates(of: "m2").last)
        #expect(delivered.status == .delivered && delivered.answeredWith == MessageID("m1"))
        #expect(delivered.detail == "steered into the reply in progress: that reply answers both, and this message has no reply of its own")
        #expect(driver.machine.runs["m1"] != nil, "m1's reply goes on")
    }

    @Test func aSteerTheGatewayDidNotTakeWaitsInItsQueueInWords() throws {
        var driver = try Self.replying(queueModes: true)
        Self.send(&driver, "m2", .steer)
        let steer = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        driver.respond(steer.id, try JSONValue(encoding: ChatSendResult(runId: "m2", status: "started")))
        driver.chat(ChatEventPayload(runId: "m2", sessionKey: "agent:main:main", seq: nil, state: .final, message: nil), on: "c1")
        let asked = try #require(driver.requests["c1"]?.last { $0.method == "sessions.list" })
        driver.respond(asked.id, Self.sessionsAnswer(BusyMessageOutcome(kind: "active_run_steer_rejected", reason: "run not steerable")))
        let said = try #require(driver.updates(of: "m2").last)
        #expect(said.status == .accepted)
        #expect(said.detail?.hasPrefix("the gateway did not steer it (run not steerable): accepted, waiting in the gateway's queue") == true, "\(said)")
    }

    @Test func anInterruptingMessageSaysTheGatewayStoppedTheReplyForIt() throws {
        var driver = try Self.replying(queueModes: true)
        Self.send(&driver, "m2", .interrupt)
        let interrupt = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        #expect(interrupt.params?["queueMode"]?.stringValue == "interrupt")
        driver.respond(interrupt.id, try JSONValue(encoding: ChatSendResult(runId: "m2", status: "started", interruptedActiveRun: true)))
        #expect(driver.updates(of: "m2").last?.detail == "interrupting the reply in progress: the gateway stopped it, and answers this message instead")
        driver.chat(ChatEventPayload(runId: "m1", sessionKey: "agent:main:main", seq: nil, state: .aborted, stopReason: "interrupt"), on: "c1")
        let ended = driver.entries { $0.id == HistoryMerge.replyID(of: MessageID("m1")) }.last
        #expect(
            ended?.status == .incomplete && ended?.detail == "the reply was stopped: a message sent to interrupt it is answered instead",
            "\(String(describing: ended))")
    }

    @Test func aGatewayWithoutQueueModesIsNeverSentOneAndTheMessageWaitsInWords() throws {
        var driver = try Self.replying(queueModes: false)
        Self.send(&driver, "m2", .steer)
        #expect(driver.sent(on: "c1") == ["m1"], "written into a run the gateway cannot steer")
        #expect(driver.updates(of: "m2").last?.detail?.hasPrefix("this gateway cannot steer a reply in progress (it takes no queue modes)") == true)
        driver.chat(OpenClawDeliveryTests.final("m1", text: "Hello"), on: "c1")
        let written = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        #expect(written.params?["idempotencyKey"]?.stringValue == "m2" && written.params?["queueMode"] == nil, "its own run, with no queue mode")
    }
}
