import Foundation

/// What a chaos soak found: from the messages accepted, in the order sent, and the gateway's
/// record of what it received, in the order received.
public struct ChaosReport: Sendable {
    /// The gateway the soak ran against, in words.
    public var gateway: String
    public var sent: Int
    public var faults: [String: Int]
    /// Accepted messages the gateway never received.
    public var lost: [String]
    /// Messages the gateway received more than once, with the extra count.
    public var duplicated: [String: Int]
    /// Messages the gateway received after one sent later (among those `ordered` selects).
    public var outOfOrder: Int
    /// The first few messages that arrived late, each with the later-sent one it came after.
    public var lateExamples: [(late: String, after: String)] = []
    public var repliesIncomplete: Int
    /// For each kind of fault, how long each took until a message sent after it reached the gateway.
    public var recoveries: [String: [Duration]]

    /// - Parameters:
    ///   - sent: the ids accepted, in the order they were sent.
    ///   - received: the ids in the gateway's record, in the order received.
    ///   - ordered: which messages must arrive in the order sent (those of one sender).
    public init(
        gateway: String, sent: [String], received: [String], faults: [String: Int], repliesIncomplete: Int, recoveries: [String: [Duration]],
        ordered: (String) -> Bool = { _ in true }
    ) {
        self.gateway = gateway
        self.sent = sent.count
        self.faults = faults
        self.repliesIncomplete = repliesIncomplete
        self.recoveries = recoveries
        var counts: [String: Int] = [:]
        for id in received { counts[id, default: 0] += 1 }
        lost = sent.filter { counts[$0] == nil }
        duplicated = counts.filter { $0.value > 1 }.mapValues { $0 - 1 }
        let position = Dictionary(sent.filter(ordered).enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        var seen: Set<String> = []
        var latest = -1
        var latestID = ""
        var inversions = 0
        for id in received where seen.insert(id).inserted {
            guard let index = position[id] else { continue }
            if index < latest {
                inversions += 1
                if lateExamples.count < 10 { lateExamples.append((id, latestID)) }
            }
            if index > latest { (latest, latestID) = (index, id) }
        }
        outOfOrder = inversions
    }

    public var longestRecovery: Duration? { recoveries.values.compactMap { $0.max() }.max() }

    private static func seconds(_ duration: Duration) -> String {
        String(format: "%.2f s", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    /// The report, one figure a line.
    public var text: String {
        let faultWords = faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let longest = longestRecovery.map(Self.seconds) ?? "-"
        let byKind = recoveries.sorted { $0.key < $1.key }.compactMap { kind, durations in durations.max().map { "\(kind) \(Self.seconds($0))" } }
        return """
            gateway:             \(gateway)
            messages sent:       \(sent)
            faults injected:     \(faults.values.reduce(0, +)) (\(faultWords))
            messages lost:       \(lost.count)
            duplicated:          \(duplicated.values.reduce(0, +))
            out of order:        \(outOfOrder)
            replies incomplete:  \(repliesIncomplete)
            longest recovery:    \(longest) (longest by fault: \(byKind.joined(separator: ", ")))
            """
    }
}
