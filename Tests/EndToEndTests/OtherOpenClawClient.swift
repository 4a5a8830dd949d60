import Foundation
import NIOHTTP1
import NIOWebSocket
import OpenClawWire
import Synchronization
import TetherTesting

@testable import ConnectionManager

/// Another client of the same OpenClaw gateway, with a device of its own, as another person's
/// terminal or phone would be: it connects (a new device, so the gateway pairs it), sends
/// `chat.send` into a session, and keeps every frame it receives.
final class OtherOpenClawClient: Sendable {
    private let outgoing: AsyncStream<String>.Continuation
    private let shared = Shared()
    private let task: Task<Void, any Error>
    private let codec = OpenClawCodec()

    private struct State {
        var ready = false
        var ended = false
        var received: [String] = []
        var sent = 0
    }

    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    /// Connects to the gateway on `port` with the shared `token`, named `displayName` (the label
    /// the gateway gives its messages: `Phone (cli)`); returns once the handshake is done.
    init(port: Int, token: String, displayName: String = "Phone") async throws {
        let url = "ws://127.0.0.1:\(port)"
        let (stream, continuation) = AsyncStream<String>.makeStream()
        outgoing = continuation
        let shared = self.shared
        task = Task {
            defer { shared.state.withLock { $0.ended = true } }
            _ = try await GatewaySocket.connect(url: url, headers: [:], tls: nil, maximumMessageSize: 1 << 24, deadline: .seconds(5)) { connection in
                var messages = connection.messages.makeAsyncIterator()
                let handshake = OpenClawHandshake(identity: DeviceIdentity(), instanceID: UUID().uuidString, displayName: displayName)
                let result = await OpenClawConnect.run(
                    handshake, on: connection, messages: &messages, required: true, url: url, token: token, deviceToken: nil)
                guard case .ready = result else { return }
                shared.state.withLock { $0.ready = true }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await text in stream { try await connection.write(text: text) }
                    }
                    while let inbound = await messages.next() {
                        if case .text(let text) = inbound { shared.state.withLock { $0.received.append(text) } }
                    }
                    group.cancelAll()
                }
            }
        }
        let ready = await eventually(timeout: .seconds(15)) { shared.state.withLock { $0.ready || $0.ended } }
        guard ready, shared.state.withLock({ $0.ready }) else {
            stop()
            throw TestFailure("the other client did not connect to \(url)")
        }
    }

    deinit {
        stop()
    }

    /// One handshake as device `identity` asking for `scopes`, and what the gateway answered;
    /// the connection is closed after it.
    static func handshake(port: Int, token: String, identity: DeviceIdentity, scopes: [String]) async throws -> OpenClawConnect.Result {
        let url = "ws://127.0.0.1:\(port)"
        let result = Mutex<OpenClawConnect.Result?>(nil)
        _ = try await GatewaySocket.connect(url: url, headers: [:], tls: nil, maximumMessageSize: 1 << 24, deadline: .seconds(5)) { connection in
            var messages = connection.messages.makeAsyncIterator()
            let handshake = OpenClawHandshake(identity: identity, instanceID: UUID().uuidString, displayName: "Other", scopes: scopes)
            let answer = await OpenClawConnect.run(handshake, on: connection, messages: &messages, required: true, url: url, token: token, deviceToken: nil)
            result.withLock { $0 = answer }
        }
        guard let answer = result.withLock({ $0 }) else { throw TestFailure("no handshake with \(url)") }
        return answer
    }

    /// Connects, completes the handshake, writes `frame` as one WebSocket frame and waits for
    /// the gateway to close the connection: its close frame's code, nil when it closed without
    /// one; throws when it is still open after `timeout`.
    static func closeAfterWriting(_ frame: String, port: Int, token: String, timeout: Duration = .seconds(30)) async throws -> WebSocketErrorCode? {
        let url = "ws://127.0.0.1:\(port)"
        return try await withThrowingTaskGroup(of: WebSocketErrorCode?.self) { group in
            group.addTask {
                try await GatewaySocket.connect(url: url, headers: [:], tls: nil, maximumMessageSize: 1 << 24, deadline: .seconds(5)) { connection in
                    var messages = connection.messages.makeAsyncIterator()
                    let handshake = OpenClawHandshake(identity: DeviceIdentity(), instanceID: UUID().uuidString, displayName: "Large")
                    guard
                        case .ready = await OpenClawConnect.run(
                            handshake, on: connection, messages: &messages, required: true, url: url, token: token, deviceToken: nil)
                    else { throw TestFailure("no handshake with \(url)") }
                    try await connection.write(text: frame)
                    while await messages.next() != nil {}
                }?.code
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TestFailure("the gateway kept the connection open \(timeout) after a frame of \(frame.utf8.count) bytes")
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }

    /// Sends `text` into `session` with a new idempotency key; returns the key.
    @discardableResult
    func send(_ text: String, session: String = "agent:main:main") -> String {
        let key = UUID().uuidString.lowercased()
        let number = shared.state.withLock { state in
            state.sent += 1
            return state.sent
        }
        outgoing.yield(
            codec.request(id: "other-\(number)", method: "chat.send", params: ChatSendParams(sessionKey: session, message: text, idempotencyKey: key)))
        return key
    }

    /// Sends `text` with `attachments` into `session` with a new idempotency key; returns the
    /// request's id, which its response carries.
    func send(_ text: String, attachments: [ChatAttachment], session: String = "agent:main:main") -> String {
        let number = shared.state.withLock { state in
            state.sent += 1
            return state.sent
        }
        let params = ChatSendParams(sessionKey: session, message: text, idempotencyKey: UUID().uuidString.lowercased(), attachments: attachments)
        outgoing.yield(codec.request(id: "other-\(number)", method: "chat.send", params: params))
        return "other-\(number)"
    }

    /// The response to request `id`, once it came: whether it was ok, and the error's message.
    func response(to id: String) -> (ok: Bool, error: String?)? {
        for case .response(let responseID, let ok, _, let error) in frames where responseID == id { return (ok, error?.message) }
        return nil
    }

    /// Every frame received so far, decoded.
    var frames: [OpenClawFrame] { shared.state.withLock { $0.received }.compactMap { try? codec.decode($0) } }

    func stop() {
        outgoing.finish()
        task.cancel()
    }
}
