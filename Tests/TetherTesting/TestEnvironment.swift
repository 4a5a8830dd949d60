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

    /// Removes the directory, unless `TETHER_TEST_KEEP` is set (to read the logs of a failed test).
    deinit {
        if ProcessInfo.processInfo.environment["TETHER_TEST_KEEP"] == nil {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    public var runDirectory: RunDirectory { RunDirectory(path: path) }
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

/// The first of `count` consecutive TCP ports on the loopback interface that nothing listens on now.
public func freePorts(count: Int) throws -> Int {
    for _ in 0..<50 {
        let (fd, first) = try bindLoopback(port: 0)
        defer { close(fd) }
        var others: [Int32] = []
        defer { others.forEach { close($0) } }
        for port in first + 1..<first + count {
            guard port <= 65535, let (other, _) = try? bindLoopback(port: port) else { break }
            others.append(other)
        }
        if others.count == count - 1 { return first }
    }
    throw TestFailure("no \(count) consecutive free ports")
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
    var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/admin/faults")!)
    request.httpMethod = method
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    request.httpBody = Data(json.utf8)
    let (_, response) = try await URLSession.shared.data(for: request)
    guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw TestFailure("the gateway refused the faults \(json)") }
}
