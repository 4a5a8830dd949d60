public import FoundationEssentials
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// The private directory where the bus endpoints, locks and program state live.
///
/// `$TETHER_RUN`, else `$XDG_RUNTIME_DIR/tether`, else `/tmp/tether-<uid>`; created 0700.
public struct RunDirectory: Sendable, Hashable, CustomStringConvertible {
    /// The directory's absolute path.
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// The run directory named by `explicit`, else by the environment.
    public static func resolve(_ explicit: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) -> RunDirectory {
        if let explicit, !explicit.isEmpty { return RunDirectory(path: explicit) }
        if let run = environment["TETHER_RUN"], !run.isEmpty { return RunDirectory(path: run) }
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty { return RunDirectory(path: xdg + "/tether") }
        return RunDirectory(path: "/tmp/tether-\(getuid())")
    }

    public var description: String { path }

    /// Creates the directory 0700 if needed, and refuses one that others could use.
    public func prepare() throws(BusError) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            let code = errno
            // A missing parent: create it (owner-only too), then this directory.
            if code == ENOENT {
                do {
                    try FileManager.default.createDirectory(
                        atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                } catch {
                    throw .system(call: "mkdir \(path)", errno: code, message: String(describing: error))
                }
            } else {
                throw .system(call: "mkdir \(path)", errno: code, message: String(cString: strerror(code)))
            }
        }
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw .system(call: "stat \(path)", errno: errno, message: String(cString: strerror(errno)))
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .unsafeRunDirectory(path: path, reason: "it is not a directory")
        }
        guard info.st_uid == getuid() else {
            throw .unsafeRunDirectory(path: path, reason: "it belongs to uid \(info.st_uid), not to this user")
        }
        if info.st_mode & 0o077 != 0 {
            // Ours but open to others: close it rather than refuse, as ssh-agent does with its own directory.
            guard chmod(path, 0o700) == 0 else {
                throw .unsafeRunDirectory(path: path, reason: "it is readable by others and chmod failed")
            }
        }
    }

    /// The path of a file in the directory.
    public func file(_ name: String) -> String {
        path + "/" + name
    }

    /// The `ipc://` endpoint of a socket in the directory.
    public func endpoint(_ name: String) throws(BusError) -> String {
        let socketPath = file(name)
        // sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
        guard socketPath.utf8.count <= 107 else { throw .endpointTooLong(path: socketPath) }
        return "ipc://" + socketPath
    }
}

/// An exclusive lock on a file in the run directory, held until released or the process ends.
///
/// An ipc bind silently takes the path from a running binder, so every program that
/// binds an endpoint holds its lock first.
public final class LockFile: Sendable {
    private let descriptor: Int32
    /// The lock file's path.
    public let path: String

    /// Takes the lock at `path`, or throws ``BusError/alreadyRunning(name:holder:)``.
    public init(path: String, name: String) throws(BusError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw .system(call: "open \(path)", errno: errno, message: String(cString: strerror(errno)))
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let holder = (try? TextFile.read(path))?.trimmingWhitespace()
            close(fd)
            throw .alreadyRunning(name: name, holder: holder?.isEmpty == false ? holder : nil)
        }
        let pid = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pid.withCString { write(fd, $0, strlen($0)) }
        self.descriptor = fd
        self.path = path
    }

    deinit {
        close(descriptor)
    }
}
