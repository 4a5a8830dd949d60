public import Foundation
public import TetherSchema
import Synchronization

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

    /// Decodes the body.
    public func decode<Payload: Decodable>(_ type: Payload.Type) throws(BusError) -> Payload {
        do {
            return try BusSchema.makeDecoder().decode(type, from: body)
        } catch {
            throw .encoding("body of \(topic) from \(header.source) is not a \(Payload.self): \(error)")
        }
    }
}

/// Bus traffic counters of one client.
public struct BusCounters: Sendable, Hashable {
    /// Messages published.
    public var published: UInt64 = 0
    /// Messages the publisher socket refused because its queue was full.
    public var publishDropped: UInt64 = 0
    /// Messages received and handed to subscribers.
    public var received: UInt64 = 0
    /// Messages received and dropped: wrong frame count, unreadable header, oversized body.
    public var malformed: UInt64 = 0
    /// Messages a slow subscriber had no room for.
    public var lagged: UInt64 = 0

    public init() {}
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
    let identity: [UInt8]
}

/// The counters, shared by the client and its socket thread.
final class BusCounterBox: Sendable {
    private let counters = Mutex(BusCounters())

    func update(_ body: (inout BusCounters) -> Void) {
        counters.withLock { body(&$0) }
    }

    var snapshot: BusCounters {
        counters.withLock { $0 }
    }
}
