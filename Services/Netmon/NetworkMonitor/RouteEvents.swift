import CLinux
import FoundationEssentials
import TetherBus
import TetherService

#if canImport(Glibc)
import Glibc
#endif

/// Tells when the kernel's links, addresses or routes change: an rtnetlink socket subscribed
/// to their multicast groups, read on a thread of its own.
///
/// What changed is not parsed here: any message means "look again", and the reader of
/// ``events`` coalesces a burst into one look.
final class RouteEvents: Sendable {
    /// One element per batch of kernel messages read.
    let events: AsyncStream<Void>
    /// Tells the reading thread to end.
    private let stopSignal: StopSignal

    /// Opens and binds the socket; throws when rtnetlink is not available.
    init() throws {
        let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_ROUTE)
        guard fd >= 0 else { throw RouteEventsError(.rtnetlink, "cannot open an rtnetlink socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = tether_rtnetlink_groups()
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
        }
        guard bound == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw RouteEventsError(.rtnetlink, "cannot subscribe to rtnetlink: \(message)")
        }
        // stop() writes to an eventfd: the reader waits on both, so it wakes only for the kernel or to stop.
        guard let wake = StopSignal() else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw RouteEventsError(.eventfd, "cannot make an eventfd: \(message)")
        }
        stopSignal = wake
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        events = stream
        startDetachedThread(name: "tether-netmon-rtnetlink") {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var items = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.descriptor, events: Int16(POLLIN), revents: 0)]
            reading: while true {
                guard poll(&items, 2, -1) >= 0 || errno == EINTR else { break }
                if items[1].revents != 0 { break }
                guard items[0].revents != 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if count > 0 {
                    continuation.yield(())
                } else if count < 0 && (errno == EINTR || errno == EAGAIN) {
                    continue
                } else if count < 0 && errno == ENOBUFS {
                    // The kernel dropped messages: the state must be read again all the same.
                    continuation.yield(())
                } else {
                    break reading
                }
            }
            continuation.finish()
            close(fd)
        }
    }

    /// Stops the reading thread, which closes the socket.
    func stop() {
        stopSignal.signal()
    }

    deinit {
        stop()
    }
}

/// An eventfd that a waiting thread polls beside what it reads: closed when neither the
/// owner nor the thread holds it any more, so a late signal never writes to a reused descriptor.
private final class StopSignal: Sendable {
    let descriptor: Int32

    init?() {
        descriptor = eventfd(0, Int32(EFD_CLOEXEC))
        guard descriptor >= 0 else { return nil }
    }

    func signal() {
        var one: UInt64 = 1
        _ = write(descriptor, &one, MemoryLayout<UInt64>.size)
    }

    deinit {
        close(descriptor)
    }
}

/// Why the kernel's route events cannot be followed (then the tables are read every second).
typealias RouteEventsError = CodedError<RouteEventsErrorCode>

/// What kept the route events from being followed.
enum RouteEventsErrorCode: String, ErrorCode {
    /// No rtnetlink socket, or no subscription to its groups.
    case rtnetlink
    /// No eventfd to stop the reader with.
    case eventfd
}
