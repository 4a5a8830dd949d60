import ArgumentParser
import Foundation
import FrontEnd
import Logging
import TetherBus
import TetherSchema
import TetherService

#if canImport(Glibc)
import Glibc
#endif

struct Setup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Point Tether at your OpenClaw gateway, found the way OpenClaw's own clients find it, then connect.",
        discussion: """
            Reads OpenClaw's configuration ($OPENCLAW_CONFIG_PATH, else ~/.openclaw/openclaw.json) and environment \
            (OPENCLAW_GATEWAY_URL, OPENCLAW_GATEWAY_PORT, OPENCLAW_GATEWAY_TOKEN) for the gateway's address and token, or asks \
            for them; writes the token to ~/.config/tether/openclaw.token (mode 0600) and Tether's settings to \
            ~/.config/tether/tether.env; starts the set (or restarts it when a setting changed) and says how the connection \
            went. A second run changes nothing it need not.
            """
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Option(help: "The gateway's WebSocket URL (ws:// or wss://), instead of the one OpenClaw's configuration names.")
    var url: String?

    @Option(help: "A file holding the gateway's token (mode 0600), instead of the one OpenClaw's configuration holds.")
    var tokenFile: String?

    @Flag(help: "Also enable the tether user unit, so that the set starts at login (systemctl --user enable --now tether).")
    var enable = false

    @Flag(help: "Write the settings only: neither start the set nor connect.")
    var noConnect = false

    @Option(help: "Seconds to wait for the connection.")
    var timeout: Double = 30

    func validate() throws {
        if let url, !(url.hasPrefix("ws://") || url.hasPrefix("wss://")) || URLComponents(string: url)?.host?.isEmpty != false {
            throw ValidationError("--url must be a ws:// or wss:// URL with a host, not \(url)")
        }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let gateway = try await ConfigurationProblem.guarding("tether") { try findGateway(environment: environment) }
        let directory = SettingsFile.configurationDirectory(environment: environment)
        let tokenPath = directory + "/openclaw.token"
        let settingsFile = SettingsFile.user(environment: environment)
        var changed = false
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if (try? SecretFile.read(tokenPath)) != gateway.token {
            try SecretFile.write(gateway.token, to: tokenPath)
            changed = true
            say("wrote the gateway's token to \(tokenPath) (mode 0600)")
        }
        let settings: [(name: String, value: String)] = [
            ("TETHER_COMPOSE_FILE", Self.installedComposeFile("openclaw.yaml")), ("TETHER_OPENCLAW_URL", gateway.url), ("TETHER_TOKEN_FILE", tokenPath),
        ]
        if try settingsFile.write(settings) {
            changed = true
            say("wrote Tether's settings to \(settingsFile.path): the set against the OpenClaw gateway at \(gateway.url)")
        }
        if !changed { say("already set up for the OpenClaw gateway at \(gateway.url): nothing changed") }
        guard !noConnect else { return }

        try await start(restart: changed)
        try await report(url: gateway.url)
    }

    // MARK: The gateway

    /// The gateway named on the command line, else found in OpenClaw's configuration, else asked for.
    private func findGateway(environment: [String: String]) throws -> OpenClawDiscovery.Gateway {
        let discovered = OpenClawDiscovery(environment: environment) { path in
            FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
        }.discover()
        var found: OpenClawDiscovery.Gateway?
        switch discovered {
        case .found(let gateway):
            found = gateway
            say("found the OpenClaw gateway at \(gateway.url) (\(gateway.urlOrigin)), its token in \(gateway.tokenOrigin)")
            for note in gateway.notes { say("note: \(note)") }
        case .notFound(let searched):
            if url == nil || tokenFile == nil, isatty(STDIN_FILENO) == 0 {
                throw ConfigurationProblem(
                    "no OpenClaw configuration was found (looked at \(searched.joined(separator: ", "))): pass --url and --token-file")
            }
        case .unusable(let words):
            if url == nil || tokenFile == nil { throw ConfigurationProblem(words) }
        }
        let address = try url ?? found?.url ?? ask("The gateway's URL", default: "ws://127.0.0.1:\(OpenClawDiscovery.defaultPort)")
        guard address.hasPrefix("ws://") || address.hasPrefix("wss://"), URLComponents(string: address)?.host?.isEmpty == false else {
            throw ConfigurationProblem("\(address) is not a ws:// or wss:// URL with a host")
        }
        let token = try tokenFile.map { try SecretFile.read($0) } ?? found?.token ?? askSecret("The gateway's token (gateway.auth.token)")
        return OpenClawDiscovery.Gateway(
            url: address, token: token, urlOrigin: url == nil ? found?.urlOrigin ?? "typed" : "--url",
            tokenOrigin: tokenFile ?? found?.tokenOrigin ?? "typed", notes: [])
    }

    private func ask(_ question: String, default answer: String) throws -> String {
        FileHandle.standardError.write(Data("\(question) [\(answer)]: ".utf8))
        guard let line = readLine() else { throw ConfigurationProblem("no answer to: \(question)") }
        let typed = line.trimmingCharacters(in: .whitespaces)
        return typed.isEmpty ? answer : typed
    }

    /// Reads a line without echoing it.
    private func askSecret(_ question: String) throws -> String {
        FileHandle.standardError.write(Data("\(question), not shown as you type: ".utf8))
        var saved = termios()
        let isTerminal = tcgetattr(STDIN_FILENO, &saved) == 0
        if isTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
        }
        defer {
            if isTerminal {
                tcsetattr(STDIN_FILENO, TCSANOW, &saved)
                FileHandle.standardError.write(Data("\n".utf8))
            }
        }
        guard let line = readLine()?.trimmingCharacters(in: .whitespaces), !line.isEmpty else {
            throw ConfigurationProblem("no token was typed: the gateway's token is gateway.auth.token in its openclaw.json")
        }
        return line
    }

    // MARK: The set

    /// The installed compose file `name` (PREFIX/share/tether/compose), else the checkout's.
    static func installedComposeFile(_ name: String) -> String {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        for candidate in ["../../share/tether/compose/", "../../../compose/", "../../compose/"] {
            let path = directory.appendingPathComponent(candidate + name).standardizedFileURL.path
            if FileManager.default.fileExists(atPath: path) { return path }
        }
        return name
    }

    /// Starts the set: through the user unit when it runs or is to be enabled, else with
    /// tether-compose; a running set is restarted when a setting changed.
    private func start(restart: Bool) async throws {
        let unitActive = await ProgramProcess.runToEnd("systemctl", arguments: ["--user", "is-active", "--quiet", "tether"]) == 0
        if enable {
            let verb = unitActive && restart ? "restart" : "start"
            guard await ProgramProcess.runToEnd("systemctl", arguments: ["--user", "enable", "tether"]) == 0,
                await ProgramProcess.runToEnd("systemctl", arguments: ["--user", verb, "tether"]) == 0
            else {
                throw ConfigurationProblem("systemctl --user enable --now tether failed: is Tether installed (scripts/install), and is there a user session?")
            }
            say("enabled the tether user unit: the set starts at login; \(verb == "restart" ? "restarted" : "started") it now")
            return
        }
        if unitActive {
            guard restart else { return say("the tether user unit runs the set") }
            guard await ProgramProcess.runToEnd("systemctl", arguments: ["--user", "restart", "tether"]) == 0 else {
                throw ConfigurationProblem("systemctl --user restart tether failed: see journalctl --user -u tether")
            }
            return say("restarted the tether user unit with the new settings")
        }
        let compose = URL(fileURLWithPath: Self.executablePath).deletingLastPathComponent().appendingPathComponent("tether-compose").path
        var arguments = ["up", "--detach"]
        if let runDirectory = options.runDirectory { arguments += ["--run-dir", runDirectory] }
        let running = ComposeStateProbe.supervisorRunning(runDirectory: options.resolvedRunDirectory.path)
        if running {
            guard restart else { return say("the set is running") }
            _ = await ProgramProcess.runToEnd(compose, arguments: ["down"] + (options.runDirectory.map { ["--run-dir", $0] } ?? []))
        }
        let status = await ProgramProcess.runToEnd(compose, arguments: arguments)
        guard status == 0 else {
            throw ConfigurationProblem("the set did not start (tether-compose up --detach exited with \(status)): tether-compose ps and logs say why")
        }
        say(running ? "restarted the set with the new settings" : "started the set (tether-compose up --detach)")
    }

    /// Waits for the connection and says how it went.
    private func report(url: String) async throws {
        let bus = try openBus(options, remote)
        defer { Task { await bus.close() } }
        let states = try await bus.subscribe(to: [Topic.connectionState.name])
        let deadline = ContinuousClock.now + .seconds(timeout)
        let outcome: ConnectionStatus? = await withTaskGroup(of: ConnectionStatus?.self) { group in
            group.addTask {
                for await message in states {
                    guard let status = try? message.decode(ConnectionStatus.self), status.url == url else { continue }
                    if status.phase == .connected || status.failure != nil { return status }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let status = outcome else {
            say("not connected within \(Int(timeout)) s; tether status follows the connection")
            throw ExitCode(.notDone)
        }
        if status.phase == .connected {
            return say("connected to the OpenClaw gateway at \(url)")
        }
        switch status.failure {
        case .pairingRequired?:
            say("the gateway waits for a person to approve this device: \(status.lastError ?? status.words). Tether connects by itself once it is approved")
        case .credentialRejected?:
            say("the gateway refused the token (\(status.lastError ?? status.words)): check gateway.auth.token and run tether setup again")
            throw ExitCode(.configuration)
        default:
            say("not connected: \(status.words)\(status.lastError.map { " (\($0))" } ?? ""); tether status follows the connection")
            throw ExitCode(.notDone)
        }
    }

    private func say(_ words: String) {
        print("tether setup: \(words)")
    }

    private static var executablePath: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }
}

/// What a running compose supervisor's state file (`compose/state.json` in the run directory) says.
enum ComposeStateProbe {
    /// The state file's contents while its supervisor runs; nil otherwise.
    private static func runningState(runDirectory: String) -> [String: Any]? {
        guard let data = FileManager.default.contents(atPath: runDirectory + "/compose/state.json"),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let pid = object["supervisorPID"] as? Int,
            kill(pid_t(pid), 0) == 0
        else { return nil }
        return object
    }

    static func supervisorRunning(runDirectory: String) -> Bool {
        runningState(runDirectory: runDirectory) != nil
    }

    /// "connd cannot run as configured: WORDS" for each program the supervisor left stopped for a wrong setting.
    static func misconfigured(runDirectory: String) -> [String] {
        let programs = runningState(runDirectory: runDirectory)?["programs"] as? [[String: Any]] ?? []
        return programs.compactMap { program in
            guard program["phase"] as? String == "misconfigured", let name = program["name"] as? String else { return nil }
            return "\(name) cannot run as configured: \((program["problem"] as? String) ?? "see tether-compose logs \(name)")"
        }
    }
}
