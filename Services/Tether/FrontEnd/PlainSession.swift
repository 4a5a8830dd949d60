import Foundation
public import TetherBus
import TetherSchema
public import TetherService
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// The conversation as plain lines, for screen readers, logs and pipes: the stored
/// transcript, then each message and reply as it completes, and every change of the
/// connection, the network and the bot announced in words. Lines typed on standard input
/// are sent, but for the slash commands Tether handles itself (``SlashCommands``), whose
/// answers are printed as lines.
public struct PlainSession: Sendable {
    private let bus: any Bus
    private let frame: FirstFrame
    private let status: @Sendable () async throws -> String

    /// `status` gives what `/status` prints: `tether status`'s report.
    public init(bus: any Bus, frame: FirstFrame, status: @escaping @Sendable () async throws -> String) {
        self.bus = bus
        self.frame = frame
        self.status = status
    }

    /// Runs until standard input ends and what it sent is settled (each message delivered
    /// and answered, or ended otherwise), at most `linger` after the input ended; or until
    /// the task is cancelled.
    public func run(events: BusSubscription, linger: Duration = .seconds(30)) async {
        let presence = PresenceAnnouncer(bus: bus, frontEnd: "tether --plain")
        let formatter = TranscriptFormatter()
        let bus = self.bus
        let sent = SentMessages()
        for entry in frame.entries { Self.say(formatter.line(for: entry)) }
        if frame.entries.isEmpty { Self.say("No messages yet. Type one and press Enter.") }
        await withDiscardingTaskGroup { group in
            group.addTask { await presence.run() }
            group.addTask {
                var announcer = PlainAnnouncer(model: TranscriptModel(snapshot: frame.entries, revision: frame.revision), session: frame.session?.sessionKey)
                for await message in events {
                    for line in announcer.lines(for: message) { Self.say(line) }
                    await sent.observe(message)
                }
            }
            for await line in Self.standardInputLines() {
                // Bytes that are not UTF-8 are refused, not rewritten into something else.
                guard let line else {
                    Self.say("Not sent: the line is not valid UTF-8 text.")
                    continue
                }
                let text = line.trimmingCharacters(in: .whitespaces)
                guard !text.isEmpty else { continue }
                switch SlashCommands.standard.read(text) {
                case .message(let message): await Self.send(message, bus: bus, sent: sent)
                case .misused(let words): Self.say(words)
                case .local(.help): Self.sayAll(Self.helpLines)
                case .local(.status):
                    do {
                        Self.sayAll(try await status().split(separator: "\n", omittingEmptySubsequences: false).map(String.init))
                    } catch {
                        Self.say("No status: \(error)")
                    }
                case .local(.restartSession(let message)):
                    Self.say(Self.restartWords(message))
                    await Self.send(message, bus: bus, sent: sent)
                case .local(.sendWhileBusy(let choice, let message)):
                    await Self.send(message, whileBusy: choice, bus: bus, sent: sent)
                case .local(let command):
                    if let outcome = await LocalCommandRunner.run(command, bus: bus) { Self.sayAll(Self.lines(for: outcome)) }
                }
            }
            // Input ended (a pipe): wait for what was sent to settle, then leave.
            await withTaskGroup(of: Void.self) { race in
                race.addTask { await sent.settled() }
                race.addTask { try? await Task.sleep(for: linger) }
                await race.next()
                race.cancelAll()
            }
            group.cancelAll()
        }
        presence.leave()
    }

    /// Sends a typed line as a message, and says when it is not sent or not confirmed.
    private static func send(_ text: String, whileBusy: WhileBusy? = nil, bus: any Bus, sent: SentMessages) async {
        let id = MessageID.random()
        do {
            _ = try await bus.request(SendMessageCommand.self, .init(id: id, content: text, whileBusy: whileBusy))
            await sent.add(id)
        } catch let error as BusError where error.wentUnanswered {
            say("Not confirmed: " + Conversation.unansweredSend + ".")
        } catch {
            say("Not sent: \(error)")
        }
    }

    /// What `/help` prints: the commands Tether handles itself and what any other line does.
    public static var helpLines: [String] {
        ["Tether handles these itself:"] + SlashCommands.standard.help.map { "  " + $0 }
    }

    /// What is said when `/new` or `/reset` is sent.
    static func restartWords(_ line: String) -> String {
        "\(line) sent: the gateway starts the session anew, its history empty, and answers in the conversation."
    }

