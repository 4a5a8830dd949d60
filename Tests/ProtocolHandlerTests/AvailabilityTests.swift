import Foundation
import OpenClawWire
import Testing
import TetherSchema
import TetherWire

@testable import ProtocolHandler

/// Today's gateway answers `chat.send` with `UNAVAILABLE` while it restarts: the message was
/// not taken, stays in the outbox, and is written again under its key after the pause it asks;
/// never "failed", never in a tight loop.
@Suite struct AvailabilityTests {
    typealias Driver = OpenClawDeliveryTests.Driver

    static func restarting(retryable: Bool? = true, after milliseconds: Int? = 1000) -> GatewayErrorShape {
        GatewayErrorShape(
            code: "UNAVAILABLE", message: "chat.send unavailable during gateway restart",
            details: .object(["method": .string("chat.send"), "reason": .string("gateway-restarting"), "phase": .string("draining")]), retryable: retryable,
            retryAfterMs: milliseconds)
    }

    /// A connection whose history was looked up, and `m1` written on it.
    static func written() throws -> (Driver, String) {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history(OpenClawDeliveryTests.earlier, on: "c1")
        driver.send("m1")
        let request = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        return (driver, request.id)
    }

    @Test func aMessageTheRestartingGatewayDidNotTakeWaitsThePauseAndIsWrittenAgainUnderItsKey() throws {
        var (driver, request) = try Self.written()
        driver.respond(request, ok: false, error: Self.restarting(), at: 1)
        #expect(!driver.deliveries(of: "m1").contains(.failed))
        let said = try #require(driver.updates(of: "m1").last)
        #expect(said.status == .queued)
        #expect(
            said.detail
                == "not taken: the gateway is restarting (chat.send unavailable during gateway restart); it waits in Tether's outbox and is sent again in 1 s")
        #expect(driver.machine.nextDeadline.map { $0 <= OpenClawDeliveryTests.at(2) } == true)
        driver.handle(.tick, at: 1.5)
        #expect(driver.sent(on: "c1") == ["m1"], "written again before the pause was over")
        driver.handle(.tick, at: 2)
        #expect(driver.sent(on: "c1") == ["m1", "m1"], "the same key, once the pause is over")
        let again = try #require(driver.requests["c1"]?.last { $0.method == "chat.send" })
        driver.respond(again.id, OpenClawDeliveryTests.started, at: 2.1)
        #expect(driver.machine.availability.refusals == 0 && driver.machine.availability.pausedUntil == nil)
        #expect(driver.machine.pendingCount == 1, "kept until its run shows it stored")
    }

    @Test func aGatewayThatRefusesEveryTryIsAskedLessAndLessOften() {
        var availability = GatewayAvailability()
        let start = Date(timeIntervalSince1970: 0)
        let pauses = (0..<8).map { _ in availability.refused(Self.restarting(), now: start) }
        #expect(pauses == [1, 2, 4, 8, 16, 30, 30, 30])
        #expect(!availability.allowsWrites(now: start.addingTimeInterval(29)))
        availability.available()
        #expect(availability.allowsWrites(now: start) && availability.refusals == 0)
        #expect(GatewayAvailability().refusing(Self.restarting(after: nil)) == 1, "a refusal that names no pause waits a second")
    }

    /// Told by `retryable: false`, or by its words alone when the gateway leaves the flag out.
    @Test(arguments: [false, nil] as [Bool?]) func aRetryTheGatewayStoppedToAvoidRunningItTwiceIsNeverWrittenAgainHere(retryable: Bool?) throws {
        var (driver, request) = try Self.written()
        let stopped = GatewayErrorShape(
            code: "UNAVAILABLE", message: "accepted chat turn recovery ownership changed; automatic retry stopped to avoid duplicate execution",
            retryable: retryable)
        driver.respond(request, ok: false, error: stopped, at: 1)
        #expect(driver.deliveries(of: "m1").last == .accepted, "\(driver.updates(of: "m1"))")
        #expect(driver.updates(of: "m1").last?.detail?.contains("so as not to run it twice") == true)
        for second in 2...40 { driver.handle(.tick, at: Double(second)) }
        #expect(driver.sent(on: "c1") == ["m1"])
        #expect(!driver.deliveries(of: "m1").contains(.failed))
    }
}

extension GatewayAvailability {
    /// The pause one refusal asks of a gateway that has not refused before.
    fileprivate func refusing(_ error: GatewayErrorShape) -> TimeInterval {
        var copy = self
        return copy.refused(error, now: Date(timeIntervalSince1970: 0))
    }
}
