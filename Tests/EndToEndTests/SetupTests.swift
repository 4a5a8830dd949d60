import Foundation
import Testing
import TetherTesting

/// `tether setup` against the development gateway in the OpenClaw dialect, found from an
/// OpenClaw-style configuration file in a throwaway home, as a new user's first run would.
@Suite(.serialized) struct SetupTests {
    /// A gateway speaking OpenClaw's protocol on a free port, with `token`; the port.
    static func gateway(token: String, in directory: TestRunDirectory) throws -> (ChildProcess, Int) {
        let port = try freePort()
        let tokenFile = directory.path + "/gateway.token"
        #expect(FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600]))
        let gateway = try ChildProcess(
            Programs.path("tether-gateway"), ["--port", "\(port)", "--token-file", tokenFile, "--dialect", "openclaw"], outputDirectory: directory.path)
        return (gateway, port)
    }

    /// OpenClaw's configuration, as `openclaw onboard` writes it (with a comment and trailing commas).
    static func writeOpenClawConfiguration(port: Int, token: String, in home: DesktopHome) throws {
        let folder = home.root.path + "/home/.openclaw"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try """
        // openclaw.json
        {
          gateway: { mode: "local", port: \(port), bind: "loopback", auth: { mode: "token", token: "\(token)", }, },
        }
        """.write(toFile: folder + "/openclaw.json", atomically: true, encoding: .utf8)
    }

    static func run(_ program: String, _ arguments: [String], home: DesktopHome, timeout: Duration = .seconds(90)) throws -> ChildProcess {
        let process = try ChildProcess(
            Programs.path(program), arguments, environment: home.environment.merging(["TETHER_NOTIFICATIONS": "off"]) { $1 },
            outputDirectory: home.root.path, name: "\(program)-\(arguments.first ?? "")")
        try process.waitForExit(timeout: timeout)
        return process
    }

    @Test func setupFindsTheGatewayInOpenClawsConfigurationStartsTheSetAndConnects() async throws {
        let home = try DesktopHome()
        let token = "setup-token-\(UUID().uuidString.prefix(8))"
        let (gateway, port) = try Self.gateway(token: token, in: home.root)
        defer { gateway.stop() }
        try Self.writeOpenClawConfiguration(port: port, token: token, in: home)
        defer { _ = try? Self.run("tether-compose", ["down"], home: home) }

        let setup = try Self.run("tether", ["setup"], home: home)
        let said = setup.standardOutput
        #expect(setup.status == 0, "\(said)\(setup.standardError)")
        #expect(said.contains("found the OpenClaw gateway at ws://127.0.0.1:\(port) (gateway.port in ~/.openclaw/openclaw.json)"), "\(said)")
        #expect(said.contains("its token in gateway.auth.token in ~/.openclaw/openclaw.json"), "\(said)")
        let tokenFile = home.root.path + "/config/tether/openclaw.token"
        #expect(said.contains("wrote the gateway's token to \(tokenFile) (mode 0600)"), "\(said)")
        #expect(try FileManager.default.attributesOfItem(atPath: tokenFile)[.posixPermissions] as? Int == 0o600)
        #expect(said.contains("started the set"), "\(said)")
        #expect(said.contains("connected to the OpenClaw gateway at ws://127.0.0.1:\(port)"), "\(said)")
        let settings = (try? String(contentsOfFile: home.root.path + "/config/tether/tether.env", encoding: .utf8)) ?? ""
        #expect(settings.contains("TETHER_OPENCLAW_URL=ws://127.0.0.1:\(port)\n"), "\(settings)")
        #expect(settings.contains("TETHER_COMPOSE_FILE=\(Programs.packageRoot)/compose/openclaw.yaml\n"), "\(settings)")

        // The set it started chats, with no directory or variable named.
        let send = try Self.run("tether", ["send", "hello through setup"], home: home, timeout: .seconds(60))
        #expect(send.status == 0, "\(send.standardError)")
        #expect(send.standardOutput.contains("hello through setup"), "\(send.standardOutput)")

        // A second run changes nothing.
        let again = try Self.run("tether", ["setup"], home: home)
        #expect(again.status == 0, "\(again.standardOutput)\(again.standardError)")
        #expect(again.standardOutput.contains("nothing changed") && again.standardOutput.contains("the set is running"), "\(again.standardOutput)")
        #expect(!again.standardOutput.contains("wrote"), "\(again.standardOutput)")
        #expect(again.standardOutput.contains("connected to the OpenClaw gateway"), "\(again.standardOutput)")

        // The set stopped (a logout): `tether send` starts the set it was set up with, and chats.
        #expect(try Self.run("tether-compose", ["down"], home: home).status == 0)
        let started = try Self.run("tether", ["send", "after the set stopped"], home: home, timeout: .seconds(90))
        #expect(started.status == 0, "\(started.standardError)")
        #expect(started.standardError.contains("tether: the set is not running: starting it (tether-compose up --detach)"), "\(started.standardError)")
        #expect(started.standardOutput.contains("after the set stopped"), "\(started.standardOutput)")
        // Told not to, it starts nothing and says how in one line.
        #expect(try Self.run("tether-compose", ["down"], home: home).status == 0)
        let home2 = home.environment.merging(["TETHER_AUTOSTART": "0"]) { $1 }
        let told = try ChildProcess(
            Programs.path("tether"), ["send", "not started"], environment: home2, outputDirectory: home.root.path, name: "tether-told")
        try told.waitForExit(timeout: .seconds(60))
        #expect(told.status == 4, "\(told.standardError)")
        #expect(told.standardError.contains("tether: the set is not running: start it with tether-compose up --detach\n"), "\(told.standardError)")
    }

