import Foundation
import OpenClawWire
import Testing
import TetherSchema
import TetherWire

@testable import ProtocolHandler

/// Today's gateways say by key what they kept of Tether's messages: the receipts read into
/// verdicts, and the delivery machine deciding by them, never by texts.
@Suite struct ReceiptTests {
    typealias Driver = OpenClawDeliveryTests.Driver

    static func page(_ items: [PendingInputsPage.Item] = []) -> PendingInputsPage { PendingInputsPage(items: items, total: items.count) }

    static func item(_ key: String, _ state: String) -> PendingInputsPage.Item {
        PendingInputsPage.Item(id: "p-\(key)", runId: key, message: .string("text of \(key)"), acceptedAt: 0, state: state)
    }

    static func userTurn(_ key: String, _ text: String, at seconds: Double) -> ChatTranscriptMessage {
        var entry = OpenClawDeliveryTests.user(text, at: seconds)
        entry.turnKey = ChatTranscriptMessage.userTurnKey(of: key)
        return entry
    }

    static func result(
        _ messages: [ChatTranscriptMessage] = OpenClawDeliveryTests.earlier, receipts: [InputReceipt]? = nil, inputs: PendingInputsPage? = page(),
        active: [String] = []
    ) -> ChatHistoryResult {
        ChatHistoryResult(
            sessionKey: "agent:main:main", sessionId: "s", messages: messages, inputReceipts: receipts, pendingInputs: inputs,
            sessionInfo: ChatSessionInfo(hasActiveRun: !active.isEmpty, activeRunIds: active))
    }

    // MARK: Verdicts

    @Test func eachKeyGetsTheVerdictItsReceiptInputRunOrTurnGives() throws {
        let answer = Self.result(
            [Self.userTurn("turned", "hello", at: 1)],
            receipts: [
                InputReceipt(runId: "eaten", state: "consumed", consumedByEventId: "e1"), InputReceipt(runId: "behind", state: "pending", queued: true),
                InputReceipt(runId: "kept", state: "pending"), InputReceipt(runId: "stopped", state: "pending", cancelled: true),
                InputReceipt(runId: "restarted", state: "pending"), InputReceipt(runId: "never-asked", state: "pending"),
            ],
            inputs: Self.page([Self.item("restarted", "interrupted"), Self.item("behind", "queued")]), active: ["live"])
        let asked = ["eaten", "turned", "behind", "kept", "stopped", "restarted", "live", "gone"]
        let reading = try #require(ReceiptCheck.read(answer, asked: asked))
        #expect(reading.verdicts["eaten"] == .consumed)
        #expect(reading.verdicts["turned"] == .consumed, "the page's user entry keyed with it")
        #expect(reading.verdicts["behind"] == .waiting(queued: true))
        #expect(reading.verdicts["kept"] == .waiting(queued: false))
        #expect(reading.verdicts["stopped"] == .cancelled)
        #expect(reading.verdicts["restarted"] == .interrupted, "the pending input's own state comes before a pending receipt")
        #expect(reading.verdicts["live"] == .running)
        #expect(reading.verdicts["gone"] == .absent)
        #expect(reading.strays == ["never-asked"])
        #expect(ReceiptCheck.read(Self.result(receipts: nil), asked: ["gone"]) == nil, "no receipts at all: nothing is decided by them")
    }

    @Test func keysAreAskedOnlyOfAGatewayThatShowedItKeepsThemFiftyAtATime() {
        var check = ReceiptCheck()
        let keys = (1...60).map { "m\($0)" } + ["m1", String(repeating: "k", count: 257)]
        #expect(check.keysToAsk(keys) == nil, "not known yet")
        check.learn(from: Self.result(inputs: nil))
        #expect(check.support == .notOffered && check.keysToAsk(keys) == nil)
        check.meet(release: "2026.11")
        check.learn(from: Self.result())
        #expect(check.support == .offered)
        #expect(check.keysToAsk(keys) == (1...50).map { "m\($0)" }, "each once, none over 256 characters, at most 50")
        check.meet(release: "2026.11")
        #expect(check.support == .offered, "the same release: still known")
        check.meet(release: "2026.4.12")
        #expect(check.support == .unknown, "another release is asked anew")
    }

