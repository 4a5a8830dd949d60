import Foundation
import Testing
import TetherService
import TetherTesting

/// Tether's settings file: systemd's EnvironmentFile format, written only when it changes.
@Suite struct SettingsFileTests {
    @Test func settingsAreWrittenReadBackAndNotRewrittenUnchanged() throws {
        let run = try TestRunDirectory()
        let file = SettingsFile(path: run.path + "/config/tether/tether.env")
        let settings: [(name: String, value: String)] = [
            ("TETHER_OPENCLAW_URL", "ws://127.0.0.1:18789"), ("TETHER_TOKEN_FILE", "/home/a b/\"quoted\"\\token"),
        ]
        #expect(try file.write(settings))
        #expect(try file.values() == ["TETHER_OPENCLAW_URL": "ws://127.0.0.1:18789", "TETHER_TOKEN_FILE": "/home/a b/\"quoted\"\\token"])
        #expect(try !file.write(settings), "the same settings: nothing written")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try file.write([("TETHER_OPENCLAW_URL", "ws://other:1")]))
        #expect(try file.values() == ["TETHER_OPENCLAW_URL": "ws://other:1"])
        #expect(try SettingsFile(path: run.path + "/absent.env").values().isEmpty)
    }

    @Test func aLineThatIsNotASettingIsRefusedNamingIt() throws {
        let run = try TestRunDirectory()
        let path = run.path + "/tether.env"
        try "# comment\nGOOD=1\n\nthis is not a setting\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: ConfigurationProblem.self) { try SettingsFile(path: path).values() }
        do {
            _ = try SettingsFile(path: path).values()
        } catch {
            #expect(error.description == "\(path), line 4, is not NAME=value: this is not a setting")
        }
    }

    @Test func theFileIsInTheUsersConfigurationDirectory() {
        #expect(SettingsFile.user(environment: ["XDG_CONFIG_HOME": "/c", "HOME": "/h"]).path == "/c/tether/tether.env")
        #expect(SettingsFile.user(environment: ["HOME": "/h"]).path == "/h/.config/tether/tether.env")
    }
}
