import Foundation
import OpenClawWire
import TetherSchema
import TetherWire

extension DeliveryStateMachine {
    // MARK: Replies

    mutating func chat(_ event: ChatEventPayload, now: Date, into actions: inout [Action]) {
        guard case .openClaw(let link)? = connection?.dialect else { return }
        // Another session's events are not this conversation's.
        if let key = event.sessionKey, !link.names(key) { return }
        heardInSession(now: now)
        if event.state != .delta && event.state != .status { catchUp.runEnded(in: link.sessionKey, now: now) }
        // A run is Tether's when its id is a message Tether sent: open, pending, or in the transcript.
        // The gateway's turn after an approval answers the message whose run asked for it.
        let followUp = ApprovalFollowUps.approval(ofRun: event.runId)
        let ours =
            followUp != nil || runs[event.runId] != nil || pending.contains { $0.id == event.runId } || transcript.entries[MessageID(event.runId)] != nil
        guard ours else {
            // A run another client started (or the gateway's follow-up turn): Tether's messages
            // wait while it goes on; its messages come from the history, once it ended.
            if event.state == .delta {
                otherRuns[event.runId] = now
            } else {
                otherRuns[event.runId] = nil
                lookUpHistory(now: now, into: &actions)
            }
            return
        }
        let message =
            followUp.map { followUps.owner(forFollowUpOf: $0, now: now, window: settings.replyStallDeadline) } ?? MessageID(event.runId)
        if followUp != nil {
            otherRuns[event.runId] = nil
            // The gateway's prompt, written as its turn starts, is in the history only: read
            // now, it is shown before the reply it prompts.
            if runs[event.runId] == nil { lookUpHistory(now: now, into: &actions) }
        }
        var run =
            runs[event.runId]
            ?? OpenClawRun(inReplyTo: message, startedAt: now, grewAt: now, heardAt: now, session: chattingIn, followUpOf: followUp)
        if event.state == .final, event.message == nil, run.text.isEmpty, let message, followUps.asked(by: message) || run.calledExec {
            // The run asked for an approval and said nothing more: the gateway's turn after the
            // decision is its reply.
            return awaitFollowUp(of: message, run: event.runId, now: now, into: &actions)
        }
        if event.state == .final, event.message == nil, run.text.isEmpty, let index = pending.firstIndex(where: { $0.id == event.runId }) {
            // Not a reply: the gateway admitted it into the run in progress (steered), or,
            // the session being busy, keeps it in its queue.
            if pending[index].wroteWhileBusy == .steer { return steerAdmitted(index, now: now, into: &actions) }
            return heldByGateway(index, now: now, into: &actions)
        }
        // A run shows the gateway stored the message, as good as its acknowledgement; but in a
        // new session only its end does.
        if let message, pending.contains(where: { $0.id == event.runId }) {
            if event.state == .delta || event.state == .status {
                acknowledgedByRun(event.runId, now: now, into: &actions)
            } else {
                acknowledged(MessageAck(messageID: message, status: .received, serverTimestamp: now), now: now, into: &actions)
            }
        }
        if event.state != .delta && event.state != .status { endedInSession() }
        run.heardAt = now
        run.failure = nil
        guard let replyID = run.replyID else { return }
        switch event.state {
        case .delta:
            let before = run.text
            if link.protocolVersion >= 4, let increment = event.deltaText {
                if event.replace == true {
                    run.text = increment
                    run.synced = true
                } else if run.synced {
                    run.text += increment
                } else if let whole = event.message?.text {
                    run.text = whole
                    run.synced = true
                }
            } else if let whole = event.message?.text, whole.count >= run.text.count || !run.synced {
                run.text = whole
                run.synced = true
            }
            guard run.text != before else {
                runs[event.runId] = run
                return
            }
            run.grewAt = now
            runs[event.runId] = run
            if transcript.entries[replyID]?.status == .received { return }
            setBotState(.typing, now: now, into: &actions)
            let due = (run.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval)
            if due <= now { publishRun(event.runId, isFinal: false, now: now, into: &actions) } else { runs[event.runId]?.publicationDue = true }
        case .final:
            run.text = event.message?.text ?? run.text
            runs[event.runId] = run
            guard !run.text.isEmpty else {
                // A run that ended with no text at all has no reply to show.
                let why = run.failure.map { "the model failed: \($0)" } ?? "the gateway ended the run with no reply"
                return end(event.runId, as: .incomplete, why: why, now: now, into: &actions)
            }
            publishRun(event.runId, isFinal: true, now: now, into: &actions)
            runs[event.runId] = nil
            // The tools' output (unless verbose is full) and the model's thinking are in the history only.
            if run.calledTools || followUp != nil { lookUpHistory(now: now, into: &actions) }
            let reply = TranscriptEntry(
                id: replyID, sender: .bot(name: bot.name), content: run.text, timestamp: now, status: .received, inReplyTo: message, attribution: .gateway)
            // A follow-up's reply waits for the history, so that the gateway's prompt comes first.
            if followUp != nil { followUps.hold(reply) } else { actions.append(.publishEntry(reply)) }
            settleBotState(now: now, into: &actions)
        case .status:
            // Where the run stands before its reply starts: said while the bot is thinking.
            runs[event.runId] = run
            guard run.text.isEmpty, let words = RunStatusWords.status(event) else { return }
            if event.retry != nil {
                actions.append(.diagnose(DiagnosticEvent(kind: .replyFailed, messageID: run.inReplyTo, willRetry: true, detail: "the gateway is \(words)")))
            }
            setBotState(.thinking, detail: words, now: now, into: &actions)
        case .aborted, .error:
            runs[event.runId] = run
            let why: String =
                if event.state == .error {
                    RunStatusWords.error(event)
                } else if event.stopReason == "interrupt" || pending.contains(where: { $0.wroteWhileBusy == .interrupt && $0.id != event.runId }) {
                    "the reply was stopped: a message sent to interrupt it is answered instead"
                } else {
                    switch event.stopReason {
                    case "rpc"?: "the reply was stopped (chat.abort)"
                    case "stop"?: "the reply was stopped (/stop)"
                    case "timeout"?: "the gateway gave up on the reply (timeout)"
                    default: "the reply was stopped (\(event.stopReason ?? "aborted"))"
                    }
                }
            end(event.runId, as: .incomplete, why: why, now: now, into: &actions)
        }
    }

