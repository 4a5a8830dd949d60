import ConnectionManager
import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherService
import TetherTesting

@Suite struct CredentialSourceTests {
    @Test func fileEnvironmentAndIdentity() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/token"
        try SecretFileWriter.write("from-file", to: path)
        #expect(try await CredentialSource.file(path).read() == "from-file")
        let identity = CredentialSource.file(path).identity(url: "wss://alice@gateway.example/ws")
        #expect(identity.keyID == "file:\(path)")
        #expect(identity.user == "alice")
        #expect(identity.authMethod == "bearer-token")
        await #expect(throws: SecretFileError.self) { try await CredentialSource.environment("TETHER_TEST_UNSET_VARIABLE").read() }
        chmod(path, 0o640)
        await #expect(throws: SecretFileError.self) { try await CredentialSource.file(path).read() }
    }

    @Test func eachRefusalOfATokenFileCarriesItsCode() throws {
        let run = try TestRunDirectory()
        let path = run.path + "/token"
        func code(_ path: String) -> SecretFileErrorCode? {
            do {
                _ = try SecretFile.read(path)
                return nil
            } catch {
                return (error as? SecretFileError)?.code
            }
        }
        #expect(code(run.path + "/absent") == .unreadable)
        #expect(code(run.path) == .wrongKind)
        try SecretFileWriter.write("  ", to: path)
        #expect(code(path) == .unusable)
        try SecretFileWriter.write("secret", to: path)
        chmod(path, 0o644)
        #expect(code(path) == .tooOpen)
        chmod(path, 0o600)
        #expect(code(path) == nil)
        #expect(throws: SecretFileError(.notGiven, "no token: pass --token-file FILE (mode 0600) or set TETHER_TEST_UNSET_VARIABLE")) {
            try SecretFile.token(file: nil, environmentVariable: "TETHER_TEST_UNSET_VARIABLE")
        }
    }

    /// The secret service through `secret-tool`, here a stand-in script that answers like the
    /// real one: the secret on standard output, or exit 1 when none is stored.
    @Test func secretService() async throws {
        let run = try TestRunDirectory()
        let tool = run.path + "/secret-tool"
        try """
        #!/bin/sh
        [ "$1 $2 $3 $4 $5" = "lookup gateway wss://gateway.example/ws service tether" ] && { echo stored-token; exit 0; }
        exit 1
        """.write(toFile: tool, atomically: true, encoding: .utf8)
        chmod(tool, 0o700)
        #expect(try await CredentialSource.secretService(url: "wss://gateway.example/ws", tool: tool).read() == "stored-token")
        do {
            _ = try await CredentialSource.secretService(url: "wss://other.example/ws", tool: tool).read()
            Issue.record("a missing secret was read")
        } catch {
            #expect("\(error)".contains("secret-tool store"))
        }
        do {
            _ = try await CredentialSource.secretService(url: "wss://gateway.example/ws", tool: run.path + "/no-such-secret-tool").read()
            Issue.record("a token was read through a tool that is not there")
        } catch {
            #expect("\(error)".contains("is not installed"), "\(error)")
            #expect(!"\(error)".contains("has no token"))
        }
    }
}
