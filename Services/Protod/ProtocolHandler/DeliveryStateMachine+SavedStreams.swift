public import Foundation
public import TetherSchema
public import TetherWire

/// A reply that was streaming when protod last saved, in the seed dialect. A restarted protod
/// resumes the gateway session before its first chunk, so a gateway that kept the session
/// sends it again whole; one that restarted cannot, and the reply is then cut as incomplete,
/// as far as it came, instead of vanishing with the protod that held its chunks.
public struct SavedStream: Codable, Hashable, Sendable {
    public var id: MessageID
    public var inReplyTo: MessageID?
    public var attribution: ReplyAttribution?
    /// The server sequence of its first chunk.
    public var firstSequence: Int
    /// The reply as far as it came, as tether-snapd kept it (protod keeps chunks only in
    /// memory); nil when not known.
    public var content: String?

    public init(id: MessageID, inReplyTo: MessageID?, attribution: ReplyAttribution?, firstSequence: Int, content: String? = nil) {
        self.id = id
        self.inReplyTo = inReplyTo
        self.attribution = attribution
        self.firstSequence = firstSequence
        self.content = content
    }
}

extension DeliveryStateMachine {
    /// Takes up the replies the protod before this one was receiving: open again, to be
    /// finished by the gateway's replay or cut when it cannot come.
    mutating func restore(_ saved: [SavedStream], now: Date) {
        for stream in saved {
            streams[stream.id] = OpenStream(
                firstSequence: stream.firstSequence, inReplyTo: stream.inReplyTo, attribution: stream.attribution, grewAt: now, kept: stream.content,
                restored: true)
        }
        savedStreams = Set(saved.map(\.id))
    }

    /// Saves the replies streaming now when which they are changed (a reply began or ended),
    /// in the seed dialect, whose gateway replays a session; OpenClaw's replies come back
    /// from its history instead.
    mutating func saveOpenStreams(into actions: inout [Action]) {
        let openClaw: Bool = if case .openClaw? = connection?.dialect { true } else { false }
        // Every event comes through here: nothing is built unless what is open changed.
        let unchanged = openClaw ? savedStreams.isEmpty : streams.count == savedStreams.count && streams.keys.allSatisfy(savedStreams.contains)
        guard !unchanged else { return }
        savedStreams = openClaw ? [] : Set(streams.keys)
        let saved = openStreamsInOrder.filter(savedStreams.contains).compactMap { id in
            streams[id].map { SavedStream(id: id, inReplyTo: $0.inReplyTo, attribution: $0.attribution, firstSequence: $0.firstSequence) }
        }
        actions.append(.saveOpenStreams(saved))
    }
}