    /// A run that asked for an approval ended with no words live: it shows the gateway kept the
    /// message. The model's words after the call are its reply, in the history only; with none,
    /// its reply is the gateway's turn once the approval is decided.
    mutating func awaitFollowUp(of message: MessageID, run runID: String, now: Date, into actions: inout [Action]) {
        runs[runID] = nil
        if pending.contains(where: { $0.id == runID }) {
            acknowledged(MessageAck(messageID: message, status: .received, serverTimestamp: now), now: now, into: &actions)
        }
        endedInSession()
        if !followUps.asked(by: message) { followUps.awaitUntied(message, at: now) }
        settleBotState(now: now, into: &actions)
        // The model's words after the call, if any, are in the history only (with the tool's result).
        lookUpHistory(now: now, into: &actions)
    }

    /// A run of a message under way: it shows the gateway keeps the message, but for a new
    /// session's first message, which the 2026.4 gateway writes to its transcript only with
    /// the reply: that one is accepted (said once), and delivered when its run ends.
    mutating func acknowledgedByRun(_ id: String, now: Date, into actions: inout [Action]) {
        guard var open = connection, case .openClaw(var link) = open.dialect, link.sessionIsNew else {
            return acknowledged(MessageAck(messageID: MessageID(id), status: .received, serverTimestamp: now), now: now, into: &actions)
        }
        guard let index = pending.firstIndex(where: { $0.id == id }), !link.saidAccepted.contains(id) else { return }
        link.saidAccepted.insert(id)
        open.dialect = .openClaw(link)
        connection = open
        if pending[index].delivery.hold == nil { pending[index].delivery = pending[index].delivery.holding(.accepted(at: now), now: now) }
        actions.append(
            .publishDelivery(
                DeliveryUpdate(
                    id: pending[index].messageID, status: .accepted,
                    detail: "accepted: the gateway is running it; a new session keeps its first message only once the reply ends")))
    }

