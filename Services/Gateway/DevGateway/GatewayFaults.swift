public import Foundation
import NIOCore
import Synchronization
import TetherWire

/// Faults the development gateway can inject, switched at run time through
/// `POST /admin/faults` or at start with `--faults`, so people and tests can watch Tether cope.
public struct GatewayFaults: Codable, Equatable, Sendable {
    /// Refuse every WebSocket upgrade (HTTP 503).
    public var refuseConnections = false
    /// Close each connection after it has sent this many frames.
    public var closeAfterFrames: Int?
    /// Stop reading open connections: no pongs, no answers, while TCP still looks open.
    public var ignorePings = false
    /// Wait this long before each frame sent.
    public var frameDelayMilliseconds = 0
    /// Close this fraction (0 to 1) of new connections right after the upgrade.
    public var dropConnectionFraction = 0.0
    /// Send a malformed frame before each real one.
    public var sendMalformedFrames = false
    /// Reject every token (HTTP 401).
    public var rejectToken = false
    /// Read every frame and drop it, answering nothing (no acknowledgement, reply or pong),
    /// while TCP stays open: a gateway gone silent. What it dropped is never processed.
    public var silent = false

    // A peer without Tether's additions, and its streams' faults.

    /// Behave as a gateway that knows only the seeds' JSON: no duplicate suppression (a
    /// repeated id is answered again and recorded again), no `session.resume` (ignored as an
    /// unknown type, nothing replayed), no `replyTo` on chunks, one message answered at a
    /// time, each acknowledged after its reply.
    public var strictSeed = false
    /// Wait this long before each acknowledgement.
    public var acknowledgementDelayMilliseconds = 0
    /// Send each chunk twice.
    public var duplicateChunks = false
    /// Send the chunks of a reply in pairs swapped (1, 0, 3, 2, …).
    public var reorderChunks = false
    /// Leave out the chunk of this index from every reply (`null` to stop).
    public var dropChunkIndex: Int?
    /// Number the chunk of this index in every reply and keep it for a resume, but do not
    /// write it: a frame lost between the gateway and protod (`null` to stop).
    public var loseChunkIndex: Int?
    /// Never send a reply's final chunk (nor the bot's idle after it).
    public var omitFinalChunk = false
    /// Greet each new connection with a `system.ping`, a frame of a type no peer knows and a bot
    /// `chat.message`, written in the same write as the `101` response.
    public var greetOnOpen = false

    // The OpenClaw dialect's faults.

    /// Drop this fraction (0 to 1) of `chat` deltas to each connection, as a gateway does for a
    /// slow client (`dropIfSlow`); finals are never dropped.
    public var dropDeltaFraction = 0.0
    /// Skip one event sequence number on each connection, once (set it again for another gap).
    public var skipSequence = false
    /// Send no `tick` events.
    public var stopTicking = false
    /// Ask a person to approve every device not yet paired, loopback ones too.
    public var requirePairing = false
    /// The model fails every attempt: the gateway sends `agent` lifecycle errors while it
    /// retries, four times, and no `chat` event at all.
    public var modelFailure = false
    /// This fraction (0 to 1) of runs fails as `modelFailure` does.
    public var modelFailureFraction = 0.0
    /// As today's gateways report it (protocol 4): the model is rate limited this many times in
    /// each run, a `chat` `status` event with its `retry` each, `modelRetryDelay` apart, then
    /// it answers.
    public var rateLimitRetries = 0
    /// As today's gateways report it (protocol 4): every run fails and ends with a `chat`
    /// `error` event of this `errorKind` (`refusal`, `timeout`, `rate_limit`,
    /// `context_length`, `unknown`); nil: none.
    public var modelErrorKind: String?

    public init() {}

    private enum CodingKeys: String, CodingKey {
        case refuseConnections, closeAfterFrames, ignorePings, frameDelayMilliseconds, dropConnectionFraction, sendMalformedFrames, rejectToken
        case silent, strictSeed, acknowledgementDelayMilliseconds, duplicateChunks, reorderChunks, dropChunkIndex, loseChunkIndex, omitFinalChunk,
            greetOnOpen
        case dropDeltaFraction, skipSequence, stopTicking, requirePairing, modelFailure, modelFailureFraction, rateLimitRetries, modelErrorKind
    }

    /// Reads a full or partial set: absent fields keep `base`'s values.
    public static func decode(_ data: Data, over base: GatewayFaults) throws -> GatewayFaults {
        let decoder = JSONDecoder()
        decoder.userInfo[baseKey] = base
        return try decoder.decode(GatewayFaults.self, from: data)
    }

    private static let baseKey = CodingUserInfoKey(rawValue: "tether.faults.base")!

