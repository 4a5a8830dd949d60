import Foundation
import TetherSchema
import TetherWire

/// What protod keeps in mind of the transcript, bounded: the entries published (content and
/// status), the gateway entries they stand for, and the messages Tether sent. A history answer
/// is matched against it (``HistoryMerge``), and a run is told Tether's or another client's by it.
struct TranscriptMemory: Sendable {
    /// How many entries, and sent messages, it keeps: the most recent.
    static let limit = 2000

    /// The user messages Tether knows it sent (from the journal and since), oldest first.
    private(set) var sent: [HistoryMerge.Sent] = []
    /// The transcript's entries by id.
    private(set) var entries: [MessageID: (content: String, status: DeliveryStatus)] = [:]
    /// What entries hold besides their content (a tool call, the model's thinking), by id.
    private(set) var details: [MessageID: HistoryMerge.KnownDetail] = [:]
    /// The ids entries of the gateway's transcript were published under, by their gateway id.
    private(set) var publishedGatewayIDs: [String: MessageID] = [:]
    private var order: [MessageID] = []

    /// Remembers a published entry: its content and status, the gateway entry it stands for,
    /// and the text of a message Tether sent.
    mutating func remember(_ entry: TranscriptEntry) {
        if entries[entry.id] == nil {
            order.append(entry.id)
            if entry.sender == .user, entry.status != .failed, entry.status != .cancelled, entry.status != .expired, entry.isTethers {
                sent.append(
                    HistoryMerge.Sent(
                        id: entry.id, text: entry.content, createdAt: entry.timestamp, session: entry.session, imageCount: entry.attachments?.count ?? 0))
            }
        }
        entries[entry.id] = (entry.content, entry.status)
        let reason = entry.status == .incomplete ? entry.detail : nil
        if entry.tool != nil || entry.thinking != nil || reason != nil {
            let known = details[entry.id]
            details[entry.id] = HistoryMerge.KnownDetail(
                tool: entry.tool ?? known?.tool, thinking: entry.thinking ?? known?.thinking,
                incompleteBecause: known?.incompleteBecause ?? reason)
        }
        if let gatewayID = entry.gatewayID { publishedGatewayIDs[gatewayID] = entry.id }
        if order.count > Self.limit {
            let excess = order.count - Self.limit
            for id in order.prefix(excess) {
                entries[id] = nil
                details[id] = nil
            }
            order.removeFirst(excess)
        }
        if sent.count > Self.limit { sent.removeFirst(sent.count - Self.limit) }
        if publishedGatewayIDs.count > 2 * Self.limit {
            let kept = Set(order)
            publishedGatewayIDs = publishedGatewayIDs.filter { kept.contains($0.value) }
        }
    }
}
