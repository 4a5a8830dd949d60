import Foundation
import Logging
import NIOWebSocket
import OpenClawWire
import TetherService

/// What the gateway does with requests: `chat.send` with its idempotency, a busy session's
/// queue, runs streamed as events, aborts, ticks and the events every client is sent.
extension OpenClawGateway {
    // MARK: Requests

    func request(id: String, method: String, params: JSONValue?, on link: OpenClawClientConnection) async {
        if let approval = await approvalRequest(method: method, params: params, on: link) {
            try? await link.write(codec.encode(.response(id: id, ok: approval.ok, payload: approval.payload, error: approval.error)))
            return
        }
        let answer: (ok: Bool, payload: JSONValue?, error: GatewayErrorShape?)
        switch method {
        case "chat.send":
            let sent = await send(params, on: link)
            answer = sent.answer
            if let directive = sent.directive {
                // Answered without a run: `started`, then the answer as a final.
                try? await link.write(codec.encode(.response(id: id, ok: answer.ok, payload: answer.payload, error: answer.error)))
                await answerDirective(directive.answer, runID: directive.runID, in: directive.session)
                return
            }
            if let queued = sent.queued {
                // A busy session's message: `started`, then at once a `final` with no message.
                try? await link.write(codec.encode(.response(id: id, ok: answer.ok, payload: answer.payload, error: answer.error)))
                await broadcast(droppable: false) { _ in
                    ("chat", try? JSONValue(encoding: ChatEventPayload(runId: queued.runID, sessionKey: queued.sessionKey, seq: 1, state: .final)))
                }
                return
            }
            let delay = faults.current.acknowledgementDelayMilliseconds
            if delay > 0 {
                // The run has started; only its answer is late.
                let text = codec.encode(.response(id: id, ok: answer.ok, payload: answer.payload, error: answer.error))
                Task {
                    try? await Task.sleep(for: .milliseconds(delay))
                    try? await link.write(text)
                }
                return
            }
        case "chat.history":
            guard link.allows("operator.read") else { return await reply(id, Self.missingScope("operator.read"), on: link) }
            if let refusal = Self.unknownFieldError(params, method: method, allowed: settings.release.historyFields) {
                return await reply(id, refusal, on: link)
            }
            answer = history(params)
        case "chat.steer" where settings.release.takesQueueModes:
            guard link.allows("operator.write") else { return await reply(id, Self.missingScope("operator.write"), on: link) }
            answer = steerQueued(params)
        case "chat.abort":
            guard link.allows("operator.write") else { return await reply(id, Self.missingScope("operator.write"), on: link) }
            guard let params = try? params?.decode(ChatAbortParams.self) else { return await reply(id, Self.invalid("invalid chat.abort params"), on: link) }
            if let runID = params.runId, let run = activeRuns[runID], run.sessionKey != Self.canonical(params.sessionKey) {
                return await reply(id, Self.invalid("runId does not match sessionKey"), on: link)
            }
            let aborted = await abort(sessionKey: Self.canonical(params.sessionKey), echoing: params.sessionKey, runID: params.runId, reason: "rpc")
            answer = (true, .object(["ok": .bool(true), "aborted": .bool(!aborted.isEmpty), "runIds": .array(aborted.map(JSONValue.string))]), nil)
        case "sessions.list", "models.list", "agents.list":
            answer = settingsRequest(method: method, on: link) ?? (false, nil, Self.invalid("unknown method: \(method)"))
        case "health":
            answer = (true, .object(["ok": .bool(true), "ts": .number(Double(OpenClawProtocol.milliseconds(Date())))]), nil)
        case "connect":
            answer = (false, nil, Self.invalid("connect is only valid as the first request"))
        default:
            answer = (false, nil, Self.invalid("unknown method: \(method)"))
        }
        try? await link.write(codec.encode(.response(id: id, ok: answer.ok, payload: answer.payload, error: answer.error)))
    }

    private func reply(_ id: String, _ error: GatewayErrorShape, on link: OpenClawClientConnection) async {
        try? await link.write(codec.encode(.response(id: id, ok: false, payload: nil, error: error)))
    }

