import Foundation
import OpenClawWire
import Testing
import TetherSchema
import TetherWire

@testable import ProtocolHandler

/// Today's gateway marks where an answer ends (`deltaCursor`): a lookup after a reconnect asks
/// only what came after it, and a `reset`, a refused cursor or a message the gap cannot show
/// falls back to a page.
@Suite struct CatchUpTests {
    typealias Driver = OpenClawDeliveryTests.Driver

    static let cursor = JSONValue.string("c-1")
    /// What today's gateway names itself: what it showed holds on the next connection.
    static let release = "2026.11.30"

    static func page(_ messages: [ChatTranscriptMessage] = OpenClawDeliveryTests.earlier, cursor: JSONValue? = cursor) -> ChatHistoryResult {
        var result = ReceiptTests.result(messages)
        result.deltaCursor = cursor
        return result
    }

    static func delta(_ messages: [ChatTranscriptMessage], cursor: String = "c-2", receipts: [InputReceipt]? = nil) -> ChatHistoryResult {
        ChatHistoryResult(
            sessionKey: nil, sessionId: nil, messages: messages, kind: "delta", deltaCursor: .string(cursor), inputReceipts: receipts,
            pendingInputs: ReceiptTests.page(), sessionInfo: ChatSessionInfo(hasActiveRun: false, activeRunIds: []))
    }

    static func lookups(_ driver: Driver, on connection: String) -> [JSONValue] {
        (driver.requests[connection] ?? []).filter { $0.method == "chat.history" }.compactMap(\.params)
    }

    /// Connected once to a gateway that gave a cursor, then connected again.
    static func reconnected() -> Driver {
        var driver = Driver()
        driver.connect("c1", epoch: 1, release: Self.release)
        ReceiptTests.answer(&driver, on: "c1", Self.page())
        driver.handle(.connectionDown)
        driver.connect("c2", epoch: 2, release: Self.release, at: 10)
        return driver
    }

    @Test func aReconnectAsksWhatCameAfterTheCursorAndPublishesOnlyTheGap() throws {
        var driver = Self.reconnected()
        let lookup = try #require(Self.lookups(driver, on: "c2").last)
        #expect(lookup["cursor"] == Self.cursor)
        #expect(lookup["limit"] == nil, "a catch-up is not cut at a limit (the gateway's schema takes none with it)")
        let before = driver.entries().count
        ReceiptTests.answer(
            &driver, on: "c2", Self.delta([OpenClawDeliveryTests.user("from another client", at: 5), OpenClawDeliveryTests.assistant("its reply", at: 6)]))
        let published = driver.entries()[before...].map(\.content)
        #expect(published == ["from another client", "its reply"])
        #expect(driver.machine.catchUp.deltas == 1 && driver.machine.catchUp.pages == 1)
        #expect(driver.machine.catchUp.cursor(for: "agent:main:main") == .string("c-2"), "the next one starts where this ended")
        driver.send("m1")
        #expect(driver.sent(on: "c2") == ["m1"], "an empty-looking gap is not a new session, and writing goes on")
    }

    @Test func aResetIsFollowedByAPageAndTheCursorForgotten() throws {
        var driver = Self.reconnected()
        ReceiptTests.answer(&driver, on: "c2", ChatHistoryResult(sessionKey: nil, sessionId: nil, messages: [], kind: "reset"))
        let lookup = try #require(Self.lookups(driver, on: "c2").last)
        #expect(lookup["cursor"] == nil && lookup["limit"]?.intValue == driver.machine.settings.historyLimit)
        #expect(driver.machine.catchUp.resets == 1)
        #expect(driver.machine.receipts.support == .offered, "a reset, which has no pending inputs, says nothing of receipts")
        let said = driver.log.compactMap { if case .diagnose(let event) = $0 { event.detail } else { nil } }
        #expect(said.contains { $0.contains("reset") && $0.contains("entries are fetched instead") })
    }

    @Test func aRefusedCursorIsDroppedForAPage() throws {
        var driver = Self.reconnected()
        let lookup = try #require(driver.requests["c2"]?.last { $0.method == "chat.history" })
        driver.respond(lookup.id, ok: false, error: GatewayErrorShape(code: "INVALID_REQUEST", message: "invalid cursor"))
        #expect(Self.lookups(driver, on: "c2").last?["cursor"] == nil)
        #expect(driver.machine.catchUp.cursor(for: "agent:main:main") == nil)
    }

