#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Foundation
import TetherService

/// Tells when the kernel's links, addresses or routes change: an rtnetlink socket subscribed
/// to their multicast groups, read on a thread of its own.
///
/// What changed is not parsed here: any message means "look again", and the reader of
/// ``events`` coalesces a burst into one look.
final class RouteEvents: Sendable {
    /// One element per batch of kernel messages read.
    let events: AsyncStream<Void>
    private let descriptor: Int32
    private let stopped = OnceFlag()

    /// Opens and binds the socket; throws when rtnetlink is not available.
    init() throws {
        let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_ROUTE)
        guard fd >= 0 else { throw RouteEventsError("cannot open an rtnetlink socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = tether_rtnetlink_groups()
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
        }
        guard bound == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw RouteEventsError("cannot subscribe to rtnetlink: \(message)")
        }
        // Wake up twice a second to notice stop(): closing a socket does not interrupt a recv.
        var timeout = timeval(tv_sec: 0, tv_usec: 500_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        descriptor = fd
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        events = stream
        let stopped = self.stopped
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while !stopped.isSet {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    continuation.yield(())
                } else if count < 0 && (errno == EINTR || errno == EAGAIN) {
                    continue
                } else if count < 0 && errno == ENOBUFS {
                    // The kernel dropped messages: the state must be read again all the same.
                    continuation.yield(())
                } else {
                    break
                }
            }
            continuation.finish()
        }
        thread.name = "tether-netmon-rtnetlink"
        thread.start()
    }

    /// Stops the reading thread (within half a second).
    func stop() {
        stopped.set()
    }

    deinit {
        close(descriptor)
    }
}

struct RouteEventsError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
