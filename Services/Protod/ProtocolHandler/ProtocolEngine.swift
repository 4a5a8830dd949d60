import Foundation
import Logging
import OpenClawWire
import TetherBus
import TetherSchema
import TetherService
import TetherStorage
import TetherWire

/// Feeds the delivery machine through a ``MachineDriver`` and carries out its actions, one
/// input at a time: an event's actions (outbox writes, frames, publications) all finish
/// before the next input is decided, so frames leave in the order the machine chose.
actor ProtocolEngine {
    let bus: any Bus
    let outbox: Outbox
    private let journal: ConversationJournal
    let settings: ProtocolSettings
    let logger: Logger
    /// The stores found damaged at start and made anew.
    let damaged: DamagedStores
    private let counters: ProgramCounters
    /// The outbox's disk, and the damaged files set aside at start.
    let storage: StorageWatch
    private let codec = WireCodec()
    private let openClawCodec = OpenClawCodec()
    /// Runs the machine: ``run()`` drives it until cancelled.
    let driver = MachineDriver<DeliveryStateMachine, WallClock>(clock: WallClock())
    private let initial: DeliveryStateMachine
    /// Where the gateway's answer to a command's request goes, by request id: a stream that
    /// keeps an answer coming before its command reads it.
    private var waitingForGateway: [String: AsyncStream<GatewayAnswer>.Continuation] = [:]

    /// The gateway's answer to a command's request; nil when none came in time.
    typealias GatewayAnswer = (ok: Bool, payload: JSONValue?, error: GatewayErrorShape?)?
    typealias Context = MachineDriver<DeliveryStateMachine, WallClock>.Context

    init(
        bus: any Bus, outbox: Outbox, journal: ConversationJournal, settings: ProtocolSettings, damaged: DamagedStores, storage: StorageCondition,
        counters: ProgramCounters, logger: Logger
    ) {
        self.bus = bus
        self.damaged = damaged
        self.storage = StorageWatch(storage, bus: bus, logger: logger)
        self.outbox = outbox
        self.journal = journal
        self.settings = settings
        self.counters = counters
        self.logger = logger
        self.initial = DeliveryStateMachine(settings: settings.delivery, now: Date())
    }

    /// Queues what protod starts from: the outbox's pending messages, the session to resume,
    /// the recent transcript and the session chosen; after damaged stores, what was recovered
    /// and what was lost.
    func start() async throws {
        storage.announce()
        var outboxRecovery = damaged.outbox
        var recent = try journal.recentEntries(limit: DeliveryStateMachine.knownLimit)
        var behind: [DeliveryUpdate] = []
        if damaged.journal {
            recent = await transcriptAfterJournalLoss()
            if var recovery = outboxRecovery {
                try await recover(from: recent, into: &recovery)
                outboxRecovery = recovery
            }
            behind = try await statusesBehind(in: recent)
        }
        let pending = try await outbox.pending()
        let saved = try await outbox.session()
        let openStreams = await keptReplies(try await outbox.openStreams())
        let chosen = try await outbox.chosenSession(startedWith: settings.delivery.sessionKey)
        driver.send(
            .started(
                pending: pending, session: .init(sessionID: saved.sessionID, lastSequence: saved.lastSequence), recent: recent, chosenSession: chosen,
                openStreams: openStreams))
        if let outboxRecovery { driver.send(.outboxWasDamaged(lost: outboxRecovery.lost)) }
        for update in behind { publishChange(update) }
    }

    /// Drives the machine until the task is cancelled.
    func run() async {
        await driver.run(initial) { action in await self.perform(action) }
    }

    /// Feeds an event, and returns once its actions are carried out.
    func handle(_ event: DeliveryStateMachine.Event) async {
        _ = try? await driver.perform { context in await context.handle(event) }
    }

    // MARK: Commands

    /// Commits a message to the outbox, then answers; it is written at once when connected.
    func send(_ request: SendMessageCommand.Request) async throws -> SendMessageCommand.Reply {
        let (outbox, storage, settings, logger) = (self.outbox, self.storage, self.settings, self.logger)
        return try await driver.perform { context in
            switch context.machine.admit(request, now: context.now) {
            case .refuse(let refusal, let actions):
                // The same id sent again is answered with where it stands, even when a new one would be refused.
                if let existing = try await outbox.message(id: request.id.value) {
                    return SendMessageCommand.Reply(id: request.id, status: existing.status, accepted: false)
                }
                await context.carryOut(actions)
                throw CommandError(refusal.description)
            case .commit(let strategy, let fallbackFrom):
                let enqueued: (OutboxMessage, inserted: Bool)
                do {
                    enqueued = try await outbox.enqueue(
                        id: request.id, content: request.content, strategy: strategy, kind: request.kind, retry: request.retry ?? settings.defaultRetry,
                        session: context.machine.chosenSession, attachments: request.attachments, whileBusy: request.whileBusy)
                    storage.wrote()
                } catch {
                    guard let words = storage.fullDiskWords(for: error) else { throw error }
                    storage.writeFailed(error)
                    throw CommandError("not queued: \(words)", code: .diskFull)
                }
                let (message, inserted) = enqueued
                guard inserted else {
                    let status = context.machine.status(of: message.id) ?? message.status
                    return SendMessageCommand.Reply(id: request.id, status: status, accepted: false)
                }
                let actions = await context.handle(.accepted(message, fallbackFrom: fallbackFrom))
                // After its frame, not before: a log line is a write to compose's pipe.
                logger.info("message queued", metadata: ["message.id": "\(message.id)", "message.sequence": "\(message.sequence)"])
                // Where it stands now: the last change said of it.
                var status = DeliveryStatus.queued
                for case .publishDelivery(let update) in actions where update.id == request.id { status = update.status }
                return SendMessageCommand.Reply(id: request.id, status: status, accepted: true, warning: context.machine.dropWarning(for: status))
            }
        }
    }

    /// Cancels one pending message, or all of them.
    func cancel(_ id: MessageID?) async throws -> CancelCommand.Reply {
        try await driver.perform { context in
            let actions = await context.handle(.cancel(id.map { [$0.value] }))
            var cancelled: [MessageID] = []
            for case .publishDelivery(let update) in actions where update.status == .cancelled { cancelled.append(update.id) }
            return CancelCommand.Reply(cancelled: cancelled)
        }
    }

    /// Asks the gateway to stop the reply to `id`, or every reply of the session.
    func abort(_ id: MessageID?) async throws -> AbortCommand.Reply {
        var params: [String: JSONValue] = ["sessionKey": .string(DeliveryStateMachine.sessionKeyPlaceholder)]
        if let id { params["runId"] = .string(id.value) }
        let answer = try await askGateway("chat.abort", params: .object(params), timeout: .seconds(10))
        let stopped = answer?["runIds"].flatMap { value -> [MessageID]? in
            guard case .array(let ids) = value else { return nil }
            return ids.compactMap(\.stringValue).map(MessageID.init)
        }
        return AbortCommand.Reply(stopped: stopped ?? [])
    }

    /// The approvals the gateway waits for.
    func approvals() async throws -> ApprovalsUpdate {
        try await driver.perform { $0.machine.approvals.current }
    }

    /// Answers an approval at the gateway; what it ended as. An id the gateway no longer knows
    /// leaves the book (answered elsewhere or expired), and the command fails saying so.
    func approve(_ request: ApproveCommand.Request) async throws -> ApproveCommand.Reply {
        let approval = try await driver.perform { context in
            switch context.machine.approvals.approval(named: request.id) {
            case .success(let approval): return approval
            case .failure(let problem): throw CommandError(problem.description, code: .refused)
            }
        }
        guard approval.allowedDecisions.contains(request.decision) else {
            throw CommandError(
                "\(approval.shortID) may be answered \(approval.allowedDecisions.map(\.rawValue).joined(separator: " or ")), not \(request.decision.rawValue): the gateway's policy asks every time",
                code: .refused)
        }
        let params = JSONValue.object(["id": .string(approval.id), "decision": .string(request.decision.rawValue)])
        do {
            _ = try await askGateway("\(approval.kind.rawValue).approval.resolve", params: params, timeout: .seconds(10)) { shape in
                shape.details?["reason"]?.stringValue == "APPROVAL_NOT_FOUND" ? ApprovalGone() : nil
            }
        } catch is ApprovalGone {
            await handle(.approval(.notFound(id: approval.id)))
            throw CommandError("\(approval.shortID) is no longer waiting at the gateway: it was answered elsewhere or expired", code: .refused)
        }
        // The gateway's resolved event ends it too: whichever comes first, the book ends it once.
        let resolved = ApprovalResolvedPayload(id: approval.id, decision: request.decision.rawValue, resolvedBy: OpenClawProtocol.displayName, ts: nil)
        return try await driver.perform { context in
            let actions = await context.handle(.approval(.resolved(resolved)))
            for case .retainApprovals(let update) in actions { if let ended = update.ended, ended.approval.id == approval.id { return .init(ended: ended) } }
            return .init(
                ended: ApprovalEnded(approval: approval, how: .resolved, decision: request.decision, by: OpenClawProtocol.displayName, at: context.now))
        }
    }

    /// The gateway's sessions.
    func sessions() async throws -> SessionsCommand.Reply {
        let answer = try await askGateway("sessions.list", params: .object([:]), timeout: .seconds(15))
        let list = (try? answer?.decode(SessionsListResult.self))?.sessions ?? []
        let current = try await driver.perform { $0.machine.conversation?.sessionKey }
        return SessionsCommand.Reply(
            sessions: list.map { session in
                SessionsCommand.Reply.Session(
                    key: session.key, displayName: session.displayName,
                    updatedAt: session.updatedAt.map { Date(timeIntervalSince1970: Double($0) / 1000) })
            },
            current: current)
    }

    /// The gateway's models (`models.list`).
    func models() async throws -> ModelsCommand.Reply {
        try await refuseOnSeed()
        let answer = try await askGateway("models.list", params: .object([:]), timeout: .seconds(15))
        guard let list = try? answer?.decode(ModelsListResult.self) else {
            throw CommandError("the gateway's models.list answer could not be read", code: .failed)
        }
        let current = try await driver.perform { $0.machine.sessionSettings.modelName }
        return ModelsCommand.Reply(
            models: list.models.map {
                ModelChoice(id: $0.id, provider: $0.provider, name: $0.name, alias: $0.alias, contextWindow: $0.contextWindow, reasoning: $0.reasoning)
            }, current: current)
    }

    /// The gateway's agents (`agents.list`).
    func agents() async throws -> AgentsCommand.Reply {
        try await refuseOnSeed()
        let answer = try await askGateway("agents.list", params: .object([:]), timeout: .seconds(15))
        guard let list = try? answer?.decode(AgentsListResult.self) else {
            throw CommandError("the gateway's agents.list answer could not be read", code: .failed)
        }
        return AgentsCommand.Reply(
            agents: list.agents.map { AgentsCommand.Reply.Agent(id: $0.id, name: $0.name, model: $0.model?.primary) }, defaultID: list.defaultId,
            mainKey: list.mainKey)
    }

    /// Sets the session's model or thinking level: the values checked (the model against the
    /// gateway's list when it gives one), then the gateway's text commands sent through the
    /// outbox, each exactly once, with ids made from the change's.
    func setSession(_ request: SessionSetCommand.Request) async throws -> SessionSetCommand.Reply {
        try await refuseOnSeed()
        var models: [ModelChoice]?
        var unchecked: String?
        if request.model != nil {
            do {
                models = try await self.models().models
            } catch {
                // Not listed (not connected, or the gateway would not): the gateway judges the
                // name itself when the message reaches it, and answers in the conversation.
                unchecked = "\(error)"
            }
        }
        let messages: [(setting: String, text: String)]
        switch SettingsChange.messages(model: request.model, thinking: request.thinking, models: models) {
        case .success(let checked): messages = checked
        case .failure(let refusal): throw CommandError(refusal.description, code: .refused)
        }
        var sent: [SendMessageCommand.Reply] = []
        for message in messages {
            let id = SessionSetCommand.messageID(of: request.id, setting: message.setting)
            sent.append(try await send(SendMessageCommand.Request(id: id, content: message.text)))
        }
        let connected = try await driver.perform { $0.machine.connection != nil }
        return SessionSetCommand.Reply(
            sent: sent, detail: SessionSetCommand.Reply.detail(for: messages.map(\.text), connected: connected, unchecked: unchecked))
    }

    /// Refuses a settings command on a seed gateway, in words.
    private func refuseOnSeed() async throws {
        let seed = try await driver.perform { $0.machine.conversation?.dialect == .seed }
        if seed { throw CommandError(DeliveryStateMachine.settingsUnavailableOnSeed, code: .refused) }
    }

    /// Chats in another session from now on: the choice is kept first, then the machine goes
    /// over once what was sent before is answered.
    func useSession(_ key: String) async throws -> SessionUseCommand.Reply {
        let key = key.trimmingCharacters(in: .whitespaces)
        let (outbox, storage, startedWith) = (self.outbox, self.storage, settings.delivery.sessionKey)
        return try await driver.perform { context in
            if context.machine.conversation?.dialect == .seed {
                throw CommandError("the gateway speaks the seeds' JSON, which has one conversation: there is no session to choose", code: .refused)
            }
            do {
                try await outbox.saveChosenSession(key, startedWith: startedWith)
                storage.wrote()
            } catch {
                guard let words = storage.fullDiskWords(for: error) else { throw error }
                storage.writeFailed(error)
                throw CommandError("the session was not changed: \(words)", code: .diskFull)
            }
            await context.handle(.chooseSession(key))
            guard let session = context.machine.conversation, let chosen = session.sessionKey else {
                return SessionUseCommand.Reply(session: nil, detail: "chatting in \(key) once an OpenClaw gateway is connected")
            }
            if let finishing = session.finishing, let waiting = session.finishingMessages {
                return SessionUseCommand.Reply(
                    session: session,
                    detail:
                        "chatting in \(chosen) once \(waiting) message\(waiting == 1 ? "" : "s") sent before in \(finishing) \(waiting == 1 ? "is" : "are") answered; what is sent now waits until then"
                )
            }
            return SessionUseCommand.Reply(
                session: session, detail: "chatting in \(chosen)" + (context.machine.canWrite ? "" : " once the gateway is connected"))
        }
    }

    /// Sends a request to the gateway for a command and waits for its answer's payload.
    /// - Parameter refused: the error for a refusal of the gateway's, when the caller has its own words for it.
    private func askGateway(
        _ method: String, params: JSONValue?, timeout: Duration, refused: (GatewayErrorShape) -> (any Error)? = { _ in nil }
    ) async throws -> JSONValue? {
        let (answers, answered) = AsyncStream<GatewayAnswer>.makeStream(bufferingPolicy: .bufferingOldest(1))
        let (request, refusal): (String?, String) = try await driver.perform { context in
            guard let (id, actions) = context.machine.gatewayRequest(method, params: params, now: context.now) else {
                let seed = context.machine.canWrite && context.machine.dialect == .seed
                return (
                    nil,
                    seed
                        ? "\(method) needs an OpenClaw gateway; this connection speaks the seed dialect"
                        : "not connected to the gateway: try again once connected"
                )
            }
            // Waited for before it is written: its answer may come before this command reads it.
            await self.awaitAnswer(to: id, on: answered)
            await context.carryOut(actions)
            return (id, "")
        }
        guard let request else { throw CommandError(refusal) }
        let timer = Task {
            try await Task.sleep(for: timeout)
            self.answer(request, with: nil)
        }
        defer { timer.cancel() }
        var next = answers.makeAsyncIterator()
        guard let answer = await next.next() ?? nil else { throw CommandError("the gateway did not answer \(method) within \(timeout)", code: .failed) }
        guard answer.ok else {
            let shape = answer.error ?? GatewayErrorShape(code: "UNKNOWN", message: "no reason given")
            throw refused(shape) ?? CommandError("the gateway refused \(method): \(shape.code) \(shape.message)")
        }
        return answer.payload
    }

    private func awaitAnswer(to request: String, on answered: AsyncStream<GatewayAnswer>.Continuation) {
        waitingForGateway[request] = answered
    }

    /// Hands a command its answer (nil: none came in time), the first one only.
    private func answer(_ request: String, with answer: GatewayAnswer) {
        guard let answered = waitingForGateway.removeValue(forKey: request) else { return }
        answered.yield(answer)
        answered.finish()
    }

    /// Asks connd to reconnect now; what waits is written on the new connection.
    func attemptRecovery() async -> RecoverCommand.Reply {
        diagnose(DiagnosticEvent(kind: .recoveryAttempted))
        let health = { [driver] in (try? await driver.perform { $0.machine.healthState }) ?? .unhealthy }
        do {
            let reply = try await bus.request(
                ConnectionCommand.self, .init(action: .reconnect, reason: "recovery asked for"), timeout: .seconds(2), attempts: 2)
            diagnose(DiagnosticEvent(kind: reply.accepted ? .recoverySucceeded : .recoveryFailed, detail: "the connection is \(reply.phase.rawValue)"))
            return RecoverCommand.Reply(reconnecting: reply.accepted, health: await health())
        } catch {
            diagnose(DiagnosticEvent(kind: .recoveryFailed, detail: "\(error)"))
            return RecoverCommand.Reply(reconnecting: false, health: await health())
        }
    }

    /// The journal's changes after `revision`, for a subscriber catching up.
    func journalChanges(after revision: Int, limit: Int) throws -> JournalCommand.Reply {
        try journal.changes(after: revision, limit: limit)
    }

    // MARK: Bus input

    /// Decodes a bus message and feeds the machine what it says, in its turn; returns once it
    /// is queued (once it is carried out when many wait), so that the reader goes back to the
    /// bus at once.
    nonisolated func receive(_ message: BusMessage) async {
        await driver.submit { context in await self.receive(message, in: &context) }
    }

    private func receive(_ message: BusMessage, in context: inout Context) async {
        switch message.topic {
        case .connectionState:
            guard let status = try? message.decode(ConnectionStatus.self) else { return countMalformed(message) }
            if let suggestion = context.machine.suggestion(for: status, now: context.now) { publish(suggestion, on: .suggestion) }
            if status.phase == .connected {
                await context.handle(.connectionUp(epoch: status.epoch, id: status.connectionID ?? "epoch-\(status.epoch)", gateway: status.gateway))
            } else {
                await context.handle(.connectionDown)
            }
        case .wireInbound:
            guard let frame = try? message.decode(WireFrame.self) else { return countMalformed(message) }
            if context.machine.dialect == .openclaw {
                do {
                    await context.handle(.openClawFrame(try openClawCodec.decode(frame.text)))
                } catch {
                    counters.increment(ProtocolCounter.malformedFrames)
                    logger.warning("dropped a malformed frame from the gateway", metadata: ["wire.error": "\(error)"])
                }
                return
            }
            let decoded: WireMessage
            do {
                decoded = try codec.decode(frame.text)
            } catch {
                counters.increment(ProtocolCounter.malformedFrames)
                logger.warning("dropped a malformed frame from the gateway", metadata: ["wire.error": "\(error)"])
                return
            }
            if case .unknown(let type, _, _) = decoded {
                counters.increment(ProtocolCounter.unknownTypes)
                logger.debug("ignored an unknown message type", metadata: ["wire.type": "\(type)"])
            }
            await context.handle(.frame(decoded))
        case .networkPath:
            guard let path = try? message.decode(NetworkPath.self) else { return countMalformed(message) }
            if let suggestion = context.machine.suggestion(for: path, now: context.now) { publish(suggestion, on: .suggestion) }
        default:
            break
        }
    }

    private func countMalformed(_ message: BusMessage) {
        counters.increment(ProtocolCounter.malformedFrames)
        logger.warning("dropped an unreadable bus message", metadata: ["bus.topic": "\(message.topic)", "bus.source": "\(message.header.source)"])
    }

    // MARK: Actions

    private func perform(_ action: DeliveryStateMachine.Action) async {
        do {
            try await carryOut(action)
            if action.writesTheOutbox { storage.wrote() }
        } catch {
            storage.writeFailed(error)
            logger.error("cannot carry out \(action.name)", metadata: ["protod.error": "\(error)"])
        }
    }

    private func carryOut(_ action: DeliveryStateMachine.Action) async throws {
        switch action {
        case .write(let frame):
            publish(frame, on: .wireOutbound)
        case .persistSent(let ids, let epoch, let connection, let at):
            try await outbox.markSent(ids: ids, epoch: epoch, connection: connection, at: at)
        case .persistDelivered(let id):
            _ = try await outbox.markDelivered(id: id)
        case .persistFinal(let ids, let status):
            try await outbox.finish(ids, as: status)
        case .persistRequeued(let id):
            try await outbox.requeue(id: id)
            // Its images may be in the outbox only: the machine holds such a message until they come.
            driver.send(.imagesRead(id: id, try await outbox.message(id: id)?.attachments ?? []))
        case .persistInGatewayQueue(let id, let at):
            try await outbox.markInGatewayQueue(id: id, at: at)
        case .publishEntry(let entry):
            publishChange(entry)
        case .publishDelivery(let update):
            publishChange(update)
        case .publishStream(let progress):
            publish(progress, on: .conversationStream)
        case .retainBotState(let state):
            try bus.retain(state, on: .botState)
        case .retainHealth(let report):
            logger.notice("health \(report.state.rawValue)")
            try bus.retain(report, on: .health)
        case .retainSummary(let summary):
            try bus.retain(summary, on: .outboxSummary)
        case .diagnose(let event):
            diagnose(event)
        case .suggest(let suggestion):
            publish(suggestion, on: .suggestion)
        case .saveSession(let point):
            try await outbox.saveSession(sessionID: point.sessionID, lastSequence: point.lastSequence)
        case .saveOpenStreams(let streams):
            try await outbox.saveOpenStreams(streams)
        case .retainSession(let session):
            try bus.retain(session, on: .conversationSession)
        case .retainApprovals(let update):
            try bus.retain(update, on: .approvals)
        case .retainSettings(let settings):
            try bus.retain(settings, on: .sessionSettings)
        case .commandAnswered(let id, let ok, let payload, let error):
            answer(id, with: (ok, payload, error))
        case .reconnect(let reason):
            logger.warning("asking connd for a new connection", metadata: ["connection.reason": "\(reason)"])
            let bus = self.bus
            let logger = self.logger
            // Not awaited here: the answer must not hold up the events behind this one.
            Task {
                do {
                    _ = try await bus.request(ConnectionCommand.self, .init(action: .reconnect, reason: reason), timeout: .seconds(2), attempts: 2)
                } catch {
                    logger.error("connd did not take the reconnect", metadata: ["connection.error": "\(error)"])
                }
            }
        }
    }

    private func publish(_ payload: some Encodable, on topic: Topic) {
        do {
            try bus.publish(payload, on: topic)
        } catch {
            logger.warning("cannot publish", metadata: ["bus.topic": "\(topic)", "bus.error": "\(error)"])
        }
    }

    private func diagnose(_ event: DiagnosticEvent) {
        publish(event, on: .diagnostic)
    }

    /// Journals a change of the conversation, then publishes it with its revision.
    func publishChange(_ body: some ConversationChangeBody) {
        do {
            publish(try journal.record(body), on: type(of: body).topic)
        } catch {
            storage.writeFailed(error)
            logger.error("cannot journal a conversation change", metadata: ["journal.error": "\(error)"])
            publish(body, on: type(of: body).topic)
        }
    }
}

/// The gateway no longer waits for an approval Tether answered.
private struct ApprovalGone: Error {}