    /// `chat.send`: a new key starts a run, or, while the session is busy, waits in its queue;
    /// a key whose run is under way is `in_flight`; a finished one within the window gets its
    /// cached answer; after the window or a restart, a repeat is a new message.
    private func send(
        _ params: JSONValue?, on link: OpenClawClientConnection
    ) async -> (
        answer: (Bool, JSONValue?, GatewayErrorShape?), queued: (runID: String, sessionKey: String)?,
        directive: (answer: String, runID: String, session: String)?
    ) {
        guard link.allows("operator.write") else { return ((false, nil, Self.missingScope("operator.write")), nil, nil) }
        if let refusal = Self.unknownFieldError(params, method: "chat.send", allowed: settings.release.sendFields) { return ((false, nil, refusal), nil, nil) }
        guard let send = try? params?.decode(ChatSendParams.self), !send.sessionKey.isEmpty, !send.idempotencyKey.isEmpty else {
            return ((false, nil, Self.invalid("invalid chat.send params: must have required properties sessionKey, message, idempotencyKey")), nil, nil)
        }
        let key = send.idempotencyKey
        if activeRuns[key] != nil { return ((true, try? JSONValue(encoding: ChatSendResult(runId: key, status: "in_flight")), nil), nil, nil) }
        if let finished = finishedRuns[key], Date().timeIntervalSince(finished.at) < settings.dedupeWindow.inSeconds {
            return (
                (
                    finished.ok, try? JSONValue(encoding: finished.result),
                    finished.ok ? nil : GatewayErrorShape(code: "UNAVAILABLE", message: finished.result.summary ?? "run failed")
                ), nil, nil
            )
        }
        let text = send.message.trimmingCharacters(in: .whitespacesAndNewlines)
        // Checked before the attachments are looked at: images all dropped later still start a run.
        let attached = (send.attachments ?? []).filter { $0.content?.isEmpty == false }
        guard !text.isEmpty || !attached.isEmpty else { return ((false, nil, Self.invalid("message or attachment required")), nil, nil) }
        let parsed: (message: String, images: [ReceivedImage])
        switch Self.parseAttachments(attached, message: send.message) {
        case .kept(let message, let images): parsed = (message, images)
        case .refused(let error): return ((false, nil, error), nil, nil)
        }
        let session = Self.canonical(send.sessionKey)
        if text == "/stop" {
            let aborted = await abort(sessionKey: session, echoing: send.sessionKey, runID: nil, reason: "stop")
            return ((true, .object(["ok": .bool(true), "aborted": .bool(!aborted.isEmpty), "runIds": .array(aborted.map(JSONValue.string))]), nil), nil, nil)
        }
        _ = await record.add(
            id: key, content: send.message, connection: link.connection, keepingRepeats: true,
            images: parsed.images.isEmpty ? nil : parsed.images.map { "\($0.mimeType) \($0.bytes)" })
        let started = (true, try? JSONValue(encoding: ChatSendResult(runId: key, status: "started")), GatewayErrorShape?.none)
        // Today's release keeps an ordinary input to an existing session before it answers.
        let ordinary = !text.hasPrefix("/") && !text.hasPrefix("!")
        // Into the run in progress: joined (steer), or stopped for this one (interrupt).
        var interrupted = false
        if settings.release.takesQueueModes, hasActiveRun(session), let mode = send.queueMode {
            if mode == "steer", steer(key, text: parsed.message, into: session, senderLabel: link.senderLabel) { return (started, (key, session), nil) }
            if mode == "interrupt" { interrupted = await interrupt(session, echoing: send.sessionKey) }
        }
        if isBusy(session), !interrupted {
            if ordinary { keepInput(key: key, text: parsed.message, session: session, behindRun: true) }
            enqueue(Queued(key: key, text: parsed.message, at: Date(), senderLabel: link.senderLabel, images: parsed.images), in: session)
            finishedRuns[key] = (ChatSendResult(runId: key, status: "ok"), true, Date())
            return (started, (key, session), nil)
        }
        if let answer = directive(text, in: session) { return (started, nil, (answer, key, session)) }
        // `/new` and `/reset` start the session anew, then run: a greeting, or the text after the command.
        if Self.resetCommand(in: text) != nil { resetSession(session) }
        if ordinary { keepInput(key: key, text: parsed.message, session: session, behindRun: false) }
        start(key, message: parsed.message, sessionKey: session, senderLabel: link.senderLabel, images: parsed.images, inputKey: key)
        registerToolEventRecipient(link, in: session)
        // "Only the recorder can attest transcript placement": the turn's place, once it has one.
        if settings.release.keepsInputs, let placed = activeRuns[key]?.userEntryID,
            let position = transcripts[session]?.firstIndex(where: { $0.entryID == placed })
        {
            let result = ChatSendResult(runId: key, status: "started", messageSeq: position + 1, interruptedActiveRun: interrupted ? true : nil)
            return ((true, try? JSONValue(encoding: result), nil), nil, nil)
        }
        return (started, nil, nil)
    }

