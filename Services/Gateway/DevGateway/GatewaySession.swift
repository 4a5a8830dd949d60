import Foundation
import HummingbirdWebSocket
import Logging
import NIOWebSocket
import Synchronization
import TetherWire

/// One client's WebSocket connection, with the faults that apply to what is written to it.
final class GatewayLink: Sendable {
    let connection: Int
    private let outbound: WebSocketOutboundWriter
    let faults: FaultSwitch
    private let state = Mutex(LinkState())

    private struct LinkState {
        var framesSent = 0
        /// False while a replay is under way: new frames wait in the history for it.
        var live = true
        var closed = false
    }

    init(connection: Int, outbound: WebSocketOutboundWriter, faults: FaultSwitch) {
        self.connection = connection
        self.outbound = outbound
        self.faults = faults
    }

    var isLive: Bool {
        get { state.withLock { $0.live && !$0.closed } }
        set { state.withLock { $0.live = newValue } }
    }

    /// Writes a frame; closes the connection when the close-after-frames fault says so. An
    /// `immediate` frame (a pong: like a WebSocket pong, it answers for the connection, not
    /// for the bot) goes past the delay and the malformed frames.
    func write(_ text: String, immediate: Bool = false) async throws {
        let faults = self.faults.current
        if !immediate {
            if faults.frameDelayMilliseconds > 0 { try await Task.sleep(for: .milliseconds(faults.frameDelayMilliseconds)) }
            if faults.sendMalformedFrames { try await outbound.write(.text(#"{"type": "chat.message", "payload": [malformed"#)) }
        }
        try await outbound.write(.text(text))
        let sent = state.withLock { state in
            state.framesSent += 1
            return state.framesSent
        }
        if let limit = faults.closeAfterFrames, sent >= limit {
            state.withLock { $0.closed = true }
            try await outbound.close(.normalClosure, reason: "closed after \(limit) frames (fault injection)")
        }
    }
}

/// The gateway's conversation. Every frame it sends gets the next server sequence and is
/// kept (the last 10,000) so that a client that reconnects can ask for what it missed; it
/// goes to the connection attached now, if any. The bot answers whether or not a
/// connection is attached: a reply cut by a dropped connection is completed by the replay.
actor GatewayConversation {
    let sessionID = UUID().uuidString.lowercased()
    private let bot: DemoBot
    private let record: GatewayRecord
    private let logger: Logger
    private let codec = WireCodec()
    private var sequence = 0
    private var history: [(sequence: Int, text: String)] = []
    private let historyLimit = 10_000
    private var link: GatewayLink?
    private let faults: FaultSwitch
    /// A seed-only peer's answer under way: the next one waits for it.
    private var lastAnswer: Task<Void, Never>?

    init(bot: DemoBot, record: GatewayRecord, faults: FaultSwitch, logger: Logger) {
        self.bot = bot
        self.record = record
        self.faults = faults
        self.logger = logger
    }

    func attach(_ link: GatewayLink) {
        self.link = link
    }

    func detach(_ link: GatewayLink) {
        if self.link === link { self.link = nil }
    }

    /// Handles a text frame from a client.
    func handle(_ text: String, from link: GatewayLink) async throws {
        let message: WireMessage
        do {
            message = try codec.decode(text)
        } catch {
            logger.warning("ignored a malformed frame", metadata: ["gateway.connection": "\(link.connection)", "gateway.error": "\(error)"])
            return
        }
        let faults = link.faults.current
        guard !faults.silent else {
            logger.debug("dropped a frame (fault injection: silent)", metadata: ["gateway.connection": "\(link.connection)"])
            return
        }
        switch message {
        case .chatMessage(let envelope):
            let chat = envelope.payload
            let isNew = await record.add(chat, connection: link.connection, keepingRepeats: faults.strictSeed)
            if faults.strictSeed {
                // One message at a time, each acknowledged after its reply.
                let previous = lastAnswer
                lastAnswer = Task {
                    await previous?.value
                    await self.answer(chat, replyTo: nil)
                    await self.acknowledge(chat.id)
                }
                return
            }
            // A repeated id is acknowledged again and not answered twice.
            if faults.acknowledgementDelayMilliseconds > 0 {
                Task { await self.acknowledge(chat.id) }
            } else {
                await emit(MessageAck(messageID: chat.id, status: .received), type: .messageAck)
            }
            if isNew {
                Task { await self.answer(chat, replyTo: chat.id) }
            }
        case .ping(let envelope):
            try await link.write(String(decoding: try codec.encodePong(sequence: envelope.sequence), as: UTF8.self), immediate: true)
        case .sessionResume(let envelope):
            guard !faults.strictSeed else {
                logger.debug("ignored session.resume (a seed-only peer does not know it)")
                return
            }
            // Replayed apart, so that what the client sends meanwhile is read and acknowledged
            // (the acknowledgements join the replay, in order).
            Task { try? await self.resume(envelope.payload, on: link) }
        case .pong, .messageAck, .botState, .streamingChunk, .sessionResumed:
            break
        case .unknown(let type, _, _):
            logger.debug("ignored an unknown message type", metadata: ["gateway.type": "\(type)"])
        }
    }

    /// How many frames ``greet()`` writes.
    static let greetingFrames = 3

    /// Greets the connection just attached: a ping, a frame of a type no peer knows, and a
    /// message from the bot, numbered and kept as every frame is.
    func greet() async {
        await emit(HeartbeatPayload(timestamp: Date()), type: WireMessageType.ping.rawValue)
        await emit(["note": "a frame of a type no peer knows"], type: "gateway.greeting")
        await emit(
            ChatMessage(content: "Hello from \(bot.name).", sender: .bot(name: bot.name), status: .delivered), type: WireMessageType.chatMessage.rawValue)
    }

    /// Acknowledges a message, after the acknowledgement delay in force.
    private func acknowledge(_ id: MessageID) async {
        let delay = faults.current.acknowledgementDelayMilliseconds
        if delay > 0 { try? await Task.sleep(for: .milliseconds(delay)) }
        await emit(MessageAck(messageID: id, status: .received), type: .messageAck)
    }

    /// Thinks, streams the reply (naming the message it answers, unless `replyTo` is nil)
    /// with the stream faults in force, then goes idle.
    private func answer(_ chat: ChatMessage, replyTo: MessageID?) async {
        await emit(BotStateUpdate(state: .thinking, botName: bot.name), type: .botState)
        let faults = self.faults.current
        let chunks = faults.sending(bot.chunks(of: bot.reply(to: chat.content)), messageID: .random(), replyTo: replyTo)
        for chunk in chunks {
            try? await Task.sleep(for: bot.chunkDelay)
            await emit(chunk, type: .streamingChunk, write: chunk.chunkIndex != faults.loseChunkIndex)
        }
        guard !faults.omitFinalChunk else { return }
        await emit(BotStateUpdate(state: .idle, botName: bot.name), type: .botState)
    }

    /// Numbers, keeps and sends a frame.
    private func emit<Payload: Codable & Sendable>(_ payload: Payload, type: WireMessageType, write: Bool = true) async {
        await emit(payload, type: type.rawValue, write: write)
    }

    /// `write` false: numbered and kept, not written (the `loseChunkIndex` fault).
    private func emit<Payload: Codable & Sendable>(_ payload: Payload, type: String, write: Bool = true) async {
        sequence += 1
        guard let data = try? codec.encode(payload, type: type, sequence: sequence, serverTimestamp: Date()) else { return }
        let text = String(decoding: data, as: UTF8.self)
        history.append((sequence, text))
        // Trimmed in halves, so that a long stream does not move the whole history at each frame.
        if history.count >= 2 * historyLimit { history.removeFirst(history.count - historyLimit) }
        guard write, let link, link.isLive else { return }
        do {
            try await link.write(text)
        } catch {
            // The connection is gone; the frame waits in the history for the client's resume.
            detach(link)
        }
    }

    /// The first kept frame after `sequence`: found where it would be if frames were kept one
    /// number after another, as they are unless one could not be encoded.
    private static func frame(after sequence: Int, in history: [(sequence: Int, text: String)]) -> (sequence: Int, text: String)? {
        guard let first = history.first else { return nil }
        let index = max(0, sequence + 1 - first.sequence)
        if index < history.count, history[index].sequence > sequence, index == 0 || history[index - 1].sequence <= sequence { return history[index] }
        return history.first { $0.sequence > sequence }
    }

    /// Sends again every frame after the client's last, then says how it went.
    private func resume(_ request: SessionResume, on link: GatewayLink) async throws {
        let sameSession = request.sessionID == sessionID
        var last = sameSession ? request.lastSequence : sequence
        let oldest = history.first?.sequence ?? sequence + 1
        let complete = sameSession && last + 1 >= oldest
        link.isLive = false
        var replayed = 0
        // Frames emitted while this loop waits on the connection join the history; the loop picks them up.
        while let next = Self.frame(after: last, in: history) {
            try await link.write(next.text)
            last = next.sequence
            replayed += 1
        }
        link.isLive = true
        let resumed = SessionResumed(sessionID: sessionID, lastSequence: sequence, replayed: replayed, complete: complete)
        try await link.write(String(decoding: try codec.encode(resumed, type: WireMessageType.sessionResumed.rawValue, sequence: sequence), as: UTF8.self))
        logger.info(
            "session resumed",
            metadata: ["gateway.connection": "\(link.connection)", "gateway.replayed": "\(replayed)", "gateway.complete": "\(complete)"])
    }
}