    public init(from decoder: any Decoder) throws {
        var faults = decoder.userInfo[Self.baseKey] as? GatewayFaults ?? GatewayFaults()
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let value = try container.decodeIfPresent(Bool.self, forKey: .refuseConnections) { faults.refuseConnections = value }
        if container.contains(.closeAfterFrames) { faults.closeAfterFrames = try container.decodeIfPresent(Int.self, forKey: .closeAfterFrames) }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .ignorePings) { faults.ignorePings = value }
        if let value = try container.decodeIfPresent(Int.self, forKey: .frameDelayMilliseconds) { faults.frameDelayMilliseconds = max(0, value) }
        if let value = try container.decodeIfPresent(Double.self, forKey: .dropConnectionFraction) { faults.dropConnectionFraction = min(max(value, 0), 1) }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .sendMalformedFrames) { faults.sendMalformedFrames = value }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .rejectToken) { faults.rejectToken = value }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .silent) { faults.silent = value }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .strictSeed) { faults.strictSeed = value }
        if let value = try container.decodeIfPresent(Int.self, forKey: .acknowledgementDelayMilliseconds) {
            faults.acknowledgementDelayMilliseconds = max(0, value)
        }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .duplicateChunks) { faults.duplicateChunks = value }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .reorderChunks) { faults.reorderChunks = value }
        if container.contains(.dropChunkIndex) { faults.dropChunkIndex = try container.decodeIfPresent(Int.self, forKey: .dropChunkIndex) }
        if container.contains(.loseChunkIndex) { faults.loseChunkIndex = try container.decodeIfPresent(Int.self, forKey: .loseChunkIndex) }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .omitFinalChunk) { faults.omitFinalChunk = value }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .greetOnOpen) { faults.greetOnOpen = value }
        if let value = try container.decodeIfPresent(Double.self, forKey: .dropDeltaFraction) { faults.dropDeltaFraction = min(max(value, 0), 1) }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .skipSequence) { faults.skipSequence = value }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .stopTicking) { faults.stopTicking = value }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .requirePairing) { faults.requirePairing = value }
        if let value = try container.decodeIfPresent(Bool.self, forKey: .modelFailure) { faults.modelFailure = value }
        if let value = try container.decodeIfPresent(Double.self, forKey: .modelFailureFraction) { faults.modelFailureFraction = min(max(value, 0), 1) }
        if let value = try container.decodeIfPresent(Int.self, forKey: .rateLimitRetries) { faults.rateLimitRetries = max(0, value) }
        if container.contains(.modelErrorKind) { faults.modelErrorKind = try container.decodeIfPresent(String.self, forKey: .modelErrorKind) }
        self = faults
    }
}

extension GatewayFaults {
    /// The chunks of a reply as these faults send them: each with its index, the last one
    /// final, then left out, swapped or doubled.
    func sending(_ pieces: [String], messageID: MessageID, replyTo: MessageID?) -> [StreamingChunk] {
        var chunks = pieces.enumerated().map { index, piece in
            StreamingChunk(messageID: messageID, chunkIndex: index, content: piece, isFinal: index == pieces.count - 1, replyTo: replyTo)
        }
        if omitFinalChunk { chunks.removeLast() }
        if let dropChunkIndex { chunks.removeAll { $0.chunkIndex == dropChunkIndex } }
        if reorderChunks {
            for index in stride(from: 0, to: chunks.count - 1, by: 2) { chunks.swapAt(index, index + 1) }
        }
        if duplicateChunks { chunks = chunks.flatMap { [$0, $0] } }
        return chunks
    }
}

/// The faults in force, shared by every connection, and the open connections' channels.
final class FaultSwitch: Sendable {
    private struct State {
        var faults: GatewayFaults
        var channels: [ObjectIdentifier: any Channel] = [:]
    }

    private let state: Mutex<State>

    init(_ initial: GatewayFaults) {
        state = Mutex(State(faults: initial))
    }

    var current: GatewayFaults {
        state.withLock { $0.faults }
    }

    /// Switches faults; `ignorePings` freezes or thaws every open connection at once.
    func set(_ new: GatewayFaults) {
        let channels = state.withLock { state in
            state.faults = new
            return Array(state.channels.values)
        }
        for channel in channels { Self.freeze(channel, new.ignorePings) }
    }

    func register(_ channel: any Channel) {
        let ignorePings = state.withLock { state in
            state.channels[ObjectIdentifier(channel)] = channel
            return state.faults.ignorePings
        }
        if ignorePings { Self.freeze(channel, true) }
    }

    func unregister(_ channel: any Channel) {
        _ = state.withLock { $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// A frozen connection reads nothing from its socket: no frame is processed and no ping
    /// answered, while TCP stays open. That is what a dead peer looks like from outside.
    private static func freeze(_ channel: any Channel, _ frozen: Bool) {
        channel.setOption(ChannelOptions.autoRead, value: !frozen).whenSuccess {
            if !frozen { channel.read() }
        }
    }
}