    /// A run in the session ended: its transcript holds entries now.
    mutating func endedInSession() {
        guard var open = connection, case .openClaw(var link) = open.dialect, link.sessionIsNew else { return }
        link.sessionIsNew = false
        link.saidAccepted = []
        open.dialect = .openClaw(link)
        connection = open
    }

    /// Ends a run of Tether's as it came, in the transcript with the reason it ended there;
    /// the bot is idle once no run of Tether's is open.
    mutating func end(_ runID: String, as status: DeliveryStatus, why: String, now: Date, into actions: inout [Action]) {
        guard let run = runs.removeValue(forKey: runID) else { return }
        // Its calls still running get no result this run will report: they are said unfinished
        // (a result heard later still replaces that).
        for (callID, live) in liveToolCalls.filter({ $0.value.runID == runID }).sorted(by: { $0.value.startedAt < $1.value.startedAt }) {
            liveToolCalls[callID] = nil
            var call = live.call
            call.state = .unfinished
            actions.append(.publishEntry(Self.entry(of: call, at: live.startedAt, bot: bot.name)))
        }
        actions.append(
            .publishEntry(
                TranscriptEntry(
                    id: run.replyID ?? MessageID(runID), sender: .bot(name: bot.name), content: run.text, timestamp: now, status: status,
                    inReplyTo: run.inReplyTo, attribution: .gateway, detail: why)))
        settleBotState(now: now, into: &actions, detail: why)
    }

    /// An `agent` event: the run is alive; a lifecycle error is the model failing, said at once
    /// in the gateway's words while the gateway retries (it sends no `chat` event for it).
    mutating func agent(_ event: AgentEventPayload, now: Date, into actions: inout [Action]) {
        guard case .openClaw(let link)? = connection?.dialect else { return }
        if let key = event.sessionKey, !link.names(key) { return }
        heardInSession(now: now)
        if event.stream == "tool" { tool(event, now: now, into: &actions) }
        let phase = event.stream == "lifecycle" ? event.data?["phase"]?.stringValue : nil
        let isPending = pending.contains { $0.id == event.runId }
        guard runs[event.runId] != nil || isPending else {
            // Another client's run, or the gateway's follow-up turn: Tether's messages wait for it.
            if phase == "end" { otherRuns[event.runId] = nil } else if transcript.entries[MessageID(event.runId)] == nil { otherRuns[event.runId] = now }
            return
        }
        var run =
            runs[event.runId]
            ?? OpenClawRun(
                inReplyTo: MessageID(event.runId), startedAt: now, grewAt: now, heardAt: now,
                messageText: pending.first { $0.id == event.runId }?.content, session: chattingIn)
        // Its run shows the gateway stored the message (in a new session, only its end does).
        if isPending { acknowledgedByRun(event.runId, now: now, into: &actions) }
        run.heardAt = now
        if event.stream == "tool" { run.calledTools = true }
        if event.stream == "tool", event.data?["name"]?.stringValue == "exec" { run.calledExec = true }
        if phase == "error" {
            let error = event.data?["error"]?.stringValue ?? "no reason given"
            run.failure = error
            actions.append(
                .diagnose(
                    DiagnosticEvent(
                        kind: .replyFailed, messageID: run.inReplyTo, willRetry: true, detail: "the model failed: \(error); the gateway is retrying")))
            setBotState(.thinking, detail: "the model failed: \(error); the gateway is retrying", now: now, into: &actions)
        }
        runs[event.runId] = run
    }

