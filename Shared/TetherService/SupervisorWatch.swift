#if canImport(Glibc)
import Glibc
#endif
import Foundation
public import Logging
public import ServiceLifecycle

/// A program started by a compose supervisor stops when the supervisor is gone (killed,
/// crashed), as it would stop with it: nothing is left running without the supervisor that
/// restarts and stops it. The supervisor names itself in `TETHER_SUPERVISOR_PID`; its death
/// shows as the program's parent changing.
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
        try await cancelWhenGracefulShutdown {
            while (try? await Task.sleep(for: .milliseconds(500))) != nil {
                guard getppid() != supervisor else { continue }
                logger.warning("the compose supervisor (pid \(supervisor)) is gone: stopping with it")
                // The same shutdown as a SIGTERM: every service ends in order.
                kill(getpid(), SIGTERM)
                break
            }
            try? await gracefulShutdown()
        }
    }
}
