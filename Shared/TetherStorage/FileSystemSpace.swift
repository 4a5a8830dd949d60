import Foundation
import TetherBus

#if canImport(Glibc)
import Glibc
#endif

/// The file system holding a path and the room left on it: the words a full disk is told in.
public struct FileSystemSpace: Sendable, Equatable {
    /// Where the file system is mounted (`/`, `/run/user/1000`…).
    public var mountPoint: String
    /// Its type as the kernel names it (`ext4`, `tmpfs`…), when known.
    public var type: String?
    /// Bytes an unprivileged writer may still use.
    public var availableBytes: Int64
    /// The file system's size.
    public var totalBytes: Int64

    public init(mountPoint: String, type: String?, availableBytes: Int64, totalBytes: Int64) {
        self.mountPoint = mountPoint
        self.type = type
        self.availableBytes = availableBytes
        self.totalBytes = totalBytes
    }

    /// The file system holding `path` (or, when it does not exist yet, its nearest existing parent).
    public static func of(_ path: String) -> FileSystemSpace? {
        var existing = URL(fileURLWithPath: path).standardizedFileURL.path
        while !FileManager.default.fileExists(atPath: existing), existing != "/" {
            existing = (existing as NSString).deletingLastPathComponent
        }
        var stats = statvfs()
        guard statvfs(existing, &stats) == 0 else { return nil }
        let mount = mountEntry(holding: existing)
        return FileSystemSpace(
            mountPoint: mount?.point ?? "/", type: mount?.type,
            availableBytes: Int64(stats.f_bavail) * Int64(stats.f_frsize), totalBytes: Int64(stats.f_blocks) * Int64(stats.f_frsize))
    }

    /// The deepest mount point that holds `path`, from /proc/self/mountinfo.
    private static func mountEntry(holding path: String) -> (point: String, type: String)? {
        // Read to its end: Foundation stops at the first short read, which for this file is its first page of lines.
        guard let table = try? TextFile.read("/proc/self/mountinfo") else { return nil }
        var best: (point: String, type: String)?
        for line in table.split(separator: "\n") {
            // id parent major:minor root mount-point options [optional…] - type source super-options
            let fields = line.split(separator: " ")
            guard fields.count > 4, let separator = fields.firstIndex(of: "-"), separator + 1 < fields.count else { continue }
            let point = unescape(String(fields[4]))
            let holds = path == point || point == "/" || path.hasPrefix(point.hasSuffix("/") ? point : point + "/")
            if holds, point.count >= (best?.point.count ?? 0) { best = (point, String(fields[separator + 1])) }
        }
        return best
    }

    /// mountinfo writes a space, tab, newline and backslash in a path as octal escapes.
    private static func unescape(_ field: String) -> String {
        field.replacingOccurrences(of: "\\040", with: " ").replacingOccurrences(of: "\\011", with: "\t")
            .replacingOccurrences(of: "\\012", with: "\n").replacingOccurrences(of: "\\134", with: "\\")
    }

    /// "tmpfs at /run/tether, 0 bytes of 1 MB free".
    public var words: String {
        "\(type.map { "\($0) at " } ?? "")\(mountPoint), \(Self.bytes(availableBytes)) of \(Self.bytes(totalBytes)) free"
    }

    /// A size for people: 0 bytes, 12 KB, 3.4 MB, 1.2 GB.
    public static func bytes(_ count: Int64) -> String {
        switch count {
        case ..<1000: "\(count) bytes"
        case ..<1_000_000: "\(count / 1000) KB"
        case ..<1_000_000_000: String(format: "%.1f MB", Double(count) / 1e6)
        default: String(format: "%.1f GB", Double(count) / 1e9)
        }
    }
}
