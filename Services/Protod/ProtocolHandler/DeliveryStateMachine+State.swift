public import Foundation
public import OpenClawWire
public import TetherSchema
public import TetherService
public import TetherWire

/// What the machine keeps of each message, reply and connection.
extension DeliveryStateMachine {
    /// A message not yet settled by the gateway, as the machine tracks it.
    struct Pending: Sendable, Equatable {
        var id: String
        var sequence: Int
        var content: String
        var createdAt: Date
        var strategy: DeliveryStrategy
        var kind: String?
        var retry: RetryPolicy
        /// Written to the gateway at least once: it may have reached it.
        var everWritten: Bool
        /// The connection it was last written to, and when.
        var writtenOn: String?
        var writtenAt: Date?
        /// When it was first written: the gateway cannot have it from before.
        var firstWrittenAt: Date?
        /// When its acknowledgement is overdue on the connection it was written to: the
        /// connection is probed then.
        var acknowledgementDue: Date?
        /// When its acknowledgement is late by its retry policy (counted against health once).
        var lateAt: Date?
        /// Overdue periods so far on live connections.
        var overdue = 0
        /// Written by an earlier protod: the frame may have died with it in the bus.
        var restored = false
        /// OpenClaw: where the message stands between the outbox and the gateway's transcript.
        var place: OpenClawPlace = .outbox
        /// OpenClaw: the session it was sent in, as chosen then; nil for ``Settings/sessionKey``.
        var session: String?

        var messageID: MessageID { MessageID(id) }
    }

    /// A reply being streamed.
    struct OpenStream: Sendable, Equatable {
        /// The server sequence of its first chunk: a restarted protod resumes before it.
        var firstSequence: Int
        var inReplyTo: MessageID?
        var attribution: ReplyAttribution?
        /// When it last grew.
        var grewAt: Date
        /// When it was last published, and its length then (UTF-8 bytes).
        var publishedAt: Date?
        var publishedLength = 0
        /// Its length when it was last published whole (0: not yet): it goes whole again once doubled.
        var wholeLength = 0
        /// Its growth since then is waiting for the interval to end.
        var publicationDue = false
    }

    /// The open connection, as protod knows it.
    struct Connection: Sendable, Equatable {
        var epoch: Int
        var id: String
        /// The `session.resume` frame was written on it, at this time (nil: not yet).
        var resumeAskedAt: Date?
        /// A probe under way: its deadline.
        var probeDeadline: Date?
        /// When the gateway was last heard from on it (any frame): a connection heard from
        /// within `probeAfter` is alive, and is not probed.
        var heardAt: Date
        /// The gateway was heard from on it at least once.
        var verified = false
        /// A new connection was asked for; nothing more is decided about this one.
        var replacing = false
        /// The dialect spoken on it, with that dialect's state of the connection.
        var dialect: ConnectionDialect = .seed
    }

    enum ConnectionDialect: Sendable, Equatable {
        case seed
        case openClaw(OpenClawLink)
    }
}

/// What a gateway does with `session.resume` (a Tether addition to the seeds' JSON).
public enum ResumeSupport: Sendable, Equatable {
    /// Not known yet: what may have been lost is not written again until it is.
    case unknown
    /// It answers: it replays what was missed and drops repeated message ids.
    case resumes
    /// It does not: a gateway of the seeds' JSON alone, or OpenClaw (which history lookups serve instead).
    case replaysNothing
}
