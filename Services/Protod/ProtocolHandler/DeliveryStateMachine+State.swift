import Foundation
import OpenClawWire
import TetherSchema
import TetherService
import TetherWire

/// What the machine keeps of each message, reply and connection.
extension DeliveryStateMachine {
    /// A message not yet settled by the gateway, as the machine tracks it: what it is, and
    /// where its delivery stands.
    struct Pending: Sendable, Equatable {
        var id: String
        var sequence: Int
        var content: String
        var createdAt: Date
        var strategy: DeliveryStrategy
        var kind: String?
        var retry: RetryPolicy
        /// OpenClaw: the session it was sent in, as chosen then; nil for ``Settings/sessionKey``.
        var session: String?
        var delivery: Delivery
        /// Images sent with it (OpenClaw's `chat.send` carries them every time it is written).
        var attachments: [Attachment] = []
        /// Put back to be written again while its images are only in the outbox: it waits
        /// until they are read back (``Event/imagesRead(id:_:)``).
        var imagesToRead = false
        /// OpenClaw: what it does if a reply is in progress when it goes out.
        var whileBusy: WhileBusy?
        /// OpenClaw: it was written into the reply in progress (`queueMode`), which it joins or stops.
        var wroteWhileBusy: WhileBusy?
        /// OpenClaw, steered: the message whose reply was in progress when it was written.
        var steeringInto: MessageID?
        /// OpenClaw, steered: the gateway admitted it; its session's row says where it went.
        var awaitsSteerVerdict = false

        var messageID: MessageID { MessageID(id) }
        /// About how many bytes its frame is on the wire, images in base64 included.
        var frameBytes: Int { content.utf8.count + attachments.reduce(0) { $0 + $1.content.utf8.count } }
        /// Written to the gateway at least once: it may have reached it.
        var everWritten: Bool { delivery.attempts != nil }
        /// When it was first written (the gateway cannot have it from before), else when it was made.
        var firstWrittenAt: Date { delivery.attempts?.firstAt ?? createdAt }
    }

    /// Where a message's delivery stands. `written`, `uncertain` and `held` are on the open
    /// connection; when it ends, they become `unconfirmed`. (Only a restarted protod's
    /// `uncertain` messages wait for a connection: the first one keeps them uncertain when it
    /// is the one they were written on, and makes them `unconfirmed` otherwise.)
    ///
    /// ```
    /// queued ─────────────── written ──────────────────────────► written
    /// written ────────────── the gateway answers for it (OpenClaw) ► held
    /// written, held ──────── the bus path to connd drops ────────► uncertain
    /// uncertain ──────────── the gateway drops repeats, or OpenClaw ► unconfirmed
    /// uncertain ──────────── a gateway that does not: the connection is replaced
    /// written, uncertain, held ─ the connection ends ────────────► unconfirmed
    /// unconfirmed ────────── written again ──────────────────────► written
    /// unconfirmed ────────── the history shows the gateway holds it ► held
    /// ```
    /// An acknowledgement, a run, the history, a refusal, a cancel or the expiry of a message
    /// never written settles it: it leaves the machine with its final status.
    enum Delivery: Sendable, Equatable {
        /// Never written: it counts against the queue limit and may expire. `toldWaiting`: its
        /// sender was told it waits for the reply in progress.
        case queued(toldWaiting: Bool)
        /// Written on the open connection; the gateway has not answered for it yet.
        case written(Written, Attempts)
        /// Written on the open connection `on`, but the frame may never have reached the
        /// gateway: a protod that died wrote it, or the bus path to connd dropped after. What
        /// the gateway had answered for it (OpenClaw) is kept.
        case uncertain(on: String, hold: GatewayHold?, Attempts)
        /// OpenClaw: the gateway answered for it on the open connection and has not shown it
        /// stored yet (a run, or its turn in the history).
        case held(GatewayHold, Attempts)
        /// Written on a connection that ended, or found possibly lost: confirmed by what the
        /// next connection shows (an acknowledgement, the history), or written again.
        case unconfirmed(hold: GatewayHold?, Attempts)

        /// What every message written at least once carries; nil for one never written.
        var attempts: Attempts? {
            switch self {
            case .queued: nil
            case .written(_, let attempts), .uncertain(_, _, let attempts), .held(_, let attempts), .unconfirmed(_, let attempts): attempts
            }
        }

        /// What the gateway answered for the message (OpenClaw), if it did and has not shown it stored.
        var hold: GatewayHold? {
            switch self {
            case .queued, .written: nil
            case .uncertain(_, let hold, _), .unconfirmed(let hold, _): hold
            case .held(let hold, _): hold
            }
        }

        /// The same delivery, with the gateway's answer for the message replaced: a message
        /// written and answered for is held.
        func holding(_ hold: GatewayHold, now: Date) -> Delivery {
            switch self {
            case .queued: .held(hold, Attempts(firstAt: now))
            case .written(_, let attempts), .held(_, let attempts): .held(hold, attempts)
            case .uncertain(let on, _, let attempts): .uncertain(on: on, hold: hold, attempts)
            case .unconfirmed(_, let attempts): .unconfirmed(hold: hold, attempts)
            }
        }

        /// Whether it is written now: never written, or unconfirmed (the gateway may or may not
        /// have it, and a repeat with the same id is what the dialect allows).
        var isDueForWrite: Bool {
            switch self {
            case .queued, .unconfirmed: true
            case .written, .uncertain, .held: false
            }
        }

        /// Written on the open connection, with a frame that may be lost.
        var isUncertain: Bool {
            if case .uncertain = self { true } else { false }
        }

