import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

// MARK: Sessions

extension DeliveryStateMachine {
    /// `key` as the gateway names it (`side` → `agent:main:side`), by the latest connection's
    /// main session key.
    func canonical(_ key: String?) -> String {
        OpenClawProtocol.canonicalSessionKey(key, mainSessionKey: mainSessionKey)
    }

    /// Whether the gateway may speak OpenClaw: the open connection does, or, with none open,
    /// the last one did or none was seen since protod started.
    var mayBeOpenClaw: Bool {
        connection == nil ? lastSession?.dialect != .seed : dialect == .openclaw
    }

    /// Whether the open connection speaks OpenClaw, or the last one did when none is open.
    var speaksOpenClaw: Bool {
        connection == nil ? lastSession?.dialect == .openclaw : dialect == .openclaw
    }

    /// The session a message goes to.
    func sessionOf(_ message: Pending) -> String {
        canonical(message.session ?? settings.sessionKey)
    }

    /// The session to chat in, as it was asked for: that of a reply of Tether's still coming,
    /// else of the oldest message written and unanswered (it may be in the gateway), else of
    /// the oldest waiting, else the one chosen.
    var dueSessionRequest: String? {
        if let replying = runs.values.first(where: { $0.inReplyTo != nil && $0.session != nil })?.session { return replying }
        guard let first = pending.first(where: \.everWritten) ?? pending.first else { return chosenSession }
        return first.session ?? settings.sessionKey
    }

    /// Whether a reply of Tether's is still coming in `session`.
    func isReplying(in session: String) -> Bool {
        runs.values.contains { $0.inReplyTo != nil && ($0.session ?? session) == session }
    }

    /// Whether a message of Tether's was written in `session` and is not settled, or a reply
    /// to one is still coming: its events and history are that session's.
    func hasUnanswered(in session: String) -> Bool {
        isReplying(in: session) || pending.contains { $0.everWritten && sessionOf($0) == session }
    }

    /// The conversation as `conv.session` says it: the session chosen and, while Tether still
    /// chats in another for messages sent before the choice, that one with how many wait there.
    var conversation: ConversationSession? {
        let dialect: WireDialect
        switch connection?.dialect {
        case .seed?: return ConversationSession(dialect: .seed, sessionKey: nil)
        case .openClaw?: dialect = .openclaw
        case nil:
            // Not connected: what the last connection showed, with the choice made since.
            guard let last = lastSession, last.dialect == .openclaw else { return lastSession }
            dialect = last.dialect
        }
        let chosen = canonical(chosenSession)
        let finishing: String? =
            if case .openClaw(let link)? = connection?.dialect, link.sessionKey != chosen {
                link.sessionKey
            } else {
                pending.lazy.map(sessionOf).first { $0 != chosen }
            }
        // A message still pending while its reply comes is one message, not two.
        let waiting =
            finishing.map { key in
                pending.count { sessionOf($0) == key }
                    + runs.values.count { run in
                        run.inReplyTo.map { id in !pending.contains { $0.messageID == id } } == true && (run.session ?? key) == key
                    }
            } ?? 0
        return ConversationSession(
            dialect: dialect, sessionKey: chosen, requested: chosenSession.flatMap { $0 == chosen ? nil : $0 },
            finishing: waiting > 0 ? finishing : nil, finishingMessages: waiting > 0 ? waiting : nil)
    }

    /// Entries and replies of an OpenClaw conversation name the session they belong to: the
    /// one chatted in (an own message names its own when it is accepted).
    func nameSessions(in actions: inout [Action]) {
        guard let session = chattingIn, speaksOpenClaw else { return }
        for index in actions.indices {
            switch actions[index] {
            case .publishEntry(var entry) where entry.session == nil:
                entry.session = session
                actions[index] = .publishEntry(entry)
            case .publishStream(var progress) where progress.session == nil:
                progress.session = session
                actions[index] = .publishStream(progress)
            default: break
            }
        }
    }
}
