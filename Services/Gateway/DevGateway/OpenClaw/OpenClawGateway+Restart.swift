import Foundation
import Logging
import NIOWebSocket
import OpenClawWire

#if canImport(Glibc)
import Glibc
#endif

/// A restart as the gateway does one (`server-close.ts`, `restart-unavailable.ts`): requests
/// that would start work are refused `UNAVAILABLE` (retryable, `retryAfterMs`,
/// `details.reason: gateway-restarting`) while it drains, every client is told (`shutdown`
/// with `restartExpectedMs`), and the connections close with 1012 "service restart". The
/// process then ends, and whoever supervises it (compose) starts it again; what it keeps in
/// its state directory is there after.
extension OpenClawGateway {
    /// How long a restart drains before the connections close.
    static let restartDrain: Duration = .milliseconds(600)
    /// What the `shutdown` event says the restart takes.
    static let restartExpectedMilliseconds = 1500
    /// What an `UNAVAILABLE` answer during a restart asks a client to wait (as the gateway's).
    static let restartRetryAfterMilliseconds = 1000

    /// The refusal of `method` while restarting.
    static func restartRefusal(_ method: String) -> GatewayErrorShape {
        GatewayErrorShape(
            code: "UNAVAILABLE", message: "\(method) unavailable during gateway restart",
            details: .object(["method": .string(method), "reason": .string("gateway-restarting"), "phase": .string("draining")]), retryable: true,
            retryAfterMs: restartRetryAfterMilliseconds)
    }

    /// Restarts: drains, tells the clients, closes them, and ends the process.
    func restart() async {
        guard !restarting else { return }
        restarting = true
        logger.notice("restarting", metadata: ["gateway.drain": "\(Self.restartDrain)"])
        try? await Task.sleep(for: Self.restartDrain)
        await broadcast(droppable: false) { _ in
            ("shutdown", .object(["reason": .string("gateway restarting"), "restartExpectedMs": .number(Double(Self.restartExpectedMilliseconds))]))
        }
        for link in links.values { try? await link.close(WebSocketErrorCode(codeNumber: 1012), reason: "service restart") }
        try? await Task.sleep(for: .milliseconds(100))
        exit(0)
    }
}