    /// A tool call's event (sent to a connection that named the `tool-events` capability, for
    /// the runs it started; also for a run that ended, whose results may come after its final):
    /// its transcript entry, running from `start`, ok or error with `result`, with the time it
    /// took by the gateway's clock and its output when the gateway sent it (verbose `full`).
    /// An `update` changes nothing shown.
    mutating func tool(_ event: AgentEventPayload, now: Date, into actions: inout [Action]) {
        guard let data = event.data, let callID = data["toolCallId"]?.stringValue, !callID.isEmpty else { return }
        let name = data["name"]?.stringValue ?? "tool"
        switch data["phase"]?.stringValue {
        case "start"?:
            // A start heard again (the agent also reports a start without its arguments) changes nothing.
            guard liveToolCalls[callID] == nil else { return }
            let call = ToolCall(
                callID: callID, name: name, arguments: ToolCallText.arguments(data["args"], limit: ToolCall.argumentsLimit), state: .running)
            if liveToolCalls.count >= Self.liveToolCallLimit, let oldest = liveToolCalls.min(by: { $0.value.startedAt < $1.value.startedAt }) {
                liveToolCalls[oldest.key] = nil
            }
            liveToolCalls[callID] = LiveToolCall(call: call, runID: event.runId, startedAtMilliseconds: event.ts, startedAt: now)
            actions.append(.publishEntry(Self.entry(of: call, at: now, bot: bot.name)))
        case "result"?:
            let started = liveToolCalls.removeValue(forKey: callID)
            var call =
                started?.call
                ?? ToolCall(
                    callID: callID, name: name, arguments: data["meta"]?.stringValue.map { String($0.prefix(ToolCall.argumentsLimit)) } ?? "", state: .running)
            call.state = data["isError"]?.boolValue == true ? .error : .ok
            if let end = event.ts, let start = started?.startedAtMilliseconds, end >= start { call.durationMilliseconds = end - start }
            call.output = ToolCallText.output(data["result"]).map(ToolCall.kept)
            actions.append(.publishEntry(Self.entry(of: call, at: started?.startedAt ?? now, bot: bot.name)))
        default:
            return
        }
    }

    /// The transcript entry of a tool call.
    static func entry(of call: ToolCall, at time: Date, bot: String, thinking: String? = nil) -> TranscriptEntry {
        TranscriptEntry(
            id: ToolCall.entryID(of: call.callID), sender: .bot(name: bot), content: call.summary, timestamp: time, status: .received, tool: call,
            thinking: thinking)
    }

    private mutating func publishRun(_ runID: String, isFinal: Bool, now: Date, into actions: inout [Action]) {
        guard var run = runs[runID], let id = run.replyID else { return }
        let published = run.publishedText.utf8.count
        let length = run.text.utf8.count
        // A text that was replaced rather than extended (taken whole after a gap) goes whole.
        let extends = length >= published && run.text.utf8.starts(with: run.publishedText.utf8)
        guard isFinal || !extends || length != published else { return }
        let whole = !extends || run.wholeLength == 0 || length >= 2 * run.wholeLength
        actions.append(
            .publishStream(
                StreamProgress(
                    id: id, chunkIndex: run.updates, chunk: extends ? String(decoding: run.text.utf8.dropFirst(published), as: UTF8.self) : run.text,
                    offset: extends ? published : 0, content: whole ? run.text : nil, isFinal: isFinal, inReplyTo: run.inReplyTo, attribution: .gateway)))
        run.updates += 1
        run.publishedAt = now
        run.publishedText = run.text
        if whole { run.wholeLength = length }
        run.publicationDue = false
        runs[runID] = run
    }

    /// Publishes the growth of replies whose interval ended.
    mutating func publishDueRuns(now: Date, into actions: inout [Action]) {
        for (id, run) in runs where run.publicationDue {
            guard (run.publishedAt ?? .distantPast).addingTimeInterval(settings.streamInterval) <= now else { continue }
            publishRun(id, isFinal: false, now: now, into: &actions)
        }
    }

    /// The bot is idle once no run of Tether's is open.
    mutating func settleBotState(now: Date, into actions: inout [Action], detail: String? = nil) {
        guard runs.isEmpty else { return }
        setBotState(.idle, detail: detail.map { "reply incomplete: \($0)" }, now: now, into: &actions)
    }
}