    @Test func aMessageWithNoReceiptInTheGapIsLookedUpInAPageBeforeItIsWrittenAgain() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, release: Self.release)
        ReceiptTests.answer(&driver, on: "c1", Self.page())
        driver.send("m1")
        driver.handle(.connectionDown)
        driver.connect("c2", epoch: 2, release: Self.release, at: 10)
        #expect(ReceiptTests.asked(driver, on: "c2") == [["m1"]])
        // Its turn may be before the cursor: the gap has no say on it.
        ReceiptTests.answer(&driver, on: "c2", Self.delta([], receipts: []))
        #expect(driver.sent(on: "c2").isEmpty)
        let lookup = try #require(Self.lookups(driver, on: "c2").last)
        #expect(lookup["cursor"] == nil && ReceiptTests.asked(driver, on: "c2").last == ["m1"])
        // The page shows its turn, keyed: delivered, never written twice.
        ReceiptTests.answer(&driver, on: "c2", Self.page(OpenClawDeliveryTests.earlier + [ReceiptTests.userTurn("m1", "text of m1", at: 1)]))
        #expect(driver.deliveries(of: "m1").last == .delivered)
        #expect(driver.sent(on: "c2").isEmpty)
    }

    @Test func aGatewayWithoutReceiptsIsNeverSentACursor() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, release: Self.release)
        var page = Self.page()
        page.pendingInputs = nil
        ReceiptTests.answer(&driver, on: "c1", page)
        driver.handle(.connectionDown)
        driver.connect("c2", epoch: 2, release: Self.release, at: 10)
        #expect(Self.lookups(driver, on: "c2").last?["cursor"] == nil, "without receipts, a message missing from a gap could be anywhere")
    }

    @Test func theCursorIsRenewedByOneShortEntryOnceRunsEndedAndTheSessionIsQuiet() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, release: Self.release)
        ReceiptTests.answer(&driver, on: "c1", Self.page())
        driver.send("m1")
        let send = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        driver.respond(send.id, OpenClawDeliveryTests.started)
        driver.chat(OpenClawDeliveryTests.final("m1", text: "reply"), on: "c1", at: 1)
        driver.handle(.tick, at: 1 + CatchUp.renewWhenQuietFor / 2)
        #expect(Self.lookups(driver, on: "c1").count == 1, "not while the session may go on")
        driver.handle(.tick, at: 1 + CatchUp.renewWhenQuietFor + 0.1)
        let renewal = try #require(Self.lookups(driver, on: "c1").last)
        #expect(renewal["limit"]?.intValue == 1 && renewal["maxChars"]?.intValue == 1)
        let entriesBefore = driver.entries().count
        ReceiptTests.answer(&driver, on: "c1", Self.page([OpenClawDeliveryTests.assistant("r", at: 1)], cursor: .string("c-9")))
        #expect(driver.entries().count == entriesBefore, "a renewal publishes nothing")
        #expect(driver.machine.catchUp.cursor(for: "agent:main:main") == .string("c-9"))
        driver.handle(.tick, at: 30)
        #expect(Self.lookups(driver, on: "c1").count == 2, "renewed once, until runs end again")
    }

    @Test func aBusySessionRenewsItsCursorBeforeTheGatewaysLimitCouldBeReached() {
        var catchUp = CatchUp()
        catchUp.learn(from: Self.page(), session: "s", wasCatchUp: false)
        let start = Date(timeIntervalSince1970: 0)
        for run in 1..<CatchUp.renewAfterRuns {
            catchUp.runEnded(in: "s", now: start.addingTimeInterval(Double(run)))
        }
        #expect(!catchUp.isDueForRenewal("s", idle: false, now: start.addingTimeInterval(100)))
        catchUp.runEnded(in: "s", now: start.addingTimeInterval(100))
        #expect(catchUp.isDueForRenewal("s", idle: false, now: start.addingTimeInterval(100)))
        catchUp.meet(release: "another")
        #expect(catchUp.cursor(for: "s") == nil, "another release's cursors are not sent")
    }
}
