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
    private let faults: FaultSwitch
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

    /// Writes a frame; closes the connection when the close-after-frames fault says so.
    func write(_ text: String) async throws {
        let faults = self.faults.current
        if faults.frameDelayMilliseconds > 0 { try await Task.sleep(for: .milliseconds(faults.frameDelayMilliseconds)) }
        if faults.sendMalformedFrames { try await outbound.write(.text(#"{"type": "chat.message", "payload": [malformed"#)) }
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

    init(bot: DemoBot, record: GatewayRecord, logger: Logger) {
        self.bot = bot
        self.record = record
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
        switch message {
        case .chatMessage(let envelope):
            let chat = envelope.payload
            let isNew = await record.add(chat, connection: link.connection)
            // A repeated id is acknowledged again and not answered twice.
            await emit(MessageAck(messageID: chat.id, status: .received), type: .messageAck)
            if isNew {
                Task { await self.answer(chat) }
            }
        case .ping(let envelope):
            try await link.write(String(decoding: try codec.encodePong(sequence: envelope.sequence), as: UTF8.self))
        case .sessionResume(let envelope):
            // Replayed apart, so that what the client sends meanwhile is read and acknowledged
            // (the acknowledgements join the replay, in order).
            Task { try? await self.resume(envelope.payload, on: link) }
        case .pong, .messageAck, .botState, .streamingChunk, .sessionResumed:
            break
        case .unknown(let type, _, _):
            logger.debug("ignored an unknown message type", metadata: ["gateway.type": "\(type)"])
        }
    }

    private func answer(_ chat: ChatMessage) async {
        await emit(BotStateUpdate(state: .thinking, botName: bot.name), type: .botState)
        let replyID = MessageID.random()
        let chunks = bot.chunks(of: bot.reply(to: chat.content))
        for (index, chunk) in chunks.enumerated() {
            try? await Task.sleep(for: bot.chunkDelay)
            await emit(StreamingChunk(messageID: replyID, chunkIndex: index, content: chunk, isFinal: index == chunks.count - 1), type: .streamingChunk)
        }
        await emit(BotStateUpdate(state: .idle, botName: bot.name), type: .botState)
    }

    /// Numbers, keeps and sends a frame.
    private func emit<Payload: Codable & Sendable>(_ payload: Payload, type: WireMessageType) async {
        sequence += 1
        guard let data = try? codec.encode(payload, type: type.rawValue, sequence: sequence, serverTimestamp: Date()) else { return }
        let text = String(decoding: data, as: UTF8.self)
        history.append((sequence, text))
        if history.count > historyLimit { history.removeFirst(history.count - historyLimit) }
        guard let link, link.isLive else { return }
        do {
            try await link.write(text)
        } catch {
            // The connection is gone; the frame waits in the history for the client's resume.
            detach(link)
        }
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
        while let next = history.first(where: { $0.sequence > last }) {
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
