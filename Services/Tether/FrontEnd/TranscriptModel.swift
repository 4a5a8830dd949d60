public import TetherSchema
public import TetherWire

/// The conversation as a front end holds it: snapd's snapshot, then the live changes the
/// snapshot does not hold already. This is the client half of the Clone pattern: subscribe,
/// fetch the snapshot with its revision, drop every change at or below that revision.
public struct TranscriptModel: Sendable {
    /// What a change did to the model.
    public enum Change: Sendable, Equatable {
        /// A message new to the conversation.
        case added(TranscriptEntry)
        /// A message already shown changed (its status, or a reply's content).
        case updated(TranscriptEntry)
    }

    /// The messages in the order they joined the conversation.
    public private(set) var entries: [TranscriptEntry]
    private var positions: [MessageID: Int]
    /// The snapshot held every change up to this revision.
    public let snapshotRevision: Int

    public init(snapshot: [TranscriptEntry], revision: Int) {
        entries = snapshot
        positions = Dictionary(snapshot.enumerated().map { ($0.element.id, $0.offset) }, uniquingKeysWith: { _, last in last })
        snapshotRevision = revision
    }

    /// Whether the conversation holds the message `id`.
    public func contains(_ id: MessageID) -> Bool {
        positions[id] != nil
    }

    /// The entry `id` as the conversation holds it.
    public func entry(_ id: MessageID) -> TranscriptEntry? {
        positions[id].map { entries[$0] }
    }

    /// Applies a live entry; nil when the snapshot or an earlier change already holds it.
    public mutating func apply(_ entry: TranscriptEntry) -> Change? {
        guard isNew(entry.revision) else { return nil }
        guard let position = positions[entry.id] else {
            positions[entry.id] = entries.count
            entries.append(entry)
            return .added(entry)
        }
        let stored = entries[position]
        if let revision = entry.revision, let storedRevision = stored.revision, storedRevision >= revision { return nil }
        guard entry.status.rank >= stored.status.rank, entry != stored else { return nil }
        var updated = entry
        updated.inReplyTo = entry.inReplyTo ?? stored.inReplyTo
        entries[position] = updated
        return .updated(updated)
    }

    /// Applies a live delivery update to its message; nil when it changes nothing.
    public mutating func apply(_ delivery: DeliveryUpdate) -> Change? {
        guard isNew(delivery.revision), let position = positions[delivery.id] else { return nil }
        var entry = entries[position]
        if let revision = delivery.revision, let storedRevision = entry.revision, storedRevision >= revision { return nil }
        guard delivery.status.rank >= entry.status.rank, delivery.status != entry.status else { return nil }
        entry.status = delivery.status
        if delivery.status == .delivered, let detail = delivery.detail { entry.detail = detail }
        entry.revision = delivery.revision ?? entry.revision
        entries[position] = entry
        return .updated(entry)
    }

    private func isNew(_ revision: Int?) -> Bool {
        guard let revision else { return true }
        return revision > snapshotRevision
    }
}
