import TetherBus
import TetherSchema
public import TetherService

/// What `tether send` says of an outcome: the reply, for standard output; its own lines, for
/// standard error; and the exit code. Every word is true of what happened: a message that may
/// have reached the gateway is never said to have failed.
public struct SendReport: Sendable, Equatable {
    /// The reply as far as it came, when one is printed.
    public var reply: String?
    /// `tether send`'s own lines, in order.
    public var notes: [String]
    public var exitCode: TetherExitCode

    public init(reply: String?, notes: [String], exitCode: TetherExitCode) {
        self.reply = reply
        self.notes = notes
        self.exitCode = exitCode
    }

    /// - Parameter timeout: the seconds `tether send` waited, as the person gave them.
    public init(_ outcome: SendOutcome, timeout: Double) {
        exitCode = outcome.exitCode
        notes = []
        switch outcome {
        case .replied(let entry):
            reply = entry.content
            notes += Self.attribution(entry.attribution)
        case .deliveredWithoutReply(let partial):
            reply = partial?.text
            notes += Self.attribution(partial?.attribution)
            notes.append("delivered, but no whole reply within \(timeout) s" + (partial == nil ? "" : " (printed as far as it came)"))
        case .replyIncomplete(let entry):
            reply = entry.content
            notes += Self.attribution(entry.attribution)
            notes.append("delivered, but the reply is incomplete: \(entry.detail ?? "it was cut off")")
        case .replyUnclaimed(let why):
            notes.append("delivered, but no reply is printed: \(why) (tether watch shows the conversation)")
        case .notDelivered(let status, let detail):
            switch status {
            case .sent:
                notes.append(
                    "not acknowledged within \(timeout) s: the message was sent and may have reached the gateway; Tether keeps waiting for its acknowledgement"
                )
            case .accepted:
                notes.append("not delivered within \(timeout) s: " + (detail ?? "accepted, waiting in the gateway's queue"))
            default:
                notes.append(
                    "not delivered within \(timeout) s: the message is queued"
                        + (detail.map { ", \($0)" } ?? "; it is sent once Tether is connected to the gateway (tether status says why it is not)"))
            }
        case .unconfirmed(let lastHeard):
            notes.append(
                "not confirmed within \(timeout) s, and tether-protod did not answer when asked: the message is in the outbox "
                    + (lastHeard == .sent ? "and was sent (it may have reached the gateway)" : "(queued when last heard; it may have been sent since)"))
        case .unanswered:
            notes.append("not confirmed within \(timeout) s: " + Conversation.unansweredSend)
        case .failed(let reason):
            notes.append("not delivered: \(reason)")
        case .lost(let words):
            notes.append("lost with a damaged outbox: \(words)")
        case .refused(let reason):
            notes.append("refused, nothing was queued: \(reason)")
        case .steered(let entry, let words):
            reply = entry?.content
            notes.append(words)
        }
    }

    /// What a command says when the set cannot be reached (no bus, no answer from it, a key
    /// refused): exit 4, with the bus's words; nil for any other error.
    public init?(unreachable error: any Error) {
        guard let error = error as? BusError, error.isUnreachable else { return nil }
        self.init(reply: nil, notes: ["\(error)"], exitCode: .notRunning)
    }

    /// Says when a reply was matched to the message by order or by the gateway's history, not
    /// named by the gateway.
    static func attribution(_ attribution: ReplyAttribution?) -> [String] {
        switch attribution {
        case .order?: ["this reply was matched to your message by order: the gateway does not say which message it answers"]
        case .history?: ["this reply was matched to your message by the gateway's history (the reply that follows it there), not by its run"]
        case .gateway?, nil: []
        }
    }
}
