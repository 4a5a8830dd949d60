import FoundationEssentials
import TetherBus
public import TetherSchema
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// Reads the network path from the kernel's routing tables (`/proc/net/route`,
/// `/proc/net/ipv6_route`) and interface state (`/sys/class/net`).
public struct KernelRoutes: Sendable {
    /// Where procfs and sysfs are mounted; tests point these at fixtures.
    public var procRoot: String
    public var sysRoot: String
    /// Whether an interface has an address traffic can use; tests replace the live check.
    public var hasUsableAddress: @Sendable (String) -> Bool

    public init(
        procRoot: String = "/proc", sysRoot: String = "/sys", hasUsableAddress: @escaping @Sendable (String) -> Bool = InterfaceAddresses.hasUsableAddress
    ) {
        self.procRoot = procRoot
        self.sysRoot = sysRoot
        self.hasUsableAddress = hasUsableAddress
    }

    /// A default route: its interface and metric.
    struct DefaultRoute: Equatable {
        var interface: String
        var metric: UInt64
    }

    private static let routeUp: UInt64 = 0x0001
    private static let routeReject: UInt64 = 0x0200

    /// The current path: satisfied when a default route leads through an interface that is up.
    public func currentPath() -> NetworkPath {
        let routes = defaultRoutes().sorted { $0.metric < $1.metric }
        guard !routes.isEmpty else {
            return NetworkPath(satisfied: false, interface: nil, kind: nil, expensive: false, reason: "no default route")
        }
        for route in routes where isUp(route.interface) && hasUsableAddress(route.interface) {
            let kind = kind(of: route.interface)
            return NetworkPath(satisfied: true, interface: route.interface, kind: kind, expensive: kind == .cellular)
        }
        let first = routes[0].interface
        let reason = isUp(first) ? "interface \(first) has no usable address" : "interface \(first) is down"
        return NetworkPath(satisfied: false, interface: first, kind: kind(of: first), expensive: false, reason: reason)
    }

    func defaultRoutes() -> [DefaultRoute] {
        var routes: [DefaultRoute] = []
        // Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT
        for fields in table("\(procRoot)/net/route").dropFirst() where fields.count >= 8 {
            guard fields[1] == "00000000", fields[7] == "00000000",
                let flags = UInt64(fields[3], radix: 16), flags & Self.routeUp != 0, flags & Self.routeReject == 0
            else { continue }
            routes.append(DefaultRoute(interface: fields[0], metric: UInt64(fields[6]) ?? 0))
        }
        // dest dest_len src src_len next_hop metric refcnt use flags iface (all hexadecimal)
        for fields in table("\(procRoot)/net/ipv6_route") where fields.count >= 10 {
            guard fields[0] == String(repeating: "0", count: 32), fields[1] == "00",
                let flags = UInt64(fields[8], radix: 16), flags & Self.routeUp != 0, flags & Self.routeReject == 0,
                fields[9] != "lo"
            else { continue }
            routes.append(DefaultRoute(interface: fields[9], metric: UInt64(fields[5], radix: 16) ?? 0))
        }
        return routes
    }

    private func table(_ path: String) -> [[String]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(whereSeparator: \.isNewline).map { $0.split(whereSeparator: \.isWhitespace).map(String.init) }
    }

    private func attribute(_ interface: String, _ name: String) -> String? {
        (try? TextFile.read("\(sysRoot)/class/net/\(interface)/\(name)"))?.trimmingWhitespace()
    }

    /// Up: the kernel says so (`operstate` up), or, for drivers that report `unknown`, the
    /// interface is administratively up and running.
    func isUp(_ interface: String) -> Bool {
        switch attribute(interface, "operstate") {
        case "up":
            return true
        case "unknown":
            let iffUp: UInt64 = 0x1
            let iffRunning: UInt64 = 0x40
            guard let text = attribute(interface, "flags"), let flags = UInt64(text.dropFirst(2), radix: 16) else { return false }
            return flags & iffUp != 0 && flags & iffRunning != 0
        default:
            return false
        }
    }

    func kind(of interface: String) -> InterfaceKind {
        let base = "\(sysRoot)/class/net/\(interface)"
        if FileManager.default.fileExists(atPath: base + "/wireless") || FileManager.default.fileExists(atPath: base + "/phy80211") {
            return .wifi
        }
        if let uevent = attribute(interface, "uevent"), uevent.contains("DEVTYPE=wwan") {
            return .cellular
        }
        switch attribute(interface, "type") {
        case "1": return .wired  // ARPHRD_ETHER
        case "772": return .loopback  // ARPHRD_LOOPBACK
        case "519", "530": return .cellular  // ARPHRD_RAWIP, ARPHRD_NONE used by some modems
        default: return .other
        }
    }
}

/// The addresses of the machine's interfaces, from getifaddrs.
public enum InterfaceAddresses {
    /// True when `interface` has an IPv4 address outside 169.254/16, or an IPv6 address
    /// outside fe80::/10: one that can reach beyond the link.
    @Sendable public static func hasUsableAddress(_ interface: String) -> Bool {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return false }
        defer { freeifaddrs(list) }
        var entry: UnsafeMutablePointer<ifaddrs>? = first
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            guard let name = current.pointee.ifa_name, String(cString: name) == interface, let address = current.pointee.ifa_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let ipv4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
                if ipv4 >> 16 != 0xA9FE { return true }
            case AF_INET6:
                let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr.__in6_u.__u6_addr8 }
                if !(bytes.0 == 0xFE && bytes.1 & 0xC0 == 0x80) { return true }
            default:
                continue
            }
        }
        return false
    }
}