    /// A session is busy while a run of it goes on, or messages wait to follow it.
    private func isBusy(_ session: String) -> Bool {
        hasActiveRun(session) || hasWaiting(session)
    }

    private func hasActiveRun(_ session: String) -> Bool {
        activeRuns.values.contains { $0.sessionKey == session }
    }

    /// Messages wait in the session's queue, or a summary of what its cap dropped is owed.
    private func hasWaiting(_ session: String) -> Bool {
        queues[session]?.isEmpty == false || overflow[session]?.isEmpty == false
    }

    /// Queues a message behind the session's run; past the cap the oldest is dropped.
    private func enqueue(_ message: Queued, in session: String) {
        var queue = queues[session] ?? []
        queue.append(message)
        if queue.count > settings.queueCap {
            let dropped = queue.prefix(queue.count - settings.queueCap)
            overflow[session, default: []].append(contentsOf: dropped)
            queue.removeFirst(dropped.count)
            logger.notice("queue overflow", metadata: ["gateway.session": "\(session)", "gateway.dropped": "\(overflow[session]?.count ?? 0)"])
        }
        queues[session] = queue
    }

    /// Starts a run of `message` in the session; `answer`, when given, is its reply (the
    /// gateway's own turns), else the bot's. Its user entry joins the transcript as its turn
    /// starts (merged with the session's orphan after a restart in the middle of a run).
    func start(
        _ runID: String, message: String, sessionKey: String, senderLabel: String?, images: [ReceivedImage] = [], inputKey: String?, answer: String? = nil
    ) {
        var entry = message
        if let orphan = orphans.removeValue(forKey: sessionKey) {
            entry = Self.orphanRewrite(orphan: orphan.text, at: orphan.at, message: message, now: Date())
        }
        var user = ChatTranscriptMessage(role: "user", text: entry, timestamp: OpenClawProtocol.milliseconds(Date()), senderLabel: senderLabel)
        if case .array(let blocks)? = user.content, !images.isEmpty { user.content = .array(blocks + Self.imageBlocks(images)) }
        // Today's release keys the turn's user entry with its `chat.send`.
        if settings.release.keepsInputs, let inputKey { user.turnKey = ChatTranscriptMessage.userTurnKey(of: inputKey) }
        // As the gateway: a brand-new session's first user entry appears only with its reply.
        if transcripts[sessionKey]?.contains(where: { $0.role == "assistant" }) == true {
            activeRuns[runID] = Run(sessionKey: sessionKey, userEntryID: append(user, to: sessionKey), inputKey: inputKey)
            consumeInput(key: inputKey)
        } else {
            activeRuns[runID] = Run(sessionKey: sessionKey, unwrittenUserEntry: user, inputKey: inputKey)
        }
        Task {
            await self.run(runID, message: message, sessionKey: sessionKey, images: images, answer: answer)
            await self.runEnded(in: sessionKey)
        }
    }

    /// After a session's run ends, what waited behind it runs, one message a turn under a run
    /// id of the gateway's own; then, if the queue overflowed, one turn that summarises what it dropped.
    private func runEnded(in session: String) async {
        guard hasWaiting(session) else { return }
        try? await Task.sleep(for: settings.followUpDelay)
        guard !hasActiveRun(session) else { return }
        let turn: Queued
        if var queue = queues[session], !queue.isEmpty {
            turn = queue.removeFirst()
            queues[session] = queue.isEmpty ? nil : queue
        } else if let dropped = overflow.removeValue(forKey: session) {
            turn = Queued(text: Self.overflowSummary(dropped), at: Date(), senderLabel: dropped.last?.senderLabel)
        } else {
            return
        }
        start(
            turn.runID ?? UUID().uuidString.lowercased(), message: turn.text, sessionKey: session, senderLabel: turn.senderLabel, images: turn.images,
            inputKey: turn.key, answer: turn.answer)
    }

    /// The gateway's own turn (`runID`, answered `answer`): now, or behind the session's run
    /// in its queue, as the gateway's `agent` call waits for it.
    func startOwnTurn(_ runID: String, prompt: String, answer: String, in session: String) {
        guard hasActiveRun(session) || hasWaiting(session) else {
            return start(runID, message: prompt, sessionKey: session, senderLabel: nil, inputKey: nil, answer: answer)
        }
        enqueue(Queued(key: nil, text: prompt, at: Date(), senderLabel: nil, runID: runID, answer: answer), in: session)
    }

