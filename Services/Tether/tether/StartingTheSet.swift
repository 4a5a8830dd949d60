import Foundation
import FrontEnd
import TetherBus
import TetherSchema
import TetherService

#if canImport(Glibc)
import Glibc
#endif

/// Starting the set for `tether`, `tether send` and `tether watch` when none runs in the run
/// directory (``SetStart`` decides; this carries it out).
enum StartingTheSet {
    /// Starts the set when none runs and the user set one up; returns once it is ready, or
    /// at once when it ran already or is not to be started (the command's failure then says how).
    static func ensureRunning(_ options: ProgramOptions, _ remote: RemoteBusOptions) async {
        let runDirectory = options.resolvedRunDirectory
        guard (try? remote.remoteBus()) ?? nil == nil, !busAnswers(at: runDirectory.file(Endpoints.busIn)) else { return }
        switch decision(options, remote) {
        case .explain:
            return
        case .unit:
            say("the set is not running: starting it (systemctl --user start tether)")
            if await ProgramProcess.runToEnd("systemctl", arguments: ["--user", "start", "tether"]) == 0 {
                if await waitForTheBus(runDirectory.file(Endpoints.busIn), timeout: .seconds(60)) { return }
                say("the tether user unit started but the set is not answering yet: systemctl --user status tether says why")
            } else {
                say("systemctl --user start tether failed: starting the set with tether-compose instead")
            }
            await compose(["up", "--detach"])
        case .compose(let arguments):
            say("the set is not running: starting it (tether-compose \(arguments.joined(separator: " ")))")
            await compose(arguments)
        }
    }

    /// The one line that says how to start the set, when it was not started.
    static func howTo(_ options: ProgramOptions, _ remote: RemoteBusOptions) -> String {
        switch decision(options, remote) {
        case .explain(let words): words
        case .unit: "start it with systemctl --user start tether"
        case .compose(let arguments): "start it with tether-compose " + arguments.joined(separator: " ")
        }
    }

    private static func decision(_ options: ProgramOptions, _ remote: RemoteBusOptions) -> SetStart {
        let environment = ProcessInfo.processInfo.environment
        let settings = (try? SettingsFile.user().values()) ?? [:]
        let composeFile = environment["TETHER_COMPOSE_FILE"] ?? settings["TETHER_COMPOSE_FILE"]
        return SetStart.decide(
            setUp: composeFile.map { !$0.isEmpty } ?? false, unitInstalled: unitInstalled(environment),
            runDirectory: options.runDirectory ?? environment["TETHER_RUN"].flatMap { $0.isEmpty ? nil : $0 },
            autostart: environment["TETHER_AUTOSTART"] != "0", remote: ((try? remote.remoteBus()) ?? nil) != nil)
    }

    /// Whether the `tether` user unit is installed where systemd looks for user units.
    private static func unitInstalled(_ environment: [String: String]) -> Bool {
        let home = environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
        let data = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/share"
        let places = [data + "/systemd/user", "/usr/lib/systemd/user", "/usr/local/lib/systemd/user", "/etc/systemd/user"]
        return places.contains { FileManager.default.fileExists(atPath: $0 + "/tether.service") }
    }

    /// Runs tether-compose (beside this program) to its end; it waits for the set to be ready itself.
    private static func compose(_ arguments: [String]) async {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let program = URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("tether-compose").path
        let status = await ProgramProcess.runToEnd(FileManager.default.isExecutableFile(atPath: program) ? program : "tether-compose", arguments: arguments)
        if status != 0 { say("tether-compose \(arguments.joined(separator: " ")) exited with \(status): tether-compose ps and logs say why") }
    }

    /// Whether something accepts connections on the bus's socket (a socket file left by a
    /// killed proxy refuses them).
    static func busAnswers(at path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
    }

    private static func waitForTheBus(_ path: String, timeout: Duration) async -> Bool {
        let end = ContinuousClock.now + timeout
        while ContinuousClock.now < end {
            if busAnswers(at: path) { return true }
            try? await Task.sleep(for: .milliseconds(200))
        }
        return false
    }

    private static func say(_ words: String) {
        FileHandle.standardError.write(Data("tether: \(words)\n".utf8))
    }
}
