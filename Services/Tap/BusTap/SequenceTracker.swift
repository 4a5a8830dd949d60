public import TetherSchema

/// Notices messages the tap did not see: each publishing process numbers its messages from 1,
/// so a jump in its sequence is a gap, and a sequence that starts again is a restart.
public struct SequenceTracker: Sendable {
    /// What one message says about the ones before it.
    public enum Finding: Sendable, Equatable {
        /// `missed` messages between `after` and `next` never arrived.
        case gap(source: String, after: UInt64, next: UInt64, missed: UInt64)
        /// The source numbers from the start again: it restarted (under the same pid only when
        /// the publisher gives none).
        case restarted(source: String, after: UInt64, next: UInt64)
    }

    private struct Publisher: Hashable {
        var source: String
        var pid: Int32?
    }

    private var last: [Publisher: UInt64] = [:]

    public init() {}

    /// Gaps seen so far, in messages.
    public private(set) var missed: UInt64 = 0

    /// Records `header`; what it reveals, if anything.
    public mutating func observe(_ header: BusHeader) -> Finding? {
        let publisher = Publisher(source: header.source, pid: header.pid)
        defer { last[publisher] = header.sequence }
        guard let previous = last[publisher] else { return nil }
        if header.sequence <= previous {
            return .restarted(source: header.source, after: previous, next: header.sequence)
        }
        guard header.sequence > previous + 1 else { return nil }
        let gap = header.sequence - previous - 1
        missed += gap
        return .gap(source: header.source, after: previous, next: header.sequence, missed: gap)
    }
}

extension SequenceTracker.Finding: CustomStringConvertible {
    public var description: String {
        switch self {
        case .gap(let source, let after, let next, let missed):
            "gap: \(missed) message\(missed == 1 ? "" : "s") from \(source) not seen (#\(after) → #\(next))"
        case .restarted(let source, let after, let next):
            "\(source) numbers from #\(next) again after #\(after): it restarted"
        }
    }
}