    /// How the gateway's time stamps read: `Thu 2026-11-26 08:14 UTC`.
    static func stamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: date)
    }

    /// The user entry written in place of a message that follows a run a restart cut off.
    static func orphanRewrite(orphan: String, at orphanedAt: Date, message: String, now: Date) -> String {
        "\(OpenClawProtocol.restartRewriteHeader)\n\n[\(stamp(orphanedAt))] \(orphan)\n\n\n[\(stamp(now))] \(message)"
    }

    /// The user entry of the turn after an overflowing queue ran: the gateway's own words.
    static func overflowSummary(_ dropped: [Queued]) -> String {
        let lines = dropped.map { "- [\(stamp($0.at))] \($0.text)" }.joined(separator: "\n")
        return "[Queued messages while agent was busy]\n\n[Queue overflow] Dropped \(dropped.count) messages due to cap.\nSummary:\n\(lines)"
    }

    /// Streams the bot's reply as `chat` deltas beside `agent` events, then the final (unless
    /// aborted meanwhile); with the `modelFailure` fault, the model fails every attempt and no
    /// `chat` event is sent at all.
    private func run(_ runID: String, message: String, sessionKey: String, images: [ReceivedImage], answer: String?) async {
        await agentEvent(runID, sessionKey: sessionKey, stream: "lifecycle", data: ["phase": .string("start")])
        let current = faults.current
        if current.modelFailure || Double.random(in: 0..<1) < current.modelFailureFraction { return await failModel(runID, sessionKey: sessionKey) }
        if let kind = current.modelErrorKind { return await endWithError(runID, kind: kind, sessionKey: sessionKey) }
        if current.rateLimitRetries > 0 {
            guard await retryRateLimited(runID, times: current.rateLimitRetries, sessionKey: sessionKey) else { return }
        }
        // The development bot says what it received, so that a test sees an image arrived, once.
        var reply = [message.isEmpty ? nil : bot.reply(to: message), Self.receivedWords(images)].compactMap { $0 }.joined(separator: "\n")
        var hidden: String?
        if let reset = Self.resetCommand(in: message.trimmingCharacters(in: .whitespacesAndNewlines)) {
            reply = reset.rest.isEmpty ? Self.greeting(model: modelOf(sessionKey)) : bot.reply(to: reset.rest)
        }
        if let answer {
            reply = answer
        } else if let tool = Self.toolRequest(in: message) {
            guard let said = await runTool(tool, runID: runID, sessionKey: sessionKey) else { return }
            reply = said
        } else if let command = Self.execCommand(in: message) {
            // The tool call is answered "Approval required" at once; the model's words after it
            // go to the transcript only, and the run's final has no message, as the real
            // gateway's; its own turn follows the decision.
            guard await askApproval(toRun: command, runID: runID, sessionKey: sessionKey) else { return }
            hidden = Self.awaitingApprovalReply(command: command)
            reply = ""
        }
        var text = ""
        var runSequence = 0
        var planned = reply
        // Messages steered into the run while it streamed are answered after what it was saying.
        while true {
            for piece in bot.chunks(of: planned) {
                try? await Task.sleep(for: bot.chunkDelay)
                guard activeRuns[runID]?.aborted == false else { return }
                text += piece
                runSequence += 1
                activeRuns[runID]?.text = text
                let cumulative = text
                await agentEvent(runID, sessionKey: sessionKey, stream: "assistant", data: ["text": .string(cumulative), "delta": .string(piece)])
                await broadcast(droppable: true) { version in
                    let payload = ChatEventPayload(
                        runId: runID, sessionKey: sessionKey, seq: runSequence, state: .delta,
                        message: ChatTranscriptMessage(role: "assistant", text: cumulative, timestamp: OpenClawProtocol.milliseconds(Date())),
                        deltaText: version >= 4 ? piece : nil, replace: nil)
                    return ("chat", try? JSONValue(encoding: payload))
                }
            }
            guard let more = takeSteered(runID) else { break }
            planned = more
            reply += more
        }
        guard activeRuns[runID]?.aborted == false else { return }
        // A run whose model wrote nothing ends with a final without a message, and no entry.
        let final =
            reply.isEmpty ? nil : ChatTranscriptMessage(role: "assistant", text: reply, timestamp: OpenClawProtocol.milliseconds(Date()), stopReason: "stop")
        writeUserEntry(of: runID)
        for entry in activeRuns[runID]?.toolEntries ?? [] { append(entry, to: sessionKey) }
        if var stored = final
            ?? hidden.map({ ChatTranscriptMessage(role: "assistant", text: $0, timestamp: OpenClawProtocol.milliseconds(Date()), stopReason: "stop") })
        {
            stored.model = modelOf(sessionKey)
            append(stored, to: sessionKey)
        }
        countTokens(message: message, reply: reply, in: sessionKey)
        activeRuns[runID] = nil
        finishedRuns[runID] = (ChatSendResult(runId: runID, status: "ok"), true, Date())
        expireFinishedRuns()
        await agentEvent(runID, sessionKey: sessionKey, stream: "lifecycle", data: ["phase": .string("end")])
        await broadcast(droppable: false) { _ in
            ("chat", try? JSONValue(encoding: ChatEventPayload(runId: runID, sessionKey: sessionKey, seq: runSequence + 1, state: .final, message: final)))
        }
    }

    /// The model fails four times, a lifecycle error each (and an empty assistant entry with
    /// the error in the transcript), `modelRetryDelay` apart; then the gateway goes quiet and
    /// the run is over: no `chat` event says so.
    private func failModel(_ runID: String, sessionKey: String) async {
        let error = "500 Internal Server Error: the model is unavailable (fault injection)"
        for attempt in 1...4 {
            if attempt > 1 { try? await Task.sleep(for: settings.modelRetryDelay) }
            guard activeRuns[runID]?.aborted == false else { return }
            writeUserEntry(of: runID)
            append(
                ChatTranscriptMessage(
                    role: "assistant", text: "", timestamp: OpenClawProtocol.milliseconds(Date()), stopReason: "error", errorMessage: error, model: Self.model),
                to: sessionKey)
            await agentEvent(
                runID, sessionKey: sessionKey, stream: "lifecycle",
                data: ["phase": .string("error"), "error": .string(error), "livenessState": .string("blocked")])
        }
        activeRuns[runID] = nil
        finishedRuns[runID] = (ChatSendResult(runId: runID, status: "ok"), true, Date())
        logger.notice("the model failed (fault injection)", metadata: ["gateway.run": "\(runID)"])
    }

    /// Today's gateways say a run's retries (protocol 4): a `status` event with its `retry`
    /// for each, `modelRetryDelay` apart. False when the run was aborted meanwhile.
    private func retryRateLimited(_ runID: String, times: Int, sessionKey: String) async -> Bool {
        let maximum = max(times + 1, 5)
        for attempt in 1...times {
            guard activeRuns[runID]?.aborted == false else { return false }
            await broadcast(droppable: false, to: { ($0.protocolVersion ?? 0) >= 4 }) { _ in
                let retry = ChatEventPayload.Retry(attempt: attempt, maxAttempts: maximum, reason: "rate_limit")
                return ("chat", try? JSONValue(encoding: ChatEventPayload(runId: runID, sessionKey: sessionKey, seq: attempt, state: .status, retry: retry)))
            }
            try? await Task.sleep(for: settings.modelRetryDelay)
        }
        return activeRuns[runID]?.aborted == false
    }

    /// Today's gateways end a failed run with a `chat` `error` event of its kind (protocol 4;
    /// "only the run owner publishes terminal failures"), and the transcript keeps the user's
    /// message and an empty assistant entry with the error.
    private func endWithError(_ runID: String, kind: String, sessionKey: String) async {
        let words = Self.errorWords[kind] ?? "the model failed"
        writeUserEntry(of: runID)
        append(
            ChatTranscriptMessage(
                role: "assistant", text: "", timestamp: OpenClawProtocol.milliseconds(Date()), stopReason: "error", errorMessage: words, model: Self.model),
            to: sessionKey)
        activeRuns[runID] = nil
        finishedRuns[runID] = (ChatSendResult(runId: runID, status: "ok"), true, Date())
        await agentEvent(runID, sessionKey: sessionKey, stream: "lifecycle", data: ["phase": .string("error"), "error": .string(words)])
        await broadcast(droppable: false) { version in
            let event = ChatEventPayload(
                runId: runID, sessionKey: sessionKey, seq: 1, state: .error, errorMessage: words, errorKind: version >= 4 ? kind : nil, stopReason: "error")
            return ("chat", try? JSONValue(encoding: event))
        }
        logger.notice("the run ended with an error (fault injection)", metadata: ["gateway.run": "\(runID)", "gateway.errorKind": "\(kind)"])
    }

    /// The development model's words for each kind of failure.
    static let errorWords = [
        "refusal": "the model declined to answer (fault injection)",
        "timeout": "the model did not answer within the run's timeout (fault injection)",
        "rate_limit": "429 rate limit exceeded; retries exhausted (fault injection)",
        "context_length": "the prompt is longer than the model's context window (fault injection)",
    ]

    func agentEvent(_ runID: String, sessionKey: String, stream: String, data: [String: JSONValue]) async {
        let ts = Double(OpenClawProtocol.milliseconds(Date()))
        await broadcast(droppable: false) { _ in
            (
                "agent",
                .object([
                    "runId": .string(runID), "stream": .string(stream), "ts": .number(ts), "data": .object(data), "sessionKey": .string(sessionKey),
                ])
            )
        }
    }

    /// Aborts a run, or every run of the session; the aborted run ids. The `aborted` event
    /// echoes the session key as the client sent it.
    func abort(sessionKey: String, echoing requested: String, runID: String?, reason: String) async -> [String] {
        let chosen = activeRuns.filter { $0.value.sessionKey == sessionKey && (runID == nil || $0.key == runID) }.map(\.key).sorted()
        for id in chosen {
            if activeRuns[id]?.text.isEmpty == false { writeUserEntry(of: id) }
            if let run = activeRuns[id], !run.text.isEmpty {
                // As the gateway: its own entry with the text so far, listed before the run's user
                // entry, then the model's partial entry.
                let now = OpenClawProtocol.milliseconds(Date())
                insert(
                    ChatTranscriptMessage(
                        role: "assistant", text: run.text, timestamp: now, stopReason: "stop", model: ChatTranscriptMessage.gatewayInjected, abortedRunID: id),
                    before: run.userEntryID, in: sessionKey)
                append(ChatTranscriptMessage(role: "assistant", text: run.text, timestamp: now, stopReason: "aborted", model: Self.model), to: sessionKey)
            }
            activeRuns[id] = nil
            finishedRuns[id] = (ChatSendResult(runId: id, status: "ok"), true, Date())
            await broadcast(droppable: false) { _ in
                ("chat", try? JSONValue(encoding: ChatEventPayload(runId: id, sessionKey: requested, seq: nil, state: .aborted, stopReason: reason)))
            }
        }
        return chosen
    }

    /// Sends the tick every connection relies on for liveness.
    func tick() async {
        guard !faults.current.stopTicking else { return }
        let now = OpenClawProtocol.milliseconds(Date())
        await broadcast(droppable: false) { _ in ("tick", .object(["ts": .number(Double(now))])) }
    }

    /// Sends an event to the connected clients `audience` admits (every one by default). The
    /// gateway's counter counts every event: a protocol-3 client sees its number, and a gap
    /// for each event it was not sent; a protocol-4 client has a counter of its own. A
    /// droppable event is left out for a connection the `dropDeltaFraction` fault picks.
    func broadcast(droppable: Bool, to audience: (OpenClawClientConnection) -> Bool = { _ in true }, _ event: (Int) -> (String, JSONValue?)) async {
        let current = faults.current
        let skip = current.skipSequence
        if skip {
            var cleared = current
            cleared.skipSequence = false
            faults.set(cleared)
        }
        globalSequence += skip ? 2 : 1
        for link in links.values.sorted(by: { $0.connection < $1.connection }) {
            guard let version = link.protocolVersion, audience(link) else { continue }
            let sequence = version < 4 ? globalSequence : link.nextSequence(skip: skip)
            if droppable, current.dropDeltaFraction > 0, Double.random(in: 0..<1) < current.dropDeltaFraction { continue }
            let (name, payload) = event(version)
            do {
                try await link.write(codec.encode(.event(name: name, payload: payload, seq: sequence)))
            } catch {
                links[link.connection] = nil
            }
        }
    }

    private func expireFinishedRuns() {
        let cutoff = Date().addingTimeInterval(-settings.dedupeWindow.inSeconds)
        finishedRuns = finishedRuns.filter { $0.value.at > cutoff }
        if finishedRuns.count > 1000 {
            for key in finishedRuns.sorted(by: { $0.value.at < $1.value.at }).prefix(finishedRuns.count - 1000).map(\.key) { finishedRuns[key] = nil }
        }
    }
}
