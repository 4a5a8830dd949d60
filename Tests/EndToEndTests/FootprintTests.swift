import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting

/// The bus, the network monitor, the connection manager and tether-notify run on FoundationEssentials
/// alone: the full Foundation, its ICU data and FoundationInternationalization (about 8 MB
/// resident a program) are not loaded. One `import Foundation` in a module they link would
/// bring them back.
@Suite struct FootprintTests {
    @Test(arguments: ["tether-bus", "tether-netmon", "tether-connd", "tether-notify"])
    func theSmallProgramsDoNotLoadTheFullFoundation(program: String) async throws {
        let run = try TestRunDirectory()
        let bus = try ChildProcess(Programs.path("tether-bus"), ["--run-dir", run.path], outputDirectory: run.path)
        defer { bus.stop() }
        // connd runs trying to reach a gateway that is not there.
        let arguments = program == "tether-connd" ? ["--url", "ws://127.0.0.1:9/ws"] : []
        let process =
            program == "tether-bus"
            ? bus
            : try ChildProcess(
                Programs.path(program), ["--run-dir", run.path] + arguments, environment: ["TETHER_TOKEN": "footprint"], outputDirectory: run.path)
        defer { if process !== bus { process.stop() } }
        var libraries: [String] = []
        let loaded = await eventually {
            // The dynamic loader maps every library before main; the bus's socket shows main ran.
            // Read to its end: Foundation stops at the first short read, which for this file is its first page of lines.
            libraries = ((try? TextFile.read("/proc/\(process.pid)/maps")) ?? "")
                .split(separator: "\n").compactMap { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst(5).first.map(String.init) }
            return libraries.contains { $0.hasSuffix("/libFoundationEssentials.so") }
                && FileManager.default.fileExists(atPath: run.path + "/" + Endpoints.busIn)
        }
        #expect(loaded, "\(program) did not start: \(process.standardError)")
        let full = libraries.filter { $0.hasSuffix("/libFoundation.so") || $0.contains("FoundationInternationalization") || $0.contains("_FoundationICU") }
        #expect(full.isEmpty, "\(program) loads \(Set(full).sorted())")
    }
}