    /// What a command carried out by ``LocalCommandRunner`` prints: a list under its title, the
    /// words, or the hits of a search, each on a line of its own.
    public static func lines(for outcome: LocalCommandRunner.Outcome) -> [String] {
        switch outcome {
        case .list(let title, let lines): return [title + ":"] + lines.map { "  " + $0 }
        case .words(let words): return [words]
        case .found(let reply, let words):
            guard !reply.hits.isEmpty else { return ["No stored message holds \(words)."] }
            let more = reply.nextBefore == nil ? "" : " (the newest \(reply.hits.count): tether search lists more)"
            return ["Found \(words), newest first\(more):"] + reply.hits.map { "  " + $0.plainLine }
        }
    }

    private static func sayAll(_ lines: [String]) {
        for line in lines { say(line) }
    }

    /// Lines of standard input, read on a thread of their own (a read blocks); nil for a
    /// line that is not valid UTF-8.
    private static func standardInputLines() -> AsyncStream<String?> {
        let (lines, continuation) = AsyncStream<String?>.makeStream()
        Thread.detachNewThread {
            var buffer: UnsafeMutablePointer<CChar>?
            var capacity = 0
            // A stream of its own on descriptor 0: nothing else reads standard input.
            let input = fdopen(STDIN_FILENO, "r")
            defer { free(buffer) }
            while let input {
                let count = getline(&buffer, &capacity, input)
                guard count >= 0, let buffer else { break }
                var bytes = UnsafeRawBufferPointer(start: buffer, count: count)
                if bytes.last == UInt8(ascii: "\n") { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
                if bytes.last == UInt8(ascii: "\r") { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
                continuation.yield(String(validating: bytes, as: UTF8.self))
            }
            continuation.finish()
        }
        return lines
    }

    private static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((TerminalSafe.visible(line) + "\n").utf8))
    }
}

/// The messages a plain session sent, until each is settled: delivered and answered (whole
/// or cut off), or ended otherwise (failed, expired, cancelled).
actor SentMessages {
    private var waiting: Set<MessageID> = []
    /// Settled before they were added (an answer can beat the send's own reply).
    private var settledEarly: Set<MessageID> = []
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func add(_ id: MessageID) {
        if settledEarly.remove(id) == nil { waiting.insert(id) }
        wakeIfSettled()
    }

    func observe(_ message: BusMessage) {
        switch message.topic {
        case .conversationDelivery:
            // Delivered is not settled yet: its answer is still to come.
            guard let update = try? message.decode(DeliveryUpdate.self), update.status.isFinal, update.status != .delivered else { return }
            settle(update.id)
        case .conversationMessage:
            guard let entry = try? message.decode(TranscriptEntry.self), let answered = entry.inReplyTo,
                entry.status == .received || entry.status == .incomplete
            else { return }
            settle(answered)
        default:
            break
        }
    }

    /// Returns once every message added is settled (at once when none waits), or on cancellation.
    func settled() async {
        guard !waiting.isEmpty else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { waiters.append($0) }
        } onCancel: {
            Task { await self.releaseWaiters() }
        }
    }

    private func settle(_ id: MessageID) {
        if waiting.remove(id) == nil { settledEarly.insert(id) }
        wakeIfSettled()
    }

    private func wakeIfSettled() {
        guard waiting.isEmpty else { return }
        releaseWaiters()
    }

    private func releaseWaiters() {
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }
}

/// Turns bus messages into the plain lines that announce them; silent about what changes nothing.
public struct PlainAnnouncer: Sendable {
    private var model: TranscriptModel
    private var phase: ConnectionPhase?
    private var banner = Banner()
    private var network: NetworkPath?
    private var botState: BotState?
    private var botDetail: String?
    private var session: String?
    private var finishing: String?
    private var storage = StorageNotices()
    /// The programs the supervisor holds back, as last said.
    private var misconfigured: [MisconfiguredPrograms.Program] = []
    /// The approvals already said to be waiting: each is said once, as it arrives or when the session starts.
    private var announcedApprovals: Set<String> = []
    private let formatter = TranscriptFormatter()

    /// - Parameter session: the session whose transcript was printed first.
    public init(model: TranscriptModel, session: String? = nil) {
        self.model = model
        self.session = session
    }

