import Foundation
public import Logging
public import TetherBus

#if canImport(Glibc)
import Glibc
#endif

/// The whole set from compose/default.yaml in a private run directory and port; stopping it
/// (or dropping it) leaves no process behind.
public final class ComposedSet {
    public let run: TestRunDirectory
    /// Where the output of the commands a test runs goes: the run directory, unless told otherwise.
    public let outputs: TestRunDirectory
    public let port: Int
    public let supervisor: ChildProcess
    /// Where the set keeps what must last: the run directory, unless the set runs in a ``DesktopHome``.
    public let statePath: String
    /// The desktop home the set runs in, if it does.
    public let desktop: DesktopHome?

    /// Starts the set of `file` (in compose/); `environment` adds to or overrides the compose file's variables;
    /// with `namespace`, every program runs inside that network namespace. The connection
    /// is not suspended when front ends leave unless `TETHER_IDLE_SUSPEND` says so: a test's
    /// `tether send` must not suspend the set under the next step.
    /// With `reusing`, the set starts again in that set's run directory (stopped before) and on its port;
    /// with `in`, in that run directory, and the output of the commands the test runs in `outputs`.
    /// With `desktop` (or a `reusing` set that ran in one), the set names no directory: it
    /// finds its run and state directories from that home's `XDG_*` variables.
    public init(
        file: String = "default.yaml", environment: [String: String] = [:], namespace: NetworkNamespace? = nil, reusing earlier: ComposedSet? = nil,
        in directory: TestRunDirectory? = nil, outputs: TestRunDirectory? = nil, desktop: DesktopHome? = nil
    ) async throws {
        let desktop = desktop ?? earlier?.desktop
        self.desktop = desktop
        if let desktop {
            run = try earlier?.run ?? TestRunDirectory(path: desktop.run)
            // Logout removed it: made again for the outputs of the test's commands.
            try FileManager.default.createDirectory(atPath: run.path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } else {
            run = try earlier?.run ?? directory ?? TestRunDirectory()
        }
        statePath = desktop?.state ?? run.path
        self.outputs = outputs ?? run
        port = try earlier?.port ?? freePort()
        let arguments =
            ["up", "--file", Programs.packageRoot + "/compose/" + file, "--bin-dir", Programs.directory] + (desktop == nil ? ["--run-dir", run.path] : [])
        let (executable, fullArguments) =
            namespace?.command(Programs.path("tether-compose"), arguments) ?? (Programs.path("tether-compose"), arguments)
        supervisor = try ChildProcess(
            executable, fullArguments,
            // The OpenClaw device key and tokens go to the test's own configuration directory.
            environment: ["TETHER_IDLE_SUSPEND": "0", "XDG_CONFIG_HOME": run.path + "/config"].merging(desktop?.environment ?? [:]) { $1 }
                .merging(environment) { $1 }.merging([
                    "TETHER_GATEWAY_PORT": "\(port)"
                ]) { $1 },
            outputDirectory: run.path, name: "compose")
        let ready = await eventually(timeout: .seconds(30)) {
            guard let state = self.state() else { return false }
            return state.programs.allSatisfy { $0.ready }
        }
        if !ready {
            throw TestFailure("the set did not become ready:\n\(supervisor.standardOutput)\n\(supervisor.standardError)")
        }
    }

    deinit {
        stop()
    }

    public func state() -> ComposeStateFile? {
        guard let data = FileManager.default.contents(atPath: run.path + "/compose/state.json") else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try? decoder.decode(ComposeStateFile.self, from: data)
    }

    /// Runs `tether-compose` with `arguments` against the set and waits for it.
    public func compose(_ arguments: [String], timeout: Duration = .seconds(60)) throws -> ChildProcess {
        let process = try ChildProcess(
            Programs.path("tether-compose"), arguments + ["--run-dir", run.path], outputDirectory: outputs.path, name: "compose-\(arguments[0])")
        try process.waitForExit(timeout: timeout)
        return process
    }

    /// A bus client of the set's bus, named `source` on the bus and in its log.
    public func busClient(_ source: String) throws -> BusClient {
        try BusClient(source: source, runDirectory: run.runDirectory, logger: Logger(label: source))
    }

    /// Runs a front-end command against the set and waits for it.
    public func tether(_ arguments: [String], timeout: Duration = .seconds(30)) throws -> ChildProcess {
        let process = try ChildProcess(Programs.path("tether"), arguments + ["--run-dir", run.path], outputDirectory: outputs.path)
        try process.waitForExit(timeout: timeout)
        return process
    }

    /// `tether-compose down`, then whatever is left is killed: also a supervisor the test
    /// started again in the same run directory after its own died.
    public func stop() {
        let current = state()?.supervisorPID
        if supervisor.isRunning || current.map({ kill($0, 0) == 0 }) == true {
            if let down = try? ChildProcess(Programs.path("tether-compose"), ["down", "--run-dir", run.path], outputDirectory: outputs.path, name: "down") {
                _ = try? down.waitForExit(timeout: .seconds(40))
            }
        }
        supervisor.stop()
        if let current, current > 1, kill(current, 0) == 0 { kill(current, SIGKILL) }
        for program in state()?.programs ?? [] {
            if let pid = program.pid, kill(pid, 0) == 0 { kill(-pid, SIGKILL) }
        }
    }

    public func gatewayRecord() -> [[String: Any]] {
        let text = (try? String(contentsOfFile: statePath + "/gateway-record.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// How many times the gateway received each content.
    public func receipts() -> [String: Int] {
        var counts: [String: Int] = [:]
        for content in gatewayRecord().compactMap({ $0["content"] as? String }) { counts[content, default: 0] += 1 }
        return counts
    }

    /// The set against a gateway without Tether's additions: the development gateway as a
    /// seed-only peer (`strictSeed`: no duplicate suppression, no session resume, no
    /// `replyTo`). `faults` continues its fault switches' JSON (`, "omitFinalChunk": true`).
    public static func seedPeer(faults: String = "", environment: [String: String] = [:]) async throws -> ComposedSet {
        try await ComposedSet(environment: ["TETHER_GATEWAY_FAULTS": #"{"strictSeed": true\#(faults)}"#].merging(environment) { $1 })
    }

    /// The set in the OpenClaw dialect, against the development gateway behaving as OpenClaw
    /// `release` (2026.4, 2026.5 or current), speaking protocol versions `protocols` (`release`:
    /// the release's), with the fault switches `faults`.
    public static func openClaw(
        release: String = "2026.4", protocols: String = "3-4", faults: String = "{}", environment: [String: String] = [:]
    ) async throws -> ComposedSet {
        try await ComposedSet(
            environment: [
                "TETHER_DIALECT": "openclaw", "TETHER_GATEWAY_OPENCLAW": release, "TETHER_GATEWAY_PROTOCOLS": protocols, "TETHER_GATEWAY_FAULTS": faults,
            ].merging(environment) { $1 })
    }
}

/// The parts of compose/state.json the tests read.
public struct ComposeStateFile: Decodable, Sendable {
    public struct Program: Decodable, Sendable {
        public var name: String
        public var phase: String
        public var pid: Int32?
        public var ready: Bool
        public var restarts: Int
    }
    public var supervisorPID: Int32
    public var programs: [Program]
}

extension ComposedSet {
    /// The gateway's token, from the run directory.
    public var gatewayToken: String {
        get throws {
            try String(contentsOfFile: run.path + "/gateway.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// Sends `method` to the gateway's fault switches with a JSON body.
    public func faults(_ json: String, method: String = "POST") async throws {
        try await setGatewayFaults(port: port, token: try gatewayToken, json, method: method)
    }

    /// The pid of a program of the set.
    public func pid(of name: String) -> Int32? {
        state()?.programs.first { $0.name == name }?.pid
    }

    /// Waits until compose has started `name` again in place of `oldPID` and it is ready.
    public func awaitRestart(of name: String, replacing oldPID: Int32, timeout: Duration = .seconds(15)) async -> Bool {
        await eventually(timeout: timeout) {
            guard let program = self.state()?.programs.first(where: { $0.name == name }) else { return false }
            return program.pid != oldPID && program.ready
        }
    }

    /// SIGKILLs `name` and waits until compose has it running and ready again.
    public func killAndAwaitRestart(_ name: String) async throws -> Bool {
        guard let pid = pid(of: name) else { throw TestFailure("\(name) is not running") }
        kill(pid, SIGKILL)
        return await awaitRestart(of: name, replacing: pid)
    }

    /// OpenClaw: the development gateway's transcript of a session, from its state directory.
    public func openClawTranscript(session: String = "agent:main:main") -> [(role: String, text: String)] {
        let name = Data(session.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        let text = (try? String(contentsOfFile: run.path + "/gateway-state/session-\(name).jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let role = object["role"] as? String else {
                return nil
            }
            let blocks = object["content"] as? [[String: Any]] ?? []
            return (role, blocks.compactMap { $0["text"] as? String }.joined(separator: "\n"))
        }
    }

    /// OpenClaw: approves a pairing request with `tether-gateway approve`.
    public func approve(_ requestID: String) throws -> ChildProcess {
        let process = try ChildProcess(
            Programs.path("tether-gateway"), ["approve", requestID, "--port", "\(port)", "--token-file", run.path + "/gateway.token"],
            outputDirectory: run.path, name: "approve")
        _ = try process.waitForExit(timeout: .seconds(15))
        return process
    }

    /// A program's log so far.
    public func log(of name: String) -> String {
        (try? String(contentsOfFile: run.path + "/compose/logs/\(name).log", encoding: .utf8)) ?? ""
    }
}
