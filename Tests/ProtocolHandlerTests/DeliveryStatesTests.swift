import Foundation
import OpenClawWire
import Testing
import TetherBus
import TetherSchema
import TetherWire

@testable import ProtocolHandler

/// The sweeps (``DeliveryStateMachineTests/promisesHold(situation:event:)``,
/// ``OpenClawPromiseSweepTests/promisesHold(situation:event:)``) take every event in each of
/// their situations; these tests check that those situations put a message in every state
/// its delivery can be in, in each dialect, so that no state goes unswept.
@Suite struct DeliveryStatesTests {
    /// The name of a delivery's case, and of what the gateway answered for it.
    static func state(of delivery: DeliveryStateMachine.Delivery?) -> String {
        switch delivery {
        case nil: "settled"
        case .queued?: "queued"
        case .written?: "written"
        case .uncertain(_, nil, _)?: "uncertain"
        case .uncertain(_, .some, _)?: "uncertain, held"
        case .held(.accepted, _)?: "held, accepted"
        case .held(.inGatewayQueue, _)?: "held, in the gateway's queue"
        case .held(.quiet, _)?: "held, quiet"
        case .unconfirmed(nil, _)?: "unconfirmed"
        case .unconfirmed(.some, _)?: "unconfirmed, held"
        }
    }

    @Test func theSeedSweepsSituationsReachEveryStateOfTheSeedDialect() throws {
        let expected = [
            "disconnected, one queued": "queued",
            "connected to a seed peer, one awaiting its acknowledgement": "written",
            "bus path down, one written": "uncertain",
            "a restarted protod on the connection it wrote on": "uncertain",
            "written on a connection that ended, a new one not yet heard from": "unconfirmed",
            "a restarted protod, disconnected, one written before": "uncertain",
        ]
        for (situation, state) in expected {
            var driver = DeliveryStateMachineTests.Driver()
            let arrange = try #require(DeliveryStateMachineTests.situations[situation])
            arrange(&driver)
            #expect(Self.state(of: driver.machine.pending.first { $0.id == "a" }?.delivery) == state, "\(situation)")
        }
    }

    @Test func theOpenClawSweepsSituationsReachEveryStateOfTheOpenClawDialect() throws {
        let expected = [
            "history lookup under way, one queued": "queued",
            "one written, unanswered": "written",
            "bus path down, one written": "uncertain",
            "bus path down, one in the gateway's queue": "uncertain, held",
            "one answered started, no sign of its run yet": "held, accepted",
            "one in the gateway's queue": "held, in the gateway's queue",
            "one in the gateway's queue, its session quiet since": "held, quiet",
            "written on a connection that ended, a new one looking the history up": "unconfirmed",
            "one in the gateway's queue, a new connection looking the history up": "unconfirmed, held",
        ]
        for (situation, state) in expected {
            var driver = OpenClawDeliveryTests.Driver(settings: OpenClawPromiseSweepTests.settings)
            let arrange = try #require(OpenClawPromiseSweepTests.situations[situation])
            arrange(&driver)
            #expect(Self.state(of: driver.machine.pending.first { $0.id == "a" }?.delivery) == state, "\(situation)")
        }
    }

    /// The connection's phases in the same sweeps: live, probing, replacing.
    @Test func theSweepsReachEveryPhaseOfTheConnection() throws {
        let expected: [String: DeliveryStateMachine.Phase?] = [
            "connected to a seed peer, idle": .live,
            "replacing the connection": .replacing,
            "disconnected, one queued": nil,
        ]
        for (situation, phase) in expected {
            var driver = DeliveryStateMachineTests.Driver()
            let arrange = try #require(DeliveryStateMachineTests.situations[situation])
            arrange(&driver)
            #expect(driver.machine.connection?.phase == phase, "\(situation)")
        }
        var probing = DeliveryStateMachineTests.Driver()
        let arrange = try #require(DeliveryStateMachineTests.situations["connected, probing"])
        arrange(&probing)
        #expect(probing.machine.connection?.probeDeadline != nil, "connected, probing")
    }

    @Test func aSendIsRefusedWithACodeBesideItsWords() {
        var machine = DeliveryStateMachine(now: Date())
        let cases: [(SendMessageCommand.Request, DeliveryStateMachine.RefusalCode)] = [
            (SendMessageCommand.Request(id: MessageID("e"), content: ""), .empty),
            (SendMessageCommand.Request(id: MessageID("s"), content: " \n "), .empty),
            (SendMessageCommand.Request(id: MessageID("k"), content: "x", strategy: .latestOnly), .noKind),
        ]
        for (request, code) in cases {
            guard case .refuse(let refusal, _) = machine.admit(request, now: Date()) else {
                Issue.record("\(request.id) was let in")
                continue
            }
            #expect(refusal.code == code)
            #expect(!refusal.description.isEmpty)
        }
    }
}
