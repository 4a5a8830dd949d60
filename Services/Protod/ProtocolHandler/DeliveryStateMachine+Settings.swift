public import Foundation
import OpenClawWire
import TetherSchema
import TetherService
import TetherWire

/// What a full outbox does with a new message.
public enum OverflowPolicy: String, Sendable, CaseIterable {
    /// Refuse it at once, in words: nothing already accepted is touched (the default).
    case refuse
    /// Accept it and drop the oldest message never written, announced on the bus; every
    /// sender is told at send time that its message may be dropped.
    case dropOldest = "drop-oldest"
}

extension DeliveryStateMachine {
    /// The timings and limits the machine decides by.
    public struct Settings: Sendable, Equatable {
        /// At most this many messages wait to be written; what happens to a new one beyond is `whenFull`'s.
        public var maximumQueued: Int
        /// What a full outbox does with a new message.
        public var whenFull: OverflowPolicy
        /// A message not written this long after it was accepted expires.
        public var expiry: TimeInterval
        /// How long something may wait on a live connection (an acknowledgement, the next
        /// chunk of a reply) before the connection is probed.
        public var probeAfter: TimeInterval
        /// How long the gateway has to answer a probe (`system.ping`) or `session.resume`.
        public var probeDeadline: TimeInterval
        /// A reply that has not grown for this long on a live connection is incomplete.
        public var replyStallDeadline: TimeInterval
        /// A growing reply is published at most once per interval (its start and end at once).
        public var streamInterval: TimeInterval
        /// OpenClaw: the session to chat in at start, and of messages that name none; nil or
        /// `main` is the gateway's main session. ``Event/chooseSession(_:)`` changes it.
        public var sessionKey: String?
        /// OpenClaw: how many transcript messages a history lookup asks for.
        public var historyLimit: Int

        public init(
            maximumQueued: Int = 100, expiry: TimeInterval = 3600, probeAfter: TimeInterval = 2, probeDeadline: TimeInterval = 2,
            replyStallDeadline: TimeInterval = 30, streamInterval: TimeInterval = 0.05, sessionKey: String? = nil, historyLimit: Int = 100,
            whenFull: OverflowPolicy = .refuse
        ) {
            self.whenFull = whenFull
            self.sessionKey = sessionKey
            self.historyLimit = min(1000, max(10, historyLimit))
            self.maximumQueued = max(1, maximumQueued)
            self.expiry = expiry
            self.probeAfter = probeAfter
            self.probeDeadline = probeDeadline
            self.replyStallDeadline = replyStallDeadline
            self.streamInterval = streamInterval
        }
    }
}
