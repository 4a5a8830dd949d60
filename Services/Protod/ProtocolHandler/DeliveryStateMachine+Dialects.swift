import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

/// What differs between the two dialects on an open connection. The rest is the machine's
/// own, whatever the gateway speaks: the outbox, the order of writes, admission, expiry,
/// health, how a reply is published, the transcript and the bus topics.
///
/// A dialect decides how a connection starts and what it waits for (a `session.resume`, a
/// history lookup), how a message and a probe are written, whether a message fits, and what
/// is left of a connection when it ends or the bus path to connd drops. What its frames mean
/// is its own event (``DeliveryStateMachine/Event/frame(_:)``,
/// ``DeliveryStateMachine/Event/openClawFrame(_:)``). Its state of a connection is its link
/// (``DeliveryStateMachine/SeedLink``, ``OpenClawLink``), which the connection keeps.
protocol DeliveryDialect {
    /// What is due on an open connection of this dialect.
    static func deadlines(of machine: DeliveryStateMachine, on open: DeliveryStateMachine.Connection) -> [Date]
    /// What the open connection needs now: what it asks first, messages to write, probes, a
    /// replacement. Called only while frames reach connd and the connection is not being replaced.
    static func decide(_ machine: inout DeliveryStateMachine, now: Date, into actions: inout [DeliveryStateMachine.Action])
    /// The connection ended (what was written on it is already unconfirmed).
    static func connectionEnded(_ machine: inout DeliveryStateMachine, now: Date, into actions: inout [DeliveryStateMachine.Action])
    /// The bus path to connd dropped while the connection was open (what was written on it
    /// is already uncertain).
    static func wirePathLost(_ machine: inout DeliveryStateMachine)
    /// The frame that writes the pending message at `index` on the open connection now; nil
    /// when it waits (and the dialect said why, when it should be said).
    static func messageFrame(
        _ index: Int, of machine: inout DeliveryStateMachine, on open: DeliveryStateMachine.Connection, now: Date,
        into actions: inout [DeliveryStateMachine.Action]
    ) -> Data?
    /// The frame that asks the gateway for any answer at once: the probe of a quiet connection.
    static func probeFrame(_ machine: inout DeliveryStateMachine, now: Date) -> Data?
    /// Why a message cannot be carried on the open connection; nil when it can.
    static func refusal(for content: String, attachments: [Attachment], on open: DeliveryStateMachine.Connection) -> DeliveryStateMachine.Refusal?
}

extension DeliveryStateMachine.ConnectionDialect {
    /// The rules of the dialect spoken on the connection.
    var rules: any DeliveryDialect.Type {
        switch self {
        case .seed: SeedDialect.self
        case .openClaw: OpenClawDialect.self
        }
    }

    /// The dialect as the bus names it.
    var wire: WireDialect {
        switch self {
        case .seed: .seed
        case .openClaw: .openclaw
        }
    }
}
