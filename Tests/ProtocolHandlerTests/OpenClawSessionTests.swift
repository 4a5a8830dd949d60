import Foundation
import OpenClawWire
import ProtocolHandler
import Testing
import TetherSchema
import TetherWire

/// Choosing another session while Tether chats: each message goes to the session it was sent
/// in, one session at a time, and nothing of one session is taken for another's.
@Suite struct OpenClawSessionTests {
    typealias Driver = OpenClawDeliveryTests.Driver

    static func sessions(in driver: Driver) -> [ConversationSession] {
        driver.log.compactMap { if case .retainSession(let session) = $0 { session } else { nil } }
    }

    static func sessionKeys(of method: String, on connection: String, in driver: Driver) -> [String] {
        (driver.requests[connection] ?? []).filter { $0.method == method }.compactMap { $0.params?["sessionKey"]?.stringValue }
    }

    @Test func aMessageSentAfterASwitchWaitsForTheReplyInTheSessionBeforeThenGoesToTheNewOneAfterItsHistory() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1")
        driver.respond("send:m1", OpenClawDeliveryTests.started)
        driver.chat(OpenClawDeliveryTests.delta("m1", text: "Hel", increment: "Hel"), on: "c1")

        driver.handle(.chooseSession("side"), at: 1)
        let switching = try #require(Self.sessions(in: driver).last)
        #expect(switching.sessionKey == "agent:main:side" && switching.requested == "side")
        #expect(switching.finishing == "agent:main:main" && switching.finishingMessages == 1, "the reply to m1 is still coming there")

        driver.send("m2")
        #expect(driver.sent(on: "c1") == ["m1"], "m2 was written while the session before still had a reply of Tether's coming")
        #expect(driver.entries { $0.id.value == "m2" }.first?.session == "agent:main:side", "m2 belongs to the session it was sent in")
        #expect(Self.sessionKeys(of: "chat.history", on: "c1", in: driver) == ["agent:main:main"])

