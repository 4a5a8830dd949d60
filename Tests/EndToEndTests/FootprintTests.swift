import Foundation
import Testing
import TetherTesting

/// Every program maps the one libTetherKit.so for the code they share, and none carries a
/// copy of it: a package product linked into a program beside the library would put a
/// second copy of its code (and of its types) in that program. (The programs load the
/// whole of Foundation through the library since it holds Hummingbird and GRDB: see
/// docs/BENCHMARKS.md, "One copy of the code".)
@Suite struct FootprintTests {
    static let programs = [
        "tether", "tether-bus", "tether-netmon", "tether-connd", "tether-protod", "tether-snapd", "tether-tap", "tether-web", "tether-gateway",
        "tether-compose", "tether-notify",
    ]

    /// Mangled-name prefixes of modules that live in the library only. A program defines the
    /// nominal type descriptors (`Mn`) of its own types alone: one of these modules' means the
    /// program holds a copy of the module (what a client emits of another module's types,
    /// outlined copies and witness table caches, has other suffixes).
    static let sharedModules = ["$s9TetherBus", "$s12TetherSchema", "$s10TetherWire", "$s7Logging", "$s7NIOCore", "$s16ServiceLifecycle", "$s14ArgumentParser"]

    @Test(arguments: programs)
    func eachProgramLinksTheSharedLibraryAndHoldsNoCopyOfIt(program: String) throws {
        let path = Programs.path(program)
        let run = try TestRunDirectory()
        let ldd = try ChildProcess("/usr/bin/ldd", [path], outputDirectory: run.path, name: "ldd-\(program)")
        #expect(try ldd.waitForExit(timeout: .seconds(30)) == 0)
        let library = ldd.standardOutput.split(separator: "\n").first { $0.contains("libTetherKit.so") }
        #expect(library?.contains("not found") == false, "\(program) does not find libTetherKit.so: \(ldd.standardOutput)")
        let nm = try ChildProcess("/usr/bin/nm", ["--defined-only", path], outputDirectory: run.path, name: "nm-\(program)")
        #expect(try nm.waitForExit(timeout: .seconds(60)) == 0, "\(nm.standardError)")
        let copied = nm.standardOutput.split(separator: "\n").compactMap { $0.split(separator: " ").last }.filter { symbol in
            symbol.hasSuffix("Mn") && Self.sharedModules.contains { symbol.hasPrefix($0) }
        }
        #expect(copied.isEmpty, "\(program) holds code of the shared library's modules: \(copied.prefix(5))")
    }
}
