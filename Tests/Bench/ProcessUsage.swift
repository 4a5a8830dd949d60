import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A process's CPU time, wakeups and memory, from /proc.
struct ProcessUsage {
    /// User and system CPU time, in seconds.
    var cpuSeconds: Double
    /// The peak resident set (VmHWM), in megabytes: shared libraries count in full.
    var peakMegabytes: Double
    /// The pages only this process uses now (private clean and dirty), in megabytes.
    var privateMegabytes: Double
    /// Its proportional share of the memory it maps now (a page shared by n processes counts 1/n), in megabytes.
    var proportionalMegabytes: Double
    /// Times each of its threads now running was switched out (voluntary and not), by thread
    /// id: each wait for an event or a timer is one.
    var contextSwitches: [Int: Int]

    /// The context switches since `earlier` of the threads running now: a thread started
    /// since counts whole; one that ended since is missed (its count goes with it).
    func contextSwitches(since earlier: ProcessUsage) -> Int {
        contextSwitches.reduce(0) { total, thread in total + thread.value - (earlier.contextSwitches[thread.key] ?? 0) }
    }

    init?(pid: Int32) {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let afterName = stat.range(of: ")", options: .backwards)
        else { return nil }
        // After the name: state is field 3, utime and stime are fields 14 and 15.
        let fields = stat[afterName.upperBound...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        cpuSeconds = (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        let peakLine = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
        let kilobytes = peakLine.flatMap { Double($0.split(whereSeparator: \.isWhitespace).dropFirst().first ?? "") } ?? 0
        peakMegabytes = kilobytes / 1024
        let rollup = (try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)) ?? ""
        let privateKilobytes = rollup.split(separator: "\n").filter { $0.hasPrefix("Private_") }.compactMap {
            Double($0.split(whereSeparator: \.isWhitespace).dropFirst().first ?? "")
        }
        privateMegabytes = privateKilobytes.reduce(0, +) / 1024
        let proportionalLine = rollup.split(separator: "\n").first { $0.hasPrefix("Pss:") }
        proportionalMegabytes = (proportionalLine.flatMap { Double($0.split(whereSeparator: \.isWhitespace).dropFirst().first ?? "") } ?? 0) / 1024
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        contextSwitches = Dictionary(
            uniqueKeysWithValues: threads.compactMap { thread -> (Int, Int)? in
                guard let id = Int(thread), let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8) else {
                    return nil
                }
                let switches = status.split(separator: "\n").filter { $0.hasPrefix("voluntary_ctxt_switches:") || $0.hasPrefix("nonvoluntary_ctxt_switches:") }
                    .compactMap { Int($0.split(whereSeparator: \.isWhitespace).last ?? "") }.reduce(0, +)
                return (id, switches)
            })
    }
}