        /// The same delivery once what the gateway has of it is unknown: the connection it was
        /// written on ended, or its frame may be lost and the gateway drops repeats.
        var unconfirmed: Delivery {
            switch self {
            case .queued, .unconfirmed: self
            case .written(_, let attempts): .unconfirmed(hold: nil, attempts)
            case .uncertain(_, let hold, let attempts): .unconfirmed(hold: hold, attempts)
            case .held(let hold, let attempts): .unconfirmed(hold: hold, attempts)
            }
        }
    }

    /// What a message written on the open connection waits for there.
    struct Written: Sendable, Equatable {
        /// When the missing acknowledgement makes the connection a question: it is probed then.
        var acknowledgementDue: Date
        /// When the acknowledgement is late by the message's retry policy, counted against
        /// health once per message; nil once counted.
        var lateAt: Date?
    }

    /// What a message written at least once carries from write to write.
    struct Attempts: Sendable, Equatable {
        /// When it was first written: the gateway cannot have it from before.
        var firstAt: Date
        /// A late acknowledgement was counted against health: it is not counted again.
        var countedLate = false
        /// Its sender was told it waits for the reply in progress: it is not told again.
        var toldWaiting = false
    }

    /// What the gateway answered for a message (OpenClaw) that it has not shown stored. The
    /// gateway stores a message when its turn starts; until then it may hold it in memory only.
    enum GatewayHold: Sendable, Equatable {
        /// The gateway answered `started` or `in_flight`; no sign of its run yet (a delta, an
        /// `agent` event, a final with text), which is what says it was stored.
        case accepted(at: Date)
        /// The gateway answered `started` and then ended the run with an empty `final`: it holds
        /// the message in the busy session's queue, in memory, to run later as a follow-up turn
        /// under a run id of its own. The history says when it ran, or that the queue's cap
        /// dropped it; a gateway that restarted since lost it.
        case inGatewayQueue(since: Date)
        /// Accepted or in the gateway's queue, and the session has been quiet for the reply
        /// stall deadline since: it no longer holds later messages back; the history still decides.
        case quiet(since: Date, queued: Bool)

        /// The gateway said it holds the message in its queue.
        var isInGatewayQueue: Bool {
            switch self {
            case .inGatewayQueue, .quiet(_, queued: true): true
            case .accepted, .quiet: false
            }
        }

        /// When the gateway answered for the message.
        var answeredAt: Date {
            switch self {
            case .accepted(let at), .inGatewayQueue(let at), .quiet(let at, _): at
            }
        }
    }

    /// The bot as `bot.state` last said it.
    struct BotPresence: Sendable, Equatable {
        var name = "Bot"
        var state = BotState.idle
        /// What was said with its state (a model failure, why a reply is incomplete).
        var detail: String?
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
        /// For a reply a protod before this one was receiving: what tether-snapd kept of it,
        /// the reply as far as it came, should its chunks not come again.
        var kept: String?
        /// Taken up from the protod before this one, and no chunk of it heard since.
        var restored = false
    }

    /// The open connection, as protod knows it.
    struct Connection: Sendable, Equatable {
        var epoch: Int
        var id: String
        var phase: Phase
        /// When the gateway was last heard from on it (any frame): a connection heard from
        /// within `probeAfter` is alive, and is not probed.
        var heard: Heard
        /// The dialect spoken on it, with that dialect's state of the connection: what it
        /// asked first (`session.resume`, a history lookup) and has not had answered.
        var dialect: ConnectionDialect

        init(epoch: Int, id: String, openedAt: Date, dialect: ConnectionDialect) {
            self.epoch = epoch
            self.id = id
            self.phase = .live
            self.heard = .notYet(openedAt: openedAt)
            self.dialect = dialect
        }

        /// The deadline of the probe under way, if one is.
        var probeDeadline: Date? {
            if case .probing(let deadline) = phase { deadline } else { nil }
        }

        var isReplacing: Bool { phase == .replacing }

        /// The gateway was heard from on it: whatever it was asked, it is alive.
        mutating func heard(at now: Date) {
            heard = .at(now)
            if case .probing = phase { phase = .live }
        }
    }

    /// What protod is doing with the open connection.
    enum Phase: Sendable, Equatable {
        /// Frames go out on it as they are due.
        case live
        /// A probe (`system.ping`, or OpenClaw's `health`) was written: the gateway must answer
        /// something by `deadline`, or the connection is replaced.
        case probing(deadline: Date)
        /// A new connection was asked for: nothing more is decided about this one.
        case replacing
    }

    /// Whether the gateway was heard from on a connection.
    enum Heard: Sendable, Equatable {
        /// Not since the connection opened: it has not shown it is alive.
        case notYet(openedAt: Date)
        case at(Date)

        /// When the gateway was last heard, or the connection opened.
        var lastAt: Date {
            switch self {
            case .notYet(let openedAt): openedAt
            case .at(let at): at
            }
        }

        var verified: Bool {
            if case .at = self { true } else { false }
        }
    }

    enum ConnectionDialect: Sendable, Equatable {
        case seed(SeedLink)
        case openClaw(OpenClawLink)
    }

    /// A seed-dialect connection as protod knows it: its `session.resume` request.
    struct SeedLink: Sendable, Equatable {
        var resume: ResumeRequest?
    }

    /// The `session.resume` a seed-dialect connection asks first, and again after frames may
    /// have been lost in the bus.
    enum ResumeRequest: Sendable, Equatable {
        /// To be written once frames reach connd: resume after this server sequence.
        case due(after: Int)
        /// Written at this time, not answered yet.
        case asked(at: Date)
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