    /// Whether an entry published again brought only the model's thinking (from the gateway's
    /// history), which a line of text does not show: nothing to say again.
    static func onlyThinkingChanged(from before: TranscriptEntry?, to entry: TranscriptEntry) -> Bool {
        guard var same = before, entry.thinking != nil else { return false }
        same.thinking = entry.thinking
        same.revision = entry.revision
        same.gatewayID = entry.gatewayID
        return same == entry
    }

    public mutating func lines(for message: BusMessage) -> [String] {
        switch message.topic {
        case .conversationMessage:
            guard let entry = try? message.decode(TranscriptEntry.self) else { return [] }
            let before = model.entry(entry.id)
            guard let change = model.apply(entry) else { return [] }
            if case .updated = change, entry.sender == .user { return [] }
            // A tool call is said once, when it ends; thinking is not said.
            if let tool = entry.tool {
                return tool.state == .running || before?.tool.map({ $0.state != .running }) == true ? [] : [formatter.line(for: entry, shown: session)]
            }
            if Self.onlyThinkingChanged(from: before, to: entry) { return [] }
            return [formatter.line(for: entry, shown: session)]
        case .conversationDelivery:
            guard let update = try? message.decode(DeliveryUpdate.self), model.apply(update) != nil else { return [] }
            // The steps on the way are noise for a listener: say how it ended.
            guard update.status.isFinal else { return [] }
            return ["Message \(update.status.rawValue)" + (update.detail.map { ": \($0)" } ?? ".")]
        case .connectionState:
            guard let status = try? message.decode(ConnectionStatus.self), status.phase != phase else { return [] }
            phase = status.phase
            // The banner's rule decides between a first connection and a reconnection.
            let now = ContinuousClock.now
            banner.update(status, at: now)
            guard status.phase == .connected else { return ["Connection: \(status.words)"] }
            return banner.shown(at: now)?.tone == .good ? ["Connection: Reconnected."] : ["Connection: Connected."]
        case .networkPath:
            guard let path = try? message.decode(NetworkPath.self), path.satisfied != network?.satisfied || path.interface != network?.interface
            else { return [] }
            let first = network == nil
            network = path
            if first && path.satisfied { return [] }
            return [path.satisfied ? "Network: available through \(path.interface ?? "an interface") (\(path.kind?.rawValue ?? "other"))." : "Network: none."]
        case .conversationSession:
            guard let current = try? message.decode(ConversationSession.self), let key = current.sessionKey,
                key != session || current.finishing != finishing
            else { return [] }
            let changed = key != session
            session = key
            finishing = current.finishing
            let behind = current.finishing.map { " (\(current.finishingMessages ?? 0) sent before still finishing in \($0): lines from there name it)" } ?? ""
            return changed || current.finishing != nil ? ["Session: \(key)\(behind)."] : []
        case .botState:
            guard let activity = try? message.decode(BotActivity.self), activity.state != botState || activity.detail != botDetail else { return [] }
            botState = activity.state
            botDetail = activity.detail
            // Idle is said only with a reason (a reply that ended incomplete says so itself).
            guard activity.state != .idle else { return [] }
            return ["\(activity.botName) is \(activity.state.rawValue)…" + (activity.detail.map { " (\($0))" } ?? "")]
        case .storage:
            guard let report = try? message.decode(StorageReport.self) else { return [] }
            return storage.apply(report).map { "Storage: \($0)" }
        case .misconfigured:
            guard let held = try? message.decode(MisconfiguredPrograms.self), held.programs != misconfigured else { return [] }
            let fixed = misconfigured.filter { old in !held.programs.contains { $0.name == old.name } }
            let lines =
                held.programs.filter { !misconfigured.contains($0) }.map { $0.words + "." }
                + fixed.map { "\($0.name) is no longer held back." }
            misconfigured = held.programs
            return lines
        case .approvals:
            guard let update = try? message.decode(ApprovalsUpdate.self) else { return [] }
            var lines: [String] = []
            if let ended = update.ended, !message.header.replay, announcedApprovals.remove(ended.approval.id) != nil {
                lines.append(ApprovalWords.ended(ended).capitalizedFirst + ".")
            }
            for approval in update.pending where announcedApprovals.insert(approval.id).inserted {
                lines.append(ApprovalWords.arrived(approval, now: Date()).capitalizedFirst + ".")
            }
            return lines
        default:
            return []
        }
    }
}
