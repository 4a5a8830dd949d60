import Foundation
import Logging
import NIOHTTP1
import OpenClawWire
import Synchronization
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

@testable import ConnectionManager

/// What a gateway writes right after the `101` can reach the client in the same read as the
/// response: a real OpenClaw gateway's `connect.challenge` often does. The development gateway
/// writes its first frames in the same write as the `101` (OpenClaw always, the seed dialect
/// with `greetOnOpen`), and connd's socket must hand every one of those bytes on.
@Suite(.serialized) struct UpgradeBytesTests {
    static let connections = 200

    /// A development gateway on a free port, in a run directory of its own.
    struct Gateway {
        let run: TestRunDirectory
        let port: Int
        let token: String
        let process: ChildProcess

        init(_ arguments: [String]) async throws {
            run = try TestRunDirectory()
            port = try freePort()
            token = "upgrade-bytes-\(port)"
            let tokenFile = run.path + "/token"
            _ = FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600])
            process = try ChildProcess(
                Programs.path("tether-gateway"), ["--port", "\(port)", "--token-file", tokenFile] + arguments, outputDirectory: run.path, name: "gateway")
            let port = port
            let listening = await eventually(timeout: .seconds(15)) { (try? rawUpgrade(port: port, path: "/health", upgrade: false)) != nil }
            if !listening { throw TestFailure("the gateway did not start: \(process.standardError)") }
        }
    }

    /// The first `count` text messages connd's socket reads on one connection, within 3 s.
    static func firstMessages(_ count: Int, url: String, headers: HTTPHeaders) async throws -> [String] {
        let read = Mutex<[String]>([])
        _ = try await GatewaySocket.connect(url: url, headers: headers, tls: nil, maximumMessageSize: 1 << 20, deadline: .seconds(5)) { connection in
            connection.wake(after: .seconds(3))
            for await inbound in connection.messages {
                guard case .text(let text) = inbound else { break }
                let enough = read.withLock { read in
                    read.append(text)
                    return read.count >= count
                }
                if enough { break }
            }
            try? await connection.close()
        }
        return read.withLock { $0 }
    }

    @Test func everyOpenClawConnectionReadsTheChallengeWrittenWithThe101() async throws {
        let gateway = try await Gateway(["--dialect", "openclaw"])
        defer { gateway.process.stop() }
        // The gateway puts the challenge in the same write as the response: a single read has both.
        for _ in 0..<20 {
            let firstRead = try rawUpgrade(port: gateway.port, path: "/")
            #expect(firstRead.contains("101 Switching Protocols") && firstRead.contains("connect.challenge"), "first read: \(firstRead)")
        }
        var (tried, missed) = (0, 0)
        // A connection that misses waits 3 s: ten misses are enough to fail.
        while tried < Self.connections, missed < 10 {
            tried += 1
            let messages = try await Self.firstMessages(1, url: "ws://127.0.0.1:\(gateway.port)", headers: [:])
            if messages.first?.contains(#""event":"connect.challenge""#) != true { missed += 1 }
        }
        print("upgrade bytes, OpenClaw: \(tried - missed) of \(tried) connections read the challenge")
        #expect(missed == 0 && tried == Self.connections, "\(missed) of \(tried) connections never read the challenge")
    }

    @Test func everySeedConnectionReadsTheGreetingWrittenWithThe101() async throws {
        let gateway = try await Gateway(["--faults", #"{"greetOnOpen": true}"#])
        defer { gateway.process.stop() }
        let authorization = "Authorization: Bearer \(gateway.token)"
        for _ in 0..<20 {
            let firstRead = try rawUpgrade(port: gateway.port, path: "/ws", extraHeader: authorization)
            #expect(firstRead.contains("101 Switching Protocols") && firstRead.contains("Hello from"), "first read: \(firstRead)")
        }
        var (tried, missed) = (0, 0)
        while tried < Self.connections, missed < 10 {
            tried += 1
            let messages = try await Self.firstMessages(
                3, url: "ws://127.0.0.1:\(gateway.port)/ws", headers: ["Authorization": "Bearer \(gateway.token)"])
            let types = messages.compactMap { text in
                (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["type"] as? String
            }
            if types != ["system.ping", "gateway.greeting", "chat.message"] { missed += 1 }
        }
        print("upgrade bytes, seed: \(tried - missed) of \(tried) connections read the three greeting frames")
        #expect(missed == 0 && tried == Self.connections, "\(missed) of \(tried) connections missed a greeting frame")
    }

    /// Through the whole set: the seed greeting written with each `101` reaches the bus on every
    /// connection, also from a gateway that knows only the seeds' JSON.
    @Test(arguments: [#"{"greetOnOpen": true}"#, #"{"greetOnOpen": true, "strictSeed": true}"#])
    func theSetHandsOnEveryFrameWrittenWithThe101(faults: String) async throws {
        let set = try await ComposedSet(environment: ["TETHER_GATEWAY_FAULTS": faults])
        defer { set.stop() }
        let bus = try BusClient(source: "upgrade-test", runDirectory: set.run.runDirectory, logger: Logger(label: "upgrade-test"))
        let frames = try await TopicRecorder(bus: bus, prefixes: [Topic.wireInbound.name])
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        _ = try await states.waitFor { $0.phase == .connected }
        let reconnects = 10
        for _ in 0..<reconnects {
            let before = await states.entries.count
            #expect(try set.tether(["reconnect"]).status == 0)
            let connected = await eventually(timeout: .seconds(15)) {
                await states.entries.dropFirst(before).contains { $0.value.phase == .connected }
            }
            #expect(connected)
        }
        // One for each reconnect; the first connection's came before the recorder listened (a
        // gateway with Tether's additions replays it, one of the seeds' JSON does not).
        let greetings = await eventually(timeout: .seconds(10)) {
            await frames.entries.count { String(decoding: $0.message.body, as: UTF8.self).contains("gateway.greeting") } >= reconnects
        }
        let counted = await frames.entries.count { String(decoding: $0.message.body, as: UTF8.self).contains("gateway.greeting") }
        #expect(greetings, "greetings on wire.in: \(counted) for \(reconnects) reconnections")
        await bus.close()
    }
}

/// Sends a WebSocket upgrade request (or, with `upgrade` false, a plain GET) on a new TCP
/// connection and returns what the first read brings, as text.
func rawUpgrade(port: Int, path: String, extraHeader: String? = nil, upgrade: Bool = true) throws -> String {
    var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
    if upgrade { request += "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" }
    if let extraHeader { request += extraHeader + "\r\n" }
    return try rawRequest(port: port, request + "\r\n")
}

/// Sends `request`, as it is, on a new TCP connection to 127.0.0.1 and returns what the first
/// read brings, as text.
func rawRequest(port: Int, _ request: String) throws -> String {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TestFailure("socket: \(errno)") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw TestFailure("connect: \(errno)") }
    var timeout = timeval(tv_sec: 3, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = request.withCString { send(descriptor, $0, strlen($0), 0) }
    var buffer = [UInt8](repeating: 0, count: 65536)
    let count = recv(descriptor, &buffer, buffer.count, 0)
    guard count > 0 else { throw TestFailure("nothing read (\(errno))") }
    return String(decoding: buffer[..<count], as: UTF8.self)
}
