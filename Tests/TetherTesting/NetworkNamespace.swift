import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A network namespace made by a test with `ip netns`, with a veth pair inside it: the
/// test's own host, whose links, addresses and routes it changes at will. Removed at the end.
public final class NetworkNamespace: Sendable {
    public let name: String
    /// The interface the namespace's default route goes through.
    public let interface = "tt0"
    private let peer = "tt1"

    /// Why namespaces cannot be made here, or nil when they can.
    public static let unavailableReason: String? = {
        guard getuid() == 0 else { return "network namespace tests need root" }
        guard (try? run(["ip", "netns", "list"])) != nil else { return "network namespace tests need iproute2's ip" }
        let probe = "tether-probe-\(getpid())"
        guard (try? run(["ip", "netns", "add", probe])) != nil else { return "this machine does not allow ip netns add" }
        _ = try? run(["ip", "netns", "del", probe])
        return nil
    }()

    /// Makes the namespace: loopback up, `tt0`/`tt1` veth pair up, 10.231.0.2/24 on tt0
    /// and a default route through 10.231.0.1. Nothing is ever sent to those addresses.
    public init() throws {
        name = "tether-\(getpid())-\(UInt16.random(in: 0...UInt16.max))"
        try Self.run(["ip", "netns", "add", name])
        do {
            try exec(["ip", "link", "set", "lo", "up"])
            try exec(["ip", "link", "add", interface, "type", "veth", "peer", "name", peer])
            try exec(["ip", "link", "set", peer, "up"])
            try exec(["ip", "link", "set", interface, "up"])
            try exec(["ip", "addr", "add", "10.231.0.2/24", "dev", interface])
            try exec(["ip", "route", "add", "default", "via", "10.231.0.1", "dev", interface])
        } catch {
            _ = try? Self.run(["ip", "netns", "del", name])
            throw error
        }
    }

    /// Moves the veth pair's other end to this host, as 10.231.0.1/24: the namespace becomes
    /// another host on a link with this one. Returns the host's address on that link.
    @discardableResult
    public func linkToHost() throws -> String {
        let hostSide = "tth\(String(UInt16.random(in: 0...UInt16.max), radix: 16))"
        try exec(["ip", "link", "set", peer, "name", hostSide])
        try exec(["ip", "link", "set", hostSide, "netns", "1"])
        try Self.run(["ip", "addr", "add", "10.231.0.1/24", "dev", hostSide])
        try Self.run(["ip", "link", "set", hostSide, "up"])
        return "10.231.0.1"
    }

    deinit {
        _ = try? Self.run(["ip", "netns", "del", name])
    }

    /// Runs a command inside the namespace.
    public func exec(_ arguments: [String]) throws {
        try Self.run(["ip", "netns", "exec", name] + arguments)
    }

    /// Runs a command inside the namespace and returns what it printed.
    public func output(_ arguments: [String]) throws -> String {
        try Self.run(["ip", "netns", "exec", name] + arguments)
    }

    /// The arguments that start a program inside the namespace.
    public func command(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        ("/usr/bin/env", ["ip", "netns", "exec", name, executable] + arguments)
    }

    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else { throw TestFailure("\(arguments.joined(separator: " ")) failed: \(text)") }
        return text
    }
}
