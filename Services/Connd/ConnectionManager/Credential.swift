import FoundationEssentials
import TetherBus
public import TetherSchema
import TetherService
import TetherWire

/// Where connd's bearer token comes from. It is read again for every attempt, so a
/// corrected token file takes effect without a restart; it is never published or logged.
public enum CredentialSource: Sendable, Equatable {
    /// A file that only its owner can read (mode 0600), refused otherwise as ssh does.
    case file(String)
    /// An environment variable.
    case environment(String)
    /// The desktop secret service (`secret-tool lookup service tether gateway URL`), where one runs.
    /// `tool` names the client program.
    case secretService(url: String, tool: String = "secret-tool")

    /// Reads the token.
    public func read() async throws -> String {
        switch self {
        case .file(let path):
            return try SecretFile.read(path)
        case .environment(let name):
            guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
                throw SecretFileError(.unreadable, "the environment variable \(name) holding the token is not set")
            }
            return value
        case .secretService(let url, let tool):
            return try await SecretService.lookup(tool: tool, attributes: ["service": "tether", "gateway": url])
        }
    }

    /// The identity that names this credential without revealing it.
    public func identity(url: String) -> ConnectionIdentity {
        let keyID: String =
            switch self {
            case .file(let path): "file:\(path)"
            case .environment(let name): "env:\(name)"
            case .secretService: "secret-service:tether"
            }
        return ConnectionIdentity(url: url, user: URL(string: url)?.user, authMethod: "bearer-token", keyID: keyID)
    }
}

/// The freedesktop secret service through its command-line client, `secret-tool`.
enum SecretService {
    static func lookup(tool: String, attributes: [String: String]) async throws -> String {
        let arguments = [tool, "lookup"] + attributes.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] }
        let result: (status: ExitStatus, output: String)
        do {
            result = try await ProgramProcess.output(of: "/usr/bin/env", arguments: arguments, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw SecretFileError(.secretService, "cannot run secret-tool to read the token from the secret service: \(error)")
        }
        // 127: env found no such program; saying the secret service has no token would be untrue.
        guard result.status != .exited(127) else {
            throw SecretFileError(
                .secretService, "\(tool) is not installed (Debian's libsecret-tools has it): the token cannot be read from the secret service")
        }
        let token = result.output.trimmingWhitespace()
        guard result.status == .exited(0), !token.isEmpty else {
            throw SecretFileError(
                .secretService,
                "the secret service has no token for \(attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")); store one with secret-tool store"
            )
        }
        return token
    }
}