    // MARK: The delivery machine

    /// A message written on a connection that ended before its answer, and a new connection.
    static func inDoubt(_ keys: [String] = ["m1"]) -> Driver {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history(OpenClawDeliveryTests.earlier, on: "c1")
        for key in keys {
            driver.send(key)
        }
        driver.handle(.connectionDown)
        driver.connect("c2", epoch: 2, at: 10)
        return driver
    }

    static func answer(_ driver: inout Driver, on connection: String, _ result: ChatHistoryResult) {
        guard let lookup = driver.requests[connection]?.last(where: { $0.method == "chat.history" }) else {
            Issue.record("no history lookup on \(connection)")
            return
        }
        driver.respond(lookup.id, try? JSONValue(encoding: result))
    }

    static func asked(_ driver: Driver, on connection: String) -> [[String]] {
        (driver.requests[connection] ?? []).filter { $0.method == "chat.history" }.map { request in
            guard case .array(let keys)? = request.params?["inputRunIds"] else { return [] }
            return keys.compactMap(\.stringValue)
        }
    }

    @Test func aConsumedTurnIsDeliveredByItsKeyAndNotWrittenAgain() throws {
        var driver = Self.inDoubt()
        #expect(driver.sent(on: "c1") == ["m1"])
        // The first lookup shows the gateway keeps receipts: it is asked them before anything is decided.
        Self.answer(&driver, on: "c2", Self.result())
        #expect(Self.asked(driver, on: "c2") == [[], ["m1"]])
        #expect(driver.sent(on: "c2").isEmpty)
        // The text differs from what was sent (the gateway may rewrite it): the key decides.
        Self.answer(&driver, on: "c2", Self.result(OpenClawDeliveryTests.earlier + [Self.userTurn("m1", "rewritten", at: 11)], receipts: []))
        #expect(driver.deliveries(of: "m1").last == .delivered && driver.machine.pendingCount == 0)
        #expect(driver.sent(on: "c2").isEmpty, "written again")
        #expect(driver.machine.receipts.decidedByReceipt == 1 && driver.machine.receipts.decidedByText == 0)
    }

    @Test func aKeyTheGatewayDoesNotHaveIsWrittenAgainWithIt() throws {
        var driver = Self.inDoubt()
        Self.answer(&driver, on: "c2", Self.result())
        // Its text is in the page, but no receipt and no keyed turn: not Tether's message.
        Self.answer(&driver, on: "c2", Self.result(OpenClawDeliveryTests.earlier + [OpenClawDeliveryTests.user("text of m1", at: 11)], receipts: []))
        #expect(driver.sent(on: "c2") == ["m1"])
        #expect(!driver.deliveries(of: "m1").contains(.delivered))
    }

    @Test func aPendingReceiptIsAcceptedAndNeverWrittenAgain() throws {
        var driver = Self.inDoubt()
        Self.answer(&driver, on: "c2", Self.result())
        Self.answer(
            &driver, on: "c2",
            Self.result(receipts: [InputReceipt(runId: "m1", state: "pending", queued: true)], inputs: Self.page([Self.item("m1", "queued")])))
        #expect(driver.deliveries(of: "m1").last == .accepted, "\(driver.updates(of: "m1"))")
        #expect(driver.updates(of: "m1").last?.detail?.contains("waiting in the gateway's queue") == true)
        #expect(driver.sent(on: "c2").isEmpty)
        #expect(driver.machine.pendingCount == 1)
    }

