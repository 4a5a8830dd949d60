import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

extension DeliveryStateMachine {
    // MARK: History

    /// A history answer: Tether's messages the gateway has are delivered, the others are
    /// written again (same idempotency key); entries Tether lacks are published; replies found
    /// whole close their runs; runs the gateway lost in a restart are incomplete.
    mutating func historyAnswered(_ result: ChatHistoryResult?, error: GatewayErrorShape?, now: Date, into actions: inout [Action]) {
        guard var open = connection, case .openClaw(var link) = open.dialect, let lookup = link.history else { return }
        link.history = nil
        // Follow-up replies held for this answer go after what it publishes.
        defer { for reply in followUps.releaseHeld() { actions.append(.publishEntry(reply)) } }
        if caughtUp(result, error: error, lookup: lookup, link: &link, epoch: open.epoch, now: now, into: &actions) {
            open.dialect = .openClaw(link)
            connection = open
            return
        }
        guard let result else {
            // Without history nothing can be confirmed: what is unknown is written again with
            // its key, which a gateway that still remembers the key drops.
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .deliveryFailed, willRetry: true,
                        detail:
                            "chat.history failed (\(error.map { "\($0.code) \($0.message)" } ?? "unreadable answer")): unconfirmed messages are sent again with their idempotency key"
                    )))
            link.recovered = true
            open.dialect = .openClaw(link)
            connection = open
            return
        }
        receipts.learn(from: result)
        // A gateway that showed it keeps receipts is asked them before anything is decided by texts.
        if lookup.asked.isEmpty, let keys = keysInDoubt(link) {
            write(link.historyRequest(limit: lookup.limit, now: now, asking: keys, cursor: lookup.cursor), on: open.epoch, into: &actions)
            open.dialect = .openClaw(link)
            connection = open
            return
        }
        var decided: Set<String> = []
        if !lookup.asked.isEmpty {
            if let reading = ReceiptCheck.read(result, asked: lookup.asked) {
                decided = applyReceipts(reading, now: now, into: &actions)
            } else {
                actions.append(
                    .diagnose(
                        DiagnosticEvent(
                            kind: .historyChecked,
                            detail:
                                "the gateway answered no receipts for the \(lookup.asked.count) key(s) asked, though it showed it keeps them: its history's texts decide instead"
                        )))
            }
        }
        let known = transcript.entries
        let publishedIDs = transcript.publishedGatewayIDs
        let details = transcript.details
        let awaited = Set(pending.map(\.messageID))
        let merge = HistoryMerge.merge(
            // A catch-up is the whole of what came after its cursor: it is cut at no limit.
            result.messages, limit: result.isDelta ? .max : lookup.limit,
            context: HistoryMerge.Context(
                // Only this session's: the same text sent in another is not in this history.
                sent: transcript.sent.filter { sent in (sent.session.map { $0 == link.sessionKey } ?? true) && !pending.contains { $0.messageID == sent.id } }
                    + pending.filter { $0.everWritten && sessionOf($0) == link.sessionKey }.map {
                        HistoryMerge.Sent(id: $0.messageID, text: $0.content, createdAt: $0.firstWrittenAt, attachments: $0.attachments)
                    },
                clockOffset: link.clockOffset, botName: bot.name, ownLabel: OpenClawProtocol.ownSenderLabel, known: { known[$0] },
                published: { publishedIDs[$0] }, detail: { details[$0] }, followUpOwner: { [followUps] in followUps.owner(of: $0) }))
        // A message the window may not reach is looked up in a larger one, once.
        let unsure = pending.filter { message in
            !decided.contains(message.id) && message.everWritten && sessionOf(message) == link.sessionKey && !merge.found.contains(message.messageID)
                && merge.windowStart.map { message.firstWrittenAt < $0 } == true
        }
        if !unsure.isEmpty, lookup.limit < 1000, !link.widened {
            link.widened = true
            write(link.historyRequest(limit: 1000, now: now, asking: keysInDoubt(link)), on: open.epoch, into: &actions)
            open.dialect = .openClaw(link)
            connection = open
            return
        }
        // Messages the gateway answered for and has not stored yet: still with it unless it
        // restarted since (its queue is in memory); named in an overflow summary, dropped.
        let dropped = HistoryMerge.droppedAtCap(result.messages)
        var held: [MessageID] = []
        for index in pending.indices {
            guard !decided.contains(pending[index].id), let hold = pending[index].delivery.hold, let attempts = pending[index].delivery.attempts else {
                continue
            }
            let id = pending[index].messageID
            if merge.found.contains(id) {
                held.append(id)
            } else if hold.isInGatewayQueue, dropped.contains(pending[index].content) {
                continue  // settled below
            } else if let started = link.gatewayStartedAt, started > hold.answeredAt {
                // Lost with the gateway's memory: written again (its key is forgotten too).
                pending[index].delivery = .unconfirmed(hold: nil, attempts)
            } else {
                // Still with the gateway, as this connection knows now.
                pending[index].delivery = .held(hold, attempts)
            }
        }
        let lostAtCap = pending.filter { (message: Pending) in
            !decided.contains(message.id) && message.delivery.hold?.isInGatewayQueue == true && !merge.found.contains(message.messageID)
                && dropped.contains(message.content)
        }
        settle(lostAtCap.map(\.id), as: .failed, into: &actions) { _ in
            "dropped by the gateway: its session was busy and its queue, which holds 20 messages, was full; the gateway names it only in a summary turn and never answers it"
        }
        let unknown = pending.filter { !decided.contains($0.id) && $0.everWritten && $0.delivery.isDueForWrite }.map(\.messageID)
        let confirmed = unknown.filter { merge.found.contains($0) }
        let byKey = confirmed.filter { merge.foundByKey.contains($0) }.count
        receipts.count(byReceipt: byKey, byText: confirmed.count - byKey)
        for id in confirmed + held {
            acknowledged(MessageAck(messageID: id, status: .received, serverTimestamp: now), now: now, into: &actions)
        }
        if !unknown.isEmpty {
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .historyChecked, count: confirmed.count,
                        detail:
                            "\(confirmed.count) of \(unknown.count) unacknowledged messages are in the gateway's history; \(unknown.count - confirmed.count) are written again with their idempotency key"
                    )))
        }
        for entry in merge.entries { actions.append(.publishEntry(entry)) }
        // Messages whose turn is over with a reply that cannot be attached to them for certain:
        // their senders are told, and the reply is in the conversation without a claim.
        let answered = Set(runs.values.compactMap(\.inReplyTo)).union(awaited)
        for (owner, reply) in merge.unclaimed.sorted(by: { $0.key.value < $1.key.value }) where answered.contains(owner) {
            actions.append(
                .publishDelivery(
                    DeliveryUpdate(
                        id: owner, status: .delivered,
                        detail:
                            "a reply followed it in the gateway's history, but the gateway does not say which message that reply answers, and it cannot be told for certain: it is shown without a claim",
                        unclaimedReply: reply)))
        }
        // Runs: whole in history, or lost with a gateway that restarted since they began; the
        // others go on, and the reply stall counts from now.
        for (runID, run) in runs {
            if let owner = run.inReplyTo, merge.replies[owner] != nil {
                runs[runID] = nil
            } else if let owner = run.inReplyTo, merge.unclaimed[owner] != nil {
                runs[runID] = nil
            } else if let started = link.gatewayStartedAt, run.startedAt < started {
                // A session's first message is stored only with its first reply: a gateway that
                // restarted before that has neither it nor its key. Written again, same key.
                // (Today's gateway stores every input before it answers: never so there.)
                if receipts.support != .offered, let owner = run.inReplyTo, !merge.found.contains(owner),
                    let sent = transcript.sent.last(where: { $0.id == owner }),
                    sent.session.map({ $0 == link.sessionKey }) ?? true, merge.windowStart.map({ $0 <= sent.createdAt }) ?? true,
                    // Written again only when no entry of the window can be it: a copy is worse than a wait.
                    !result.messages.contains(where: { entry in
                        entry.role == "user" && OpenClawProtocol.rewriteParts(of: entry.text).contains { HistoryMerge.same($0, sent.text) }
                    })
                {
                    runs[runID] = nil
                    requeue(sent, into: &actions)
                } else {
                    end(runID, as: .incomplete, why: "the gateway restarted during the reply: it will not be finished", now: now, into: &actions)
                }
            } else {
                runs[runID]?.heardAt = now
            }
        }
        settleBotState(now: now, into: &actions)
        // More in doubt than one request asks: the rest are asked before anything is written.
        if let last = lookup.asked.last, lookup.asked.count == ChatHistoryParams.maximumInputRunIds, let rest = keysInDoubt(link, after: last) {
            let cursor = lookup.cursor.flatMap { _ in catchUp.cursor(for: link.sessionKey) }
            write(link.historyRequest(limit: lookup.limit, now: now, asking: rest, cursor: cursor), on: open.epoch, into: &actions)
            open.dialect = .openClaw(link)
            connection = open
            return
        }
        link.recovered = true
        // A catch-up's gap may be empty in a session with entries before its cursor.
        link.sessionIsNew = !result.isDelta && result.messages.isEmpty
        if link.lookupAgain {
            link.lookupAgain = false
            write(recoveryLookup(&link, now: now), on: open.epoch, into: &actions)
        }
        open.dialect = .openClaw(link)
        connection = open
    }

    /// Puts a message the gateway lost back at the head of the outbox, to be written again
    /// with its key: its sender goes on waiting for its reply.
    mutating func requeue(_ sent: HistoryMerge.Sent, into actions: inout [Action]) {
        let first = (pending.map(\.sequence).min() ?? 1) - 1
        // Written before (the gateway lost it): it does not expire as a message never sent.
        pending.insert(
            Pending(
                id: sent.id.value, sequence: first, content: sent.text, createdAt: sent.createdAt, strategy: .queued, kind: nil, retry: .default,
                session: sent.session, delivery: .unconfirmed(hold: nil, Attempts(firstAt: sent.createdAt)), attachments: sent.attachments,
                imagesToRead: sent.attachments.count < sent.imageCount),
            at: 0)
        actions.append(.persistRequeued(id: sent.id.value))
        actions.append(
            .diagnose(
                DiagnosticEvent(
                    kind: .historyChecked, messageID: sent.id,
                    detail:
                        "the gateway restarted before it stored this message (a session's first message is stored with its first reply): written again with its key"
                )))
    }
}

extension TranscriptEntry {
    /// A message this Tether sent, not one read from the gateway's transcript (another
    /// client's, or from before this Tether's time).
    var isTethers: Bool { sender == .user && author == nil && gatewayID == nil && !id.value.hasPrefix("oc:") }
}
