import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

extension DeliveryStateMachine {
    // MARK: Catching up (today's OpenClaw)

    /// The lookup after a reconnect, missed frames or another client's turn: what came after
    /// the cursor where today's gateway gave one, else the last entries. A cursor is sent only
    /// to a gateway that answers receipts, so that whatever the catch-up does not show is asked
    /// by key and never concluded from its absence.
    mutating func recoveryLookup(_ link: inout OpenClawLink, now: Date) -> Data {
        let cursor = receipts.support == .offered ? catchUp.cursor(for: link.sessionKey) : nil
        return link.historyRequest(limit: settings.historyLimit, now: now, asking: keysInDoubt(link), cursor: cursor)
    }

    /// Renews the cursor of the session chatted in once runs ended since it and the session
    /// is quiet (or many ran): a reconnect later then fetches only what it missed.
    mutating func renewCursorIfDue(now: Date, into actions: inout [Action]) {
        guard var open = connection, case .openClaw(var link) = open.dialect, link.recovered, link.history == nil else { return }
        guard catchUp.isDueForRenewal(link.sessionKey, idle: isQuiet(link), now: now) else { return }
        catchUp.renewalAsked(link.sessionKey)
        write(link.cursorRenewalRequest(now: now), on: open.epoch, into: &actions)
        open.dialect = .openClaw(link)
        connection = open
    }

    /// No run is under way in the session chatted in, Tether's or another's.
    func isQuiet(_ link: OpenClawLink) -> Bool {
        !runs.values.contains { $0.session == link.sessionKey } && otherRuns.isEmpty
    }

    /// What a history answer is before anything is merged: a cursor renewal only renews; a
    /// catch-up the gateway could not give (`reset`), or one that cannot show a message was
    /// kept before its cursor, is followed by a page. True when the answer is dealt with.
    mutating func caughtUp(
        _ result: ChatHistoryResult?, error: GatewayErrorShape?, lookup: OpenClawLink.HistoryLookup, link: inout OpenClawLink, epoch: Int, now: Date,
        into actions: inout [Action]
    ) -> Bool {
        if let result { catchUp.learn(from: result, session: link.sessionKey, wasCatchUp: lookup.cursor != nil) }
        if lookup.renewal {
            if link.lookupAgain {
                link.lookupAgain = false
                write(recoveryLookup(&link, now: now), on: epoch, into: &actions)
            }
            return true
        }
        guard lookup.cursor != nil else { return false }
        let why: String
        if let result, result.isReset {
            why = "the gateway could not give what came after the cursor (reset: over 200 events or 1 MB, or its transcript rewritten since)"
        } else if result == nil {
            catchUp.forget(link.sessionKey)
            why = "the gateway refused the cursor (\(error.map { "\($0.code) \($0.message)" } ?? "unreadable answer"))"
        } else if let result, ReceiptCheck.read(result, asked: lookup.asked)?.verdicts.values.contains(.absent) == true {
            // No receipt and no turn in the gap: its turn may be before the cursor, which a page shows.
            why = "a message asked has no receipt, and its turn may be before the cursor"
        } else {
            return false
        }
        actions.append(.diagnose(DiagnosticEvent(kind: .historyChecked, detail: "\(why): the last \(settings.historyLimit) entries are fetched instead")))
        write(link.historyRequest(limit: settings.historyLimit, now: now, asking: keysInDoubt(link)), on: epoch, into: &actions)
        return true
    }
}
