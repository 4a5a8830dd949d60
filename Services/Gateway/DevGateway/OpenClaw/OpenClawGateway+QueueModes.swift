import Foundation
import Logging
import OpenClawWire

/// `chat.send`'s `queueMode` into a run in progress, as today's gateway takes it
/// (`chat-send-message-injection.ts`, `queue/settings.ts`): `steer` gives the message to the
/// run, whose reply answers it too, and answers its key with an empty `final`; `interrupt`
/// stops the run and starts the message's own. Either way the session's row says what became
/// of it (`lastBusyMessageOutcome`, the last one, in memory).
extension OpenClawGateway {
    /// Gives `text` to the session's run in progress: its user entry joins the transcript now
    /// (keyed with its `chat.send`), and the run's reply answers it after what it was saying.
    /// False when no run can take it.
    func steer(_ key: String, text: String, into session: String, senderLabel: String?) -> Bool {
        guard let runID = activeRuns.filter({ $0.value.sessionKey == session && !$0.value.aborted }).keys.sorted().first else { return false }
        var user = ChatTranscriptMessage(role: "user", text: text, timestamp: OpenClawProtocol.milliseconds(Date()), senderLabel: senderLabel)
        user.turnKey = ChatTranscriptMessage.userTurnKey(of: key)
        writeUserEntry(of: runID)
        append(user, to: session)
        activeRuns[runID]?.steered.append(text)
        finishedRuns[key] = (ChatSendResult(runId: key, status: "ok"), true, Date())
        lastBusyOutcomes[session] = BusyMessageOutcome(
            kind: "active_run_steer_accepted", label: "steered into the active run", recordedAtMs: Double(OpenClawProtocol.milliseconds(Date())),
            source: "inbound")
        logger.info("steered into the run in progress", metadata: ["gateway.run": "\(runID)", "gateway.key": "\(key)"])
        return true
    }

    /// Stops the session's runs in progress for a message sent to interrupt them; true when one was.
    func interrupt(_ session: String, echoing requested: String) async -> Bool {
        let stopped = await abort(sessionKey: session, echoing: requested, runID: nil, reason: "interrupt")
        guard !stopped.isEmpty else { return false }
        lastBusyOutcomes[session] = BusyMessageOutcome(
            kind: "interrupt_started", label: "interrupted the active run", recordedAtMs: Double(OpenClawProtocol.milliseconds(Date())), source: "inbound")
        return true
    }

    /// What the run's reply adds for the messages steered into it so far (taken once each).
    func takeSteered(_ runID: String) -> String? {
        guard let steered = activeRuns[runID]?.steered, !steered.isEmpty else { return nil }
        activeRuns[runID]?.steered = []
        return steered.map { "\n\nAnd to what you added: \(bot.reply(to: $0))" }.joined()
    }

    /// `chat.steer {sessionKey, runId}`: moves an input waiting in the session's queue into
    /// the run in progress.
    func steerQueued(_ params: JSONValue?) -> (ok: Bool, payload: JSONValue?, error: GatewayErrorShape?) {
        guard let sessionKey = params?["sessionKey"]?.stringValue, let key = params?["runId"]?.stringValue else {
            return (false, nil, Self.invalid("invalid chat.steer params: must have required properties sessionKey, runId"))
        }
        let session = Self.canonical(sessionKey)
        guard let index = queues[session]?.firstIndex(where: { $0.key == key }), let waiting = queues[session]?[index] else {
            return (false, nil, Self.invalid("no queued input \(key) in \(sessionKey)"))
        }
        guard steer(key, text: waiting.text, into: session, senderLabel: waiting.senderLabel) else {
            return (false, nil, Self.invalid("no run in progress in \(sessionKey)"))
        }
        queues[session]?.remove(at: index)
        consumeInput(key: key)
        return (true, .object(["ok": .bool(true), "runId": .string(key)]), nil)
    }
}
