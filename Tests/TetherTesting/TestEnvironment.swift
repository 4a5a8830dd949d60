import Foundation
public import TetherBus

#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A private run directory for one test, removed at the end; short enough for socket paths.
public final class TestRunDirectory: Sendable {
    public let path: String

    public init() throws {
        var template = Array("/tmp/tether-test-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw TestFailure("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    /// The directory at `path`, made (with its parents, owner-only) if it is not there.
    public init(path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        self.path = path
    }

    /// Removes the directory, unless `TETHER_TEST_KEEP` is set (to read the logs of a failed test).
    deinit {
        if ProcessInfo.processInfo.environment["TETHER_TEST_KEEP"] == nil {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    public var runDirectory: RunDirectory { RunDirectory(path: path) }
}

/// A private home for a test, laid out as a desktop session's: `XDG_RUNTIME_DIR` (the run
/// directory's default parent, a stand-in for the tmpfs logout empties), `XDG_STATE_HOME`
/// and `XDG_CONFIG_HOME` beside each other, and `HOME`. A set started in it names no
/// directory, so it finds them as a desktop user's set does.
public final class DesktopHome: Sendable {
    public let root: TestRunDirectory

    public init() throws {
        root = try TestRunDirectory()
    }

    public var runtime: String { root.path + "/runtime" }
    /// The run directory a set started here uses: `$XDG_RUNTIME_DIR/tether`.
    public var run: String { runtime + "/tether" }
    /// The state directory a set started here uses: `$XDG_STATE_HOME/tether`.
    public var state: String { root.path + "/state/tether" }

    /// The environment of a program started in this home.
    public var environment: [String: String] {
        [
            "HOME": root.path + "/home", "XDG_RUNTIME_DIR": runtime, "XDG_STATE_HOME": root.path + "/state",
            "XDG_CONFIG_HOME": root.path + "/config",
        ]
    }

    /// Logout, or a reboot: the runtime directory is gone.
    public func emptyRuntime() throws {
        try FileManager.default.removeItem(atPath: runtime)
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }
}

/// Where the built programs are: `$TETHER_BIN_DIR`, else beside the test bundle.
public enum Programs {
    public static var directory: String {
        if let explicit = ProcessInfo.processInfo.environment["TETHER_BIN_DIR"], !explicit.isEmpty { return explicit }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: executable).deletingLastPathComponent()
        // Swift Testing on Linux runs the .xctest binary from the build directory.
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("tether-bus").path) && url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.path
    }

    /// The path of a built program.
    public static func path(_ name: String) -> String {
        directory + "/" + name
    }

    /// The package's root directory (for compose files).
    public static var packageRoot: String {
        var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) && url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.path
    }
}

/// A TCP port on the loopback interface that nothing listens on now.
public func freePort() throws -> Int {
    try freePorts(count: 1)
}

/// The first of `count` consecutive TCP ports on the loopback interface that nothing listens
/// on now. They are chosen below the kernel's ephemeral range, so that while tests run side
/// by side, no outgoing connection can be given a port a test has picked for a gateway it is
/// about to start (or start again).
public func freePorts(count: Int) throws -> Int {
    let ephemeralLow =
        (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
        .flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } } ?? 32768
    let range = 10000..<max(ephemeralLow - count, 10001)
    for _ in 0..<200 {
        let first = Int.random(in: range)
        var bound: [Int32] = []
        defer { bound.forEach { close($0) } }
        for port in first..<first + count {
            guard let (socket, _) = try? bindLoopback(port: port) else { break }
            bound.append(socket)
        }
        if bound.count == count { return first }
    }
    throw TestFailure("no \(count) consecutive free ports below \(ephemeralLow)")
}

/// A socket bound to `port` (0: any) on 127.0.0.1, and the port.
private func bindLoopback(port: Int) throws -> (Int32, Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket failed") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else {
        close(fd)
        throw TestFailure("bind failed")
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// Polls `condition` every `interval` until it holds or `timeout` passes.
public func eventually(
    timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(50), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// Sends `method` to a development gateway's fault switches (`/admin/faults`) with a JSON
/// body; throws unless the gateway answers 200.
public func setGatewayFaults(port: Int, token: String, _ json: String, method: String = "POST") async throws {
    try await postToGateway(port: port, token: token, path: "/admin/faults", json, method: method)
}

/// Sends `json` to one of the development gateway's admin endpoints with its token; throws
/// unless it answers 2xx.
public func postToGateway(port: Int, token: String, path: String, _ json: String, method: String = "POST") async throws {
    var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
    request.httpMethod = method
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    request.httpBody = Data(json.utf8)
    let (_, response) = try await URLSession.shared.data(for: request)
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    guard (200..<300).contains(status) else { throw TestFailure("the gateway answered \(status) to \(method) \(path) \(json)") }
}
