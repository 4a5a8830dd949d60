import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection to the gateway's port, opened and closed at once: tells a gateway that
/// is back apart from one still restarting without a WebSocket handshake.
enum GatewayKnock {
    enum Answer: Equatable {
        /// Something listens on the port.
        case accepted
        /// The host answered that nothing listens (a reset): the gateway is restarting.
        case refused
        /// No answer in time, or the host cannot be reached: knocking again will not help.
        case silent
    }

    static func knock(host: String, port: Int, timeout: TimeAmount = .milliseconds(200)) async -> Answer {
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(timeout)
                .connect(host: host, port: port)
                .get()
            try? await channel.close()
            return .accepted
        } catch let error as NIOConnectionError {
            let refused = error.connectionErrors.contains { ($0.error as? IOError)?.errnoCode == ECONNREFUSED }
            return refused ? .refused : .silent
        } catch let error as IOError where error.errnoCode == ECONNREFUSED {
            return .refused
        } catch {
            return .silent
        }
    }
}
