import Foundation
import HummingbirdWebSocket
import Logging
import TetherWire

/// One client's WebSocket connection to the development gateway.
struct GatewaySession {
    let connection: Int
    let bot: DemoBot
    let record: GatewayRecord
    let outbound: WebSocketOutboundWriter
    let faults: FaultSwitch
    let logger: Logger
    private let codec = WireCodec()
    /// The server's sequence numbers, from 1 on each connection.
    private var sequence = 0
    /// Frames written on this connection.
    private var framesSent = 0

    /// Thrown to end the connection when the close-after-frames fault says so.
    struct Closed: Error {}

    init(connection: Int, bot: DemoBot, record: GatewayRecord, outbound: WebSocketOutboundWriter, faults: FaultSwitch, logger: Logger) {
        self.connection = connection
        self.bot = bot
        self.record = record
        self.outbound = outbound
        self.faults = faults
        self.logger = logger
    }

    mutating func handle(_ text: String) async throws {
        let message: WireMessage
        do {
            message = try codec.decode(text)
        } catch {
            logger.warning("ignored a malformed frame", metadata: ["gateway.connection": "\(connection)", "gateway.error": "\(error)"])
            return
        }
        switch message {
        case .chatMessage(let envelope):
            let chat = envelope.payload
            let isNew = await record.add(chat, connection: connection)
            // A repeated id is acknowledged again and not answered twice.
            try await send(MessageAck(messageID: chat.id, status: .received), type: .messageAck)
            if isNew { try await answer(chat) }
        case .ping(let envelope):
            try await write(try codec.encodePong(sequence: envelope.sequence))
        case .pong, .messageAck, .botState, .streamingChunk:
            break
        case .unknown(let type, _, _):
            logger.debug("ignored an unknown message type", metadata: ["gateway.type": "\(type)"])
        }
    }

    private mutating func answer(_ chat: ChatMessage) async throws {
        try await send(BotStateUpdate(state: .thinking, botName: bot.name), type: .botState)
        let replyID = MessageID.random()
        let chunks = bot.chunks(of: bot.reply(to: chat.content))
        for (index, chunk) in chunks.enumerated() {
            try await Task.sleep(for: bot.chunkDelay)
            let isFinal = index == chunks.count - 1
            try await send(StreamingChunk(messageID: replyID, chunkIndex: index, content: chunk, isFinal: isFinal), type: .streamingChunk)
        }
        try await send(BotStateUpdate(state: .idle, botName: bot.name), type: .botState)
    }

    private mutating func send<Payload: Codable & Sendable>(_ payload: Payload, type: WireMessageType) async throws {
        sequence += 1
        try await write(try codec.encode(payload, type: type.rawValue, sequence: sequence, serverTimestamp: Date()))
    }

    private mutating func write(_ data: Data) async throws {
        let faults = self.faults.current
        if faults.frameDelayMilliseconds > 0 { try await Task.sleep(for: .milliseconds(faults.frameDelayMilliseconds)) }
        if faults.sendMalformedFrames { try await outbound.write(.text("{\"type\": \"chat.message\", \"payload\": [malformed")) }
        try await outbound.write(.text(String(decoding: data, as: UTF8.self)))
        framesSent += 1
        if let limit = faults.closeAfterFrames, framesSent >= limit { throw Closed() }
    }
}