        driver.chat(OpenClawDeliveryTests.final("m1", text: "Hello"), on: "c1", at: 2)
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.session == "agent:main:main", "the reply belongs to the session its message was sent in")
        // Gone over: the new session's history first, nothing written before it is answered.
        #expect(Self.sessionKeys(of: "chat.history", on: "c1", in: driver) == ["agent:main:main", "agent:main:side"])
        #expect(driver.log.contains { if case .diagnose(let event) = $0 { event.kind == .sessionChanged } else { false } })
        #expect(driver.sent(on: "c1") == ["m1"])
        driver.history([], on: "c1", at: 3)
        #expect(driver.sent(on: "c1") == ["m1", "m2"])
        #expect(Self.sessionKeys(of: "chat.send", on: "c1", in: driver) == ["agent:main:main", "agent:main:side"])
        let settled = try #require(Self.sessions(in: driver).last)
        #expect(settled.sessionKey == "agent:main:side" && settled.finishing == nil)

        // Its events are this session's now; the main session's are another's.
        driver.chat(OpenClawDeliveryTests.final("m2", text: "Side reply", session: "agent:main:side"), on: "c1")
        #expect(driver.entries { $0.id.value == "m2:reply" }.last?.session == "agent:main:side")
    }

    @Test func withNothingUnansweredTheSwitchIsAtOnceAndEverythingPublishedNamesTheNewSession() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.handle(.chooseSession("agent:main:side"), at: 1)
        #expect(Self.sessionKeys(of: "chat.history", on: "c1", in: driver) == ["agent:main:main", "agent:main:side"])
        driver.history([OpenClawDeliveryTests.user("hi from the phone", at: 0.5), OpenClawDeliveryTests.assistant("hello phone", at: 0.6)], on: "c1", at: 2)
        let read = driver.entries { $0.gatewayID != nil }
        #expect(read.count == 2 && read.allSatisfy { $0.session == "agent:main:side" })
        let current = try #require(Self.sessions(in: driver).last)
        #expect(current.sessionKey == "agent:main:side" && current.requested == nil && current.finishing == nil)
    }

    @Test func aRestartedProtodStartsInTheSessionOfTheMessageItMayHaveWrittenThenGoesToTheOneChosen() throws {
        var driver = Driver()
        var written = DeliveryStateMachineTests.outboxMessage("m1", sequence: 1, status: .sent, createdAt: 0, sentConnection: "c0")
        written.session = "main"
        var waiting = DeliveryStateMachineTests.outboxMessage("m2", sequence: 2, createdAt: 0)
        waiting.session = "side"
        driver.handle(.started(pending: [written, waiting], session: .init(sessionID: nil, lastSequence: 0), chosenSession: "side"), at: 0)
        #expect(driver.machine.chosenSession == "side")
        driver.connect("c1", epoch: 1, at: 1)
        // m1 may be in the main session: that one's history decides first.
        #expect(Self.sessionKeys(of: "chat.history", on: "c1", in: driver) == ["agent:main:main"])
        driver.history([OpenClawDeliveryTests.user("text of m1", at: 0.1), OpenClawDeliveryTests.assistant("reply to m1", at: 0.2)], on: "c1", at: 2)
        #expect(driver.sent(on: "c1").isEmpty, "m1 is in the gateway's history: not written again")
        #expect(driver.deliveries(of: "m1").last == .delivered)
        #expect(Self.sessionKeys(of: "chat.history", on: "c1", in: driver) == ["agent:main:main", "agent:main:side"])
        driver.history([], on: "c1", at: 3)
        #expect(driver.sent(on: "c1") == ["m2"])
        #expect(Self.sessionKeys(of: "chat.send", on: "c1", in: driver) == ["agent:main:side"])
    }

    @Test func theSameTextInAnotherSessionsHistoryIsNotTakenForAMessageSentHere() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1", content: "hello")
        driver.respond("send:m1", OpenClawDeliveryTests.started)
        driver.chat(OpenClawDeliveryTests.final("m1", text: "hi there"), on: "c1", at: 1)
        driver.handle(.chooseSession("side"), at: 2)
        // Another client said the same words in the side session, labelled as a Tether.
        var same = OpenClawDeliveryTests.user("hello", at: 1.5)
        same.senderLabel = OpenClawProtocol.ownSenderLabel
        driver.history([same, OpenClawDeliveryTests.assistant("side answer", at: 1.6)], on: "c1", at: 3)
        let read = driver.entries { $0.gatewayID != nil }
        #expect(read.map(\.content) == ["hello", "side answer"], "the side session's entries were taken for the main session's")
        #expect(read.allSatisfy { $0.inReplyTo != MessageID("m1") })
        #expect(driver.entries { $0.id.value == "m1:reply" }.count == 1)
    }

    @Test func theChoiceIsSaidWhileDisconnectedAndAppliesOnTheNextConnection() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.handle(.connectionDown, at: 1)
        driver.handle(.chooseSession("side"), at: 2)
        #expect(Self.sessions(in: driver).last?.sessionKey == "agent:main:side", "the front ends show the chosen session at once")
        driver.send("m1")
        driver.connect("c2", epoch: 2, at: 3)
        #expect(Self.sessionKeys(of: "chat.history", on: "c2", in: driver) == ["agent:main:side"])
        driver.history([], on: "c2", at: 4)
        #expect(Self.sessionKeys(of: "chat.send", on: "c2", in: driver) == ["agent:main:side"])
    }

    @Test func aReconnectWhileAReplyIsComingInTheSessionBeforeReopensThereUntilItEnds() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history(OpenClawDeliveryTests.earlier, on: "c1")
        driver.send("m1")
        driver.respond("send:m1", OpenClawDeliveryTests.started)
        driver.agent("m1", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        driver.chat(OpenClawDeliveryTests.delta("m1", text: "Hel", increment: "Hel"), on: "c1")
        #expect(driver.machine.pendingCount == 0, "m1 is delivered: only its reply is still coming")
        driver.handle(.chooseSession("side"), at: 1)
        driver.handle(.connectionDown, at: 2)
        driver.connect("c2", epoch: 2, at: 3)
        #expect(
            Self.sessionKeys(of: "chat.history", on: "c2", in: driver) == ["agent:main:main"], "reopened in the chosen session while m1's reply still comes")
        driver.history([OpenClawDeliveryTests.user("text of m1", at: 0.1)], on: "c2", at: 4)
        driver.chat(OpenClawDeliveryTests.final("m1", text: "Hello"), on: "c2", at: 5)
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.status == .received && reply.content == "Hello" && reply.session == "agent:main:main", "\(reply)")
        #expect(Self.sessionKeys(of: "chat.history", on: "c2", in: driver) == ["agent:main:main", "agent:main:side"])
    }

    @Test func aMessageSentBeforeTheFirstConnectionNamesItsSession() throws {
        var driver = Driver()
        driver.handle(.started(pending: [], session: .init(sessionID: nil, lastSequence: 0), chosenSession: "side"), at: 0)
        driver.send("m1")
        #expect(driver.entries { $0.id.value == "m1" }.first?.session == "agent:main:side")
    }
}
