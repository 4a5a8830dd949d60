import Foundation
public import ServiceLifecycle
public import TetherBus
import TetherSchema
import TetherService
import TetherWire

/// `tether watch`: the stored transcript, then every change, while announcing itself as a front end.
/// With `json`, one JSON object a line (`{"topic", "body"}`); without, the lines a person reads.
public struct ConversationPrinter: Service {
    private let bus: any Bus
    private let json: Bool
    private let history: Int
    private let formatter = TranscriptFormatter()

    /// - Parameter history: how many stored messages to print first.
    public init(bus: any Bus, json: Bool, history: Int) {
        self.bus = bus
        self.json = json
        self.history = history
    }

    public func run() async throws {
        let conversation = Conversation(bus: bus)
        let presence = PresenceAnnouncer(bus: bus, frontEnd: "tether watch", attention: .unattended)
        // Subscribe first, then read the snapshot: nothing falls between the two.
        let events = try await bus.subscribe(to: ["conv.", Topic.approvals.name], confirm: true)
        let frame = try await conversation.firstFrame(frontEnd: "tether watch", limit: history)
        let first = frame.session?.sessionKey
        if !json, let first { emit("session \(first)") }
        for entry in frame.entries {
            emit(json ? JSONLine.encode(topic: Topic.conversationMessage, entry) : formatter.line(for: entry, shown: first))
        }
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await presence.run() }
                var model = TranscriptModel(snapshot: frame.entries, revision: frame.revision)
                var shown = first
                for await message in events {
                    show(message, in: &model, shown: &shown)
                }
                group.cancelAll()
            }
        }
        presence.leave()
    }

    /// Prints what `message` changed; `shown` is the session chatted in, as last said.
    private func show(_ message: BusMessage, in model: inout TranscriptModel, shown: inout String?) {
        switch message.topic {
        case .conversationMessage:
            guard let entry = try? message.decode(TranscriptEntry.self) else { return }
            let before = model.entry(entry.id)
            guard let change = model.apply(entry) else { return }
            if json {
                emit(JSONLine.encode(topic: message.topic, raw: message.body))
            } else if case .added = change {
                emit(formatter.line(for: entry, shown: shown))
            } else if entry.tool != nil {
                // A tool call's line again when its state changed (it ended).
                if before?.tool?.state != entry.tool?.state { emit(formatter.line(for: entry, shown: shown)) }
            } else if entry.sender != .user, !PlainAnnouncer.onlyThinkingChanged(from: before, to: entry) {
                // A reply completed or cut off; a user message's status shows through its delivery updates.
                emit(formatter.line(for: entry, shown: shown))
            }
        case .conversationSession:
            guard let session = try? message.decode(ConversationSession.self) else { return }
            if json { return emit(JSONLine.encode(topic: message.topic, raw: message.body)) }
            guard let key = session.sessionKey, key != shown else { return }
            shown = key
            emit("session \(key)" + (session.finishing.map { " (messages sent before still finishing in \($0): lines from there name it)" } ?? ""))
        case .conversationDelivery:
            guard let update = try? message.decode(DeliveryUpdate.self), model.apply(update) != nil else { return }
            emit(json ? JSONLine.encode(topic: message.topic, raw: message.body) : formatter.line(for: update))
        case .approvals:
            guard let update = try? message.decode(ApprovalsUpdate.self) else { return }
            if json { return emit(JSONLine.encode(topic: message.topic, raw: message.body)) }
            if let ended = update.ended, !message.header.replay { emit(ApprovalWords.ended(ended)) }
            if let arrived = update.arrived, !message.header.replay { emit(ApprovalWords.arrived(arrived, now: Date())) }
            if message.header.replay { for approval in update.pending { emit(ApprovalWords.arrived(approval, now: Date())) } }
        default:
            if json { emit(JSONLine.encode(topic: message.topic, raw: message.body)) }
        }
    }

    private func emit(_ line: String) {
        FileHandle.standardOutput.write(Data(((json ? line : TerminalSafe.visible(line)) + "\n").utf8))
    }
}

/// JSON lines for `--json` output.
enum JSONLine {
    static func encode(topic: Topic, _ value: some Encodable) -> String {
        encode(topic: topic, raw: (try? BusSchema.makeEncoder().encode(value)) ?? Data("null".utf8))
    }

    static func encode(topic: Topic, raw body: Data) -> String {
        let topicJSON = String(decoding: (try? JSONEncoder().encode(topic.name)) ?? Data(), as: UTF8.self)
        return "{\"topic\":\(topicJSON),\"body\":\(String(decoding: body, as: UTF8.self))}"
    }
}
