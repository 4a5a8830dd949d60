import Foundation
import TetherBus

/// The TCP sockets a process holds, by state, read from /proc: its descriptors give the
/// sockets' inodes, /proc/net/tcp and tcp6 their states.
public enum SocketStates {
    /// The kernel's names for the states in /proc/net/tcp (hex codes).
    private static let names = [
        "01": "ESTABLISHED", "02": "SYN-SENT", "03": "SYN-RECV", "04": "FIN-WAIT-1", "05": "FIN-WAIT-2", "06": "TIME-WAIT", "07": "CLOSE",
        "08": "CLOSE-WAIT", "09": "LAST-ACK", "0A": "LISTEN", "0B": "CLOSING",
    ]

    /// The state of each TCP socket `pid` holds open (ESTABLISHED, CLOSE-WAIT, …).
    public static func of(pid: Int32) -> [String] {
        sockets(of: pid).map(\.state)
    }

    /// Each TCP socket `pid` holds open: its state and its local and remote ports.
    public static func sockets(of pid: Int32) -> [(state: String, localPort: Int, remotePort: Int)] {
        let directory = "/proc/\(pid)/fd"
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var inodes: Set<String> = []
        for descriptor in descriptors {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(descriptor)"),
                target.hasPrefix("socket:[")
            else { continue }
            inodes.insert(String(target.dropFirst("socket:[".count).dropLast()))
        }
        var sockets: [(state: String, localPort: Int, remotePort: Int)] = []
        for table in ["/proc/\(pid)/net/tcp", "/proc/\(pid)/net/tcp6"] {
            // Read to its end: Foundation stops at the first short read, which for this file is its first page of lines (about 25 sockets).
            let text = (try? TextFile.read(table)) ?? ""
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 9, inodes.contains(String(fields[9])) else { continue }
                let port = { (address: Substring) in Int(address.split(separator: ":").last ?? "", radix: 16) ?? 0 }
                sockets.append((names[String(fields[3])] ?? String(fields[3]), port(fields[1]), port(fields[2])))
            }
        }
        return sockets
    }
}
