#if canImport(Glibc)
import Glibc
#endif

/// Reads a small text file (a key, a token, an allow-list) whole, with the system's own words
/// for why it cannot: "No such file or directory", "Permission denied".
public enum TextFile {
    /// Why a file could not be read.
    public struct ReadError: Error, CustomStringConvertible, Sendable {
        public let errno: Int32
        public var description: String { String(cString: strerror(errno)) }
    }

    /// The file's contents as UTF-8 (invalid bytes repaired).
    public static func read(_ path: String) throws(ReadError) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ReadError(errno: errno) }
        defer { close(descriptor) }
        var contents: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReadError(errno: errno)
            }
            if count == 0 { break }
            contents.append(contentsOf: buffer[..<count])
        }
        return String(decoding: contents, as: UTF8.self)
    }
}