    @Test func withNothingSetUpTetherStartsNothingAndSaysHowInOneLine() throws {
        let home = try DesktopHome()
        let send = try Self.run("tether", ["send", "hello"], home: home, timeout: .seconds(60))
        #expect(send.status == 4, "\(send.standardError)")
        #expect(send.standardError.contains("tether: the set is not running: \(Self.notSetUp)\n"), "\(send.standardError)")
        #expect(!send.standardError.contains("starting it"), "\(send.standardError)")
    }

    static let notSetUp =
        "tether setup has not been run here, so nothing starts the set by itself: run tether setup (it finds your OpenClaw gateway and starts the set), or tether-compose up --detach for the development gateway"

    @Test func aConfigurationThatDoesNotParseAndATokenTheGatewayRefusesHaveTheirWords() async throws {
        let home = try DesktopHome()
        let (gateway, port) = try Self.gateway(token: "the-right-token", in: home.root)
        defer { gateway.stop() }
        try FileManager.default.createDirectory(atPath: home.root.path + "/home/.openclaw", withIntermediateDirectories: true)
        try "{ gateway: { port: \(port), ".write(toFile: home.root.path + "/home/.openclaw/openclaw.json", atomically: true, encoding: .utf8)
        let broken = try Self.run("tether", ["setup"], home: home)
        #expect(broken.status == 78, "\(broken.standardOutput)\(broken.standardError)")
        #expect(broken.standardError.contains("tether: configuration: ~/.openclaw/openclaw.json is not valid JSON5"), "\(broken.standardError)")
        #expect(!FileManager.default.fileExists(atPath: home.root.path + "/config/tether/tether.env"), "nothing written")

        try Self.writeOpenClawConfiguration(port: port, token: "a-wrong-token", in: home)
        defer { _ = try? Self.run("tether-compose", ["down"], home: home) }
        let refused = try Self.run("tether", ["setup", "--timeout", "40"], home: home)
        #expect(refused.status == 78, "\(refused.standardOutput)\(refused.standardError)")
        #expect(refused.standardOutput.contains("the gateway refused the token"), "\(refused.standardOutput)")
        #expect(refused.standardOutput.contains("check gateway.auth.token and run tether setup again"), "\(refused.standardOutput)")
    }
}
