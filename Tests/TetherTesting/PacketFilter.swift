import Foundation
import Synchronization

/// Packet loss and blackholes for one TCP port inside a network namespace, with nftables
/// (this kernel has no netem): `numgen random mod 100 < N drop` loses N% of the packets
/// each way, a drop-all rule makes a blackhole. Every rule counts what it dropped.
public final class PacketFilter: Sendable {
    private let namespace: NetworkNamespace
    private let port: Int
    private static let table = "tether_chaos"

    /// Why packets cannot be filtered in `namespace`, or nil when they can.
    public static func unavailableReason(in namespace: NetworkNamespace) -> String? {
        do {
            try namespace.exec(["nft", "list", "tables"])
            return nil
        } catch {
            return "nftables cannot be used here (scripts/bootstrap --tests installs Debian's nftables): \(error)"
        }
    }

    /// Makes the table and its two chains: `loss`, kept for the whole run, and `blackhole`,
    /// filled and emptied by ``blackhole(_:)``.
    public init(namespace: NetworkNamespace, port: Int) throws {
        self.namespace = namespace
        self.port = port
        try namespace.exec(["nft", "add", "table", "inet", Self.table])
        for (chain, priority) in [("blackhole", -10), ("loss", 0)] {
            try namespace.exec([
                "nft", "add", "chain", "inet", Self.table, chain, "{ type filter hook output priority \(priority) ; policy accept ; }",
            ])
        }
    }

    /// Drops `percent` of the packets to and from the port, each chosen at random.
    public func lose(percent: Int) throws {
        for direction in ["dport", "sport"] {
            try namespace.exec([
                "nft", "add", "rule", "inet", Self.table, "loss", "tcp", direction, "\(port)", "numgen", "random", "mod", "100", "<", "\(percent)",
                "counter", "drop",
            ])
        }
    }

    /// Packets dropped by blackholes that have ended.
    private let endedBlackholes = Mutex(0)

    /// Starts (`true`) or ends (`false`) dropping every packet to and from the port.
    public func blackhole(_ on: Bool) throws {
        if on {
            for direction in ["dport", "sport"] {
                try namespace.exec(["nft", "add", "rule", "inet", Self.table, "blackhole", "tcp", direction, "\(port)", "counter", "drop"])
            }
        } else {
            let dropped = dropped(in: "blackhole")
            try namespace.exec(["nft", "flush", "chain", "inet", Self.table, "blackhole"])
            endedBlackholes.withLock { $0 += dropped }
        }
    }

    /// Packets dropped so far: by the loss rules, and by blackholes.
    public var droppedPackets: (loss: Int, blackhole: Int) {
        (dropped(in: "loss"), endedBlackholes.withLock { $0 } + dropped(in: "blackhole"))
    }

    private func dropped(in chain: String) -> Int {
        guard let text = try? namespace.output(["nft", "-j", "list", "chain", "inet", Self.table, chain]),
            let json = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let items = json["nftables"] as? [[String: Any]]
        else { return 0 }
        return items.compactMap { ($0["rule"] as? [String: Any])?["expr"] as? [[String: Any]] }.flatMap { $0 }
            .compactMap { ($0["counter"] as? [String: Any])?["packets"] as? Int }.reduce(0, +)
    }
}
