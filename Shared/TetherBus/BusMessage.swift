public import FoundationEssentials
import Synchronization
public import TetherSchema
import TetherWire

/// A message received from the bus: topic, header and JSON body.
public struct BusMessage: Sendable {
    public let topic: Topic
    public let header: BusHeader
    /// The JSON body, as published.
    public let body: Data

    public init(topic: Topic, header: BusHeader, body: Data) {
        self.topic = topic
        self.header = header
        self.body = body
    }

    /// Decodes the body. A body that does not decode is counted (``BusDrop/undecodable(_:)``)
    /// in this process's drops, which its heartbeat shows.
    public func decode<Payload: Decodable>(_ type: Payload.Type) throws(BusError) -> Payload {
        do {
            if let direct = type as? any DirectJSONBody.Type {
                return try body.withUnsafeBytes { try direct.init(jsonBytes: $0) } as! Payload
            }
            return try BusSchema.decoder.decode(type, from: body)
        } catch {
            throw undecodable(as: Payload.self, error)
        }
    }

    /// Decodes a body that has a reader of its own, chosen where the type is known rather than
    /// by a cast at run time (some 600 instructions); counted as ``decode(_:)`` counts.
    public func decode<Payload: DirectJSONBody>(_ type: Payload.Type) throws(BusError) -> Payload {
        do {
            return try body.withUnsafeBytes { try Payload(jsonBytes: $0) }
        } catch {
            throw undecodable(as: Payload.self, error)
        }
    }

    private func undecodable(as type: Any.Type, _ error: any Error) -> BusError {
        BusDrop.undecodableBodies.withLock { $0[BusDrop.undecodable(topic.name), default: 0] += 1 }
        BusDrop.counted.notify()
        return .encoding("body of \(topic) from \(header.source) is not a \(type): \(error)")
    }
}

/// The kinds of bus message a program drops, as counted in ``BusCounters/dropped`` and shown
/// by its heartbeat (`tether status --json`).
public enum BusDrop {
    /// Received, and not a message: the wrong number of frames, a topic that is not UTF-8, a header that is not a bus header.
    public static let malformed = "malformed"
    /// Received with a body over its topic's limit (``BusSchema/maximumBodySize(of:)``).
    public static let oversized = "oversized"
    /// Received with a header whose schema version this program does not know.
    public static let unknownSchema = "unknownSchema"
    /// Received, and a subscriber of this program had no room for it.
    public static let lagged = "lagged"
    /// Not published: the publisher's queue was full.
    public static let publishRefused = "publishRefused"
    /// A command that is not one (answered `malformed`).
    public static let malformedCommand = "malformedCommand"
    /// A command over its method's body limit (answered `tooLarge`).
    public static let oversizedCommand = "oversizedCommand"
    /// A command the serving program had no room to queue.
    public static let commandOverflow = "commandOverflow"

    /// A body of `topic` that did not decode as the schema says.
    public static func undecodable(_ topic: String) -> String { "undecodable \(topic)" }

    /// Bodies that did not decode, by kind: counted where they are read, anywhere in the process.
    static let undecodableBodies = Mutex<[String: UInt64]>([:])

    /// Notified whenever this process counts a drop of any kind, so that its heartbeat can
    /// say so at once instead of on a timer.
    public static let counted = ChangeSignal()
}

extension BusMessage {
    /// Reads a message as it comes off the bus: three frames, a UTF-8 topic, a bus header and
    /// a body within its topic's limit (``BusSchema/maximumBodySize(of:)``). Anything else
    /// throws, saying what is wrong.
    public init(frames: [[UInt8]]) throws(BusError) {
        guard frames.count == 3 else { throw .malformedMessage("expected 3 frames (topic, header, body), got \(frames.count)") }
        let read = frames[0].withUnsafeBytes { topic in
            frames[1].withUnsafeBytes { header in frames[2].withUnsafeBytes { body in Self.read(topic: topic, header: header, body: body) } }
        }
        self = try read.get()
    }

    /// Reads a message from its three frames where they lie (the body is copied once, into
    /// ``body``): what ``init(frames:)`` reads, with the same errors.
    static func read(topic: UnsafeRawBufferPointer, header: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer) -> Result<BusMessage, BusError> {
        guard let name = topic.withMemoryRebound(to: UInt8.self, DirectJSON.string(utf8:)), !name.isEmpty else {
            return .failure(.malformedMessage("topic is empty or not UTF-8"))
        }
        let limit = BusSchema.maximumBodySize(of: .topic(name))
        guard body.count <= limit else {
            return .failure(.malformedMessage("body of \(body.count) bytes is over the limit of \(limit) for topic '\(name)'"))
        }
        guard let header = try? BusHeader(jsonBytes: header) else {
            return .failure(.malformedMessage("header of topic '\(name)' is not a bus header"))
        }
        return .success(BusMessage(topic: Topic(name), header: header, body: Data(body)))
    }
}

/// Bus traffic counters of one client.
public struct BusCounters: Sendable, Hashable {
    /// Messages published.
    public var published: UInt64 = 0
    /// Messages received and handed to subscribers.
    public var received: UInt64 = 0
    /// Every message dropped, by kind (``BusDrop``).
    public var dropped: [String: UInt64] = [:]
    /// Every drop counted, of any kind.
    private(set) var droppedInAll: UInt64 = 0

    public init() {}

    /// Counts a message dropped as `kind`.
    mutating func drop(_ kind: String, count: UInt64 = 1) {
        guard count > 0 else { return }
        dropped[kind, default: 0] += count
        droppedInAll += count
    }

    /// Adds what `other` counted.
    mutating func add(_ other: BusCounters) {
        published += other.published
        received += other.received
        for (kind, count) in other.dropped { drop(kind, count: count) }
    }
}

/// A command received on an endpoint this program serves.
public struct IncomingCommand: Sendable {
    /// The endpoint it came in on.
    public let endpoint: String
    /// The caller's request id: the same across the caller's retries.
    public let requestID: String
    /// The command's method name.
    public let method: String
    /// The JSON request body.
    public let body: Data
    /// Who sent it: the ZeroMQ routing identity, or an in-memory bus's own key.
    let identity: [UInt8]

    public init(endpoint: String, requestID: String, method: String, body: Data, identity: [UInt8]) {
        self.endpoint = endpoint
        self.requestID = requestID
        self.method = method
        self.body = body
        self.identity = identity
    }

    /// The sender's identity, for a bus that routes replies itself.
    public var sender: [UInt8] { identity }
}

/// The counters, shared by the client and its socket thread.
final class BusCounterBox: Sendable {
    private let counters = Mutex(BusCounters())

    func update(_ body: (inout BusCounters) -> Void) {
        let dropped = counters.withLock { counters in
            let before = counters.droppedInAll
            body(&counters)
            return counters.droppedInAll != before
        }
        if dropped { BusDrop.counted.notify() }
    }

    var snapshot: BusCounters {
        counters.withLock { $0 }
    }
}
