import CLinux
import FoundationEssentials
public import Logging
public import ServiceLifecycle
import TetherBus

#if canImport(Glibc)
import Glibc
#endif

/// A program started by a compose supervisor stops when the supervisor is gone (killed,
/// crashed), as it would stop with it: nothing is left running without the supervisor that
/// restarts and stops it. The supervisor names itself in `TETHER_SUPERVISOR_PID`; its death
/// shows on a pidfd (on a kernel without them, as the program's parent changing, looked at
/// twice a second).
public struct SupervisorWatch: Service {
    /// The variable the supervisor sets for its programs.
    public static let environmentVariable = "TETHER_SUPERVISOR_PID"

    let supervisor: pid_t
    let logger: Logger

    /// The watch for this process, if a supervisor started it.
    public static func fromEnvironment(logger: Logger) -> SupervisorWatch? {
        guard let value = ProcessInfo.processInfo.environment[environmentVariable], let pid = pid_t(value), pid > 1, getppid() == pid else {
            return nil
        }
        return SupervisorWatch(supervisor: pid, logger: logger)
    }

    public func run() async throws {
        // Ends with the program's own shutdown, whatever started it.
        await cancelWhenGracefulShutdown {
            if let exited = Self.exitDescriptor(of: supervisor) {
                // Nothing wakes until the supervisor ends: a thread waits on its pidfd.
                Self.onReadable(exited) { [self] waited in
                    if waited {
                        supervisorGone()
                    } else {
                        logger.warning("cannot wait for the compose supervisor (pid \(supervisor)) to end: this program will not stop with it")
                    }
                }
            } else {
                while (try? await Task.sleep(for: .milliseconds(500))) != nil {
                    guard getppid() != supervisor else { continue }
                    supervisorGone()
                    break
                }
            }
            try? await gracefulShutdown()
        }
    }

    private func supervisorGone() {
        logger.warning("the compose supervisor (pid \(supervisor)) is gone: stopping with it")
        // The same shutdown as a SIGTERM: every service ends in order.
        kill(getpid(), SIGTERM)
    }

    /// A pidfd of `pid`, if the kernel has them and it is still this process's parent.
    private static func exitDescriptor(of pid: pid_t) -> Int32? {
        let descriptor = tether_pidfd_open(pid)
        guard descriptor >= 0 else { return nil }
        // Opened after checking the parent: had it ended in between, the pid may name another process.
        guard getppid() == pid else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    /// Calls `action` once `descriptor` is readable (true), or once waiting for it failed
    /// (false), from a thread that waits for nothing else (it ends with the process if that
    /// comes first).
    private static func onReadable(_ descriptor: Int32, _ action: @escaping @Sendable (Bool) -> Void) {
        startDetachedThread(name: "supervisor-watch") {
            var item = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            var result: Int32
            repeat { result = poll(&item, 1, -1) } while result < 0 && errno == EINTR
            close(descriptor)
            action(result > 0)
        }
    }
}
