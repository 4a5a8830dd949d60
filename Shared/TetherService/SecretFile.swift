import FoundationEssentials
public import TetherBus
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// An error reading or keeping a secret.
public typealias SecretFileError = CodedError<SecretFileErrorCode>

/// What went wrong with a secret.
public enum SecretFileErrorCode: String, ErrorCode {
    /// The file, or the variable, is not there or cannot be read.
    case unreadable
    /// Others may read or write the file: refused, as ssh refuses such a key.
    case tooOpen
    /// Not a regular file (or, where keys are kept, not a directory).
    case wrongKind
    /// There, but empty or not what it should hold.
    case unusable
    /// No source of the secret was given.
    case notGiven
    /// It could not be written.
    case unwritable
    /// The system's secret service cannot be asked, or has no such secret.
    case secretService
    /// This system cannot make such a secret (a libzmq without CURVE).
    case unsupported
}

/// Reads secrets (tokens, keys) from files that only their owner can read.
public enum SecretFile {
    /// Reads the first line of `path`. Refuses, as ssh does, a file that the group or
    /// others can read or write, a file that is not a regular file, and an empty one.
    /// `kind` names the file in errors.
    public static func read(_ path: String, kind: String = "token file") throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw SecretFileError(.unreadable, "cannot read \(kind) \(path): \(String(cString: strerror(errno)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw SecretFileError(.wrongKind, "\(kind) \(path) is not a regular file")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw SecretFileError(
                .tooOpen, "\(kind) \(path) has permissions \(String(mode, radix: 8)): it must not be readable by others; run chmod 600 \(path)")
        }
        let contents: String
        do {
            contents = try TextFile.read(path)
        } catch {
            throw SecretFileError(.unreadable, "cannot read \(kind) \(path): \(error)")
        }
        let token = contents.split(whereSeparator: \.isNewline).first.map(String.init)?.trimmingWhitespace() ?? ""
        guard !token.isEmpty else {
            throw SecretFileError(.unusable, "\(kind) \(path) is empty")
        }
        return token
    }

    /// The token from `file` if one is named, else from the environment variable `variable`.
    public static func token(file: String?, environmentVariable variable: String) throws -> String {
        if let file { return try read(file) }
        if let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty { return value }
        throw SecretFileError(.notGiven, "no token: pass --token-file FILE (mode 0600) or set \(variable)")
    }

    /// A new random token: 32 random bytes as 64 hexadecimal digits.
    public static func newToken() -> String {
        (0..<32).map { _ in UInt8.random(in: 0...255) }.lowercaseHex
    }

    /// Writes `secret` to `path` with mode 0600, replacing the file atomically.
    public static func write(_ secret: String, to path: String) throws {
        let temporary = path + ".tmp.\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw SecretFileError(.unwritable, "cannot create \(temporary): \(String(cString: strerror(errno)))")
        }
        let line = secret + "\n"
        let written = line.withCString { Glibc.write(fd, $0, strlen($0)) }
        let synced = fsync(fd)
        close(fd)
        guard written == line.utf8.count, synced == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw SecretFileError(.unwritable, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
