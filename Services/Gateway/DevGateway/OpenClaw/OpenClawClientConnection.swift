import Foundation
import HummingbirdWebSocket
import NIOWebSocket
import OpenClawWire
import Synchronization

/// One client's connection to the OpenClaw dialect: its handshake, its protocol version, its
/// event counter, and the faults that apply to what is written to it.
final class OpenClawClientConnection: Sendable {
    let connection: Int
    let nonce = UUID().uuidString.lowercased()
    private let outbound: WebSocketOutboundWriter
    let faults: FaultSwitch
    private let state = Mutex(LinkState())

    struct LinkState {
        /// Set once `connect` succeeded: the protocol version in use.
        var protocolVersion: Int?
        var scopes: Set<String> = []
        var deviceID: String?
        /// The label history gives the client's messages (`senderLabel`).
        var senderLabel: String?
        /// The capabilities it named in `connect` (`tool-events`).
        var caps: Set<String> = []
        /// The last event sequence number sent on this connection.
        var sequence = 0
        var framesSent = 0
        var closed = false
    }

    init(connection: Int, outbound: WebSocketOutboundWriter, faults: FaultSwitch) {
        self.connection = connection
        self.outbound = outbound
        self.faults = faults
    }

    var protocolVersion: Int? { state.withLock { $0.protocolVersion } }
    var isConnected: Bool { state.withLock { $0.protocolVersion != nil && !$0.closed } }

    func connected(protocolVersion: Int, scopes: [String], caps: [String], deviceID: String, senderLabel: String) {
        state.withLock { state in
            state.caps = Set(caps)
            state.protocolVersion = protocolVersion
            state.scopes = Set(scopes)
            state.deviceID = deviceID
            state.senderLabel = senderLabel
        }
    }

    var senderLabel: String? { state.withLock { $0.senderLabel } }

    /// Whether it named the capability `cap` in `connect`.
    func has(_ cap: String) -> Bool { state.withLock { $0.caps.contains(cap) } }

    func allows(_ scope: String) -> Bool {
        state.withLock {
            $0.scopes.contains(scope) || $0.scopes.contains("operator.admin") || (scope == "operator.read" && $0.scopes.contains("operator.write"))
        }
    }

    /// The next event sequence number on this connection (`skip` leaves one out, a gap).
    func nextSequence(skip: Bool) -> Int {
        state.withLock { state in
            state.sequence += skip ? 2 : 1
            return state.sequence
        }
    }

    /// Writes a frame, with the frame delay and close-after-frames faults in force.
    func write(_ text: String) async throws {
        let faults = self.faults.current
        guard !state.withLock({ $0.closed }) else { return }
        if faults.frameDelayMilliseconds > 0 { try await Task.sleep(for: .milliseconds(faults.frameDelayMilliseconds)) }
        if faults.sendMalformedFrames { try await outbound.write(.text(#"{"type": "event", "payload": [malformed"#)) }
        try await outbound.write(.text(text))
        let sent = state.withLock { state in
            state.framesSent += 1
            return state.framesSent
        }
        if let limit = faults.closeAfterFrames, sent >= limit {
            try await close(.normalClosure, reason: "closed after \(limit) frames (fault injection)")
        }
    }

    /// Closes with a code and reason, as the gateway does after refusing a handshake.
    func close(_ code: WebSocketErrorCode, reason: String) async throws {
        guard
            state.withLock({ state in
                defer { state.closed = true }
                return !state.closed
            })
        else { return }
        try await outbound.close(code, reason: String(reason.utf8.prefix(120)) ?? reason)
    }
}