    @Test func aCancelledInputIsSaidCancelledAndAnInterruptedOneWrittenAgain() throws {
        var driver = Self.inDoubt(["m1", "m2"])
        Self.answer(&driver, on: "c2", Self.result())
        let asked = Self.asked(driver, on: "c2").last ?? []
        #expect(asked == ["m1"], "m2 was never written: \(asked)")
        Self.answer(
            &driver, on: "c2",
            Self.result(receipts: [InputReceipt(runId: "m1", state: "pending", cancelled: true)], inputs: Self.page([Self.item("m1", "cancelled")])))
        #expect(driver.deliveries(of: "m1").last == .cancelled)
        #expect(driver.updates(of: "m1").last?.detail?.contains("will not run it") == true)

        var restarted = Self.inDoubt()
        Self.answer(&restarted, on: "c2", Self.result())
        Self.answer(
            &restarted, on: "c2",
            Self.result(receipts: [InputReceipt(runId: "m1", state: "pending")], inputs: Self.page([Self.item("m1", "interrupted")])))
        #expect(restarted.sent(on: "c2") == ["m1"], "the gateway does not run an interrupted input by itself")
        #expect(!restarted.deliveries(of: "m1").contains(.delivered) && !restarted.deliveries(of: "m1").contains(.failed))
    }

    @Test func aGatewayWithoutReceiptsIsNeverAskedThemAndAnAnswerWithoutThemFallsBackToTexts() throws {
        var driver = Self.inDoubt()
        // The 2026.4 gateway: no pending inputs in its answer.
        Self.answer(&driver, on: "c2", Self.result(OpenClawDeliveryTests.earlier + [OpenClawDeliveryTests.user("text of m1", at: 11)], inputs: nil))
        #expect(Self.asked(driver, on: "c2") == [[]], "its closed schema refuses inputRunIds")
        #expect(driver.deliveries(of: "m1").last == .delivered, "found by its text, as on that gateway")
        #expect(driver.machine.receipts.decidedByText == 1)

        var silent = Self.inDoubt()
        Self.answer(&silent, on: "c2", Self.result())
        Self.answer(&silent, on: "c2", Self.result(OpenClawDeliveryTests.earlier + [OpenClawDeliveryTests.user("text of m1", at: 11)], receipts: nil))
        let words = silent.log.compactMap { if case .diagnose(let event) = $0 { event.detail } else { nil } }
        #expect(words.contains { $0.contains("answered no receipts for the 1 key(s) asked") }, "\(words)")
        #expect(silent.deliveries(of: "m1").last == .delivered)
    }

    @Test func moreThanFiftyInDoubtAreAskedInBatches() throws {
        // A protod restarted with 55 messages written before, on a connection that is gone.
        let keys = (1...55).map { "m\($0)" }
        var driver = Driver()
        driver.handle(
            .started(
                pending: keys.enumerated().map { DeliveryStateMachineTests.outboxMessage($1, sequence: $0 + 1, status: .sent, sentConnection: "old") },
                session: .init(sessionID: nil, lastSequence: 0)))
        driver.connect("c2", epoch: 2, at: 10)
        Self.answer(&driver, on: "c2", Self.result())
        #expect(Self.asked(driver, on: "c2") == [[], Array(keys.prefix(50))])
        Self.answer(&driver, on: "c2", Self.result(receipts: keys.prefix(50).map { InputReceipt(runId: $0, state: "consumed", consumedByEventId: "e-\($0)") }))
        #expect(Self.asked(driver, on: "c2").last == Array(keys.suffix(5)), "the rest in the next lookup")
        Self.answer(&driver, on: "c2", Self.result(receipts: keys.suffix(5).map { InputReceipt(runId: $0, state: "consumed", consumedByEventId: "e-\($0)") }))
        #expect(driver.machine.pendingCount == 0 && driver.sent(on: "c2").isEmpty, "\(driver.sent(on: "c2"))")
        #expect(driver.machine.receipts.decidedByReceipt == 55)
    }

    @Test func anAcknowledgementWithTheTurnsPlaceSaysDeliveredAtOnce() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history(OpenClawDeliveryTests.earlier, on: "c1")
        driver.send("m1")
        driver.respond("send:m1", try? JSONValue(encoding: ChatSendResult(runId: "m1", status: "started", messageSeq: 3)))
        #expect(driver.deliveries(of: "m1").last == .delivered && driver.machine.pendingCount == 0)
        #expect(driver.botStates.last == .thinking, "its reply is still awaited")
    }
}
