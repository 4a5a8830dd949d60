public import ArgumentParser
import TetherBus

#if canImport(Glibc)
import Glibc
#endif

/// A setting that keeps a program from running: said once on standard error, as
/// `PROGRAM: configuration: WORDS`, and the program ends with
/// ``TetherExitCode/configuration``, which a compose supervisor does not retry.
public struct ConfigurationProblem: Error, CustomStringConvertible, Sendable {
    /// What is wrong and how to fix it, in words that name the setting.
    public let description: String

    public init(_ words: String) {
        description = words
    }

    /// The marker a supervisor looks for in a program's output to find the words.
    public static let marker = "configuration: "

    /// Runs `body`; a ``ConfigurationProblem``, a secret that cannot be used
    /// (``SecretFileError``) or another error no restart gets past (``UnfixableByRestart``)
    /// ends `program` with its words and exit status 78. The desktop's
    /// secret service not answering is not one: at login it may answer a moment later.
    public static func guarding<Result>(_ program: String, _ body: () async throws -> Result) async throws -> Result {
        do {
            return try await body()
        } catch let error as ConfigurationProblem {
            throw exit(program, error.description)
        } catch let error as SecretFileError where error.code != .secretService {
            throw exit(program, error.description)
        } catch let error as any UnfixableByRestart {
            throw exit(program, error.description)
        }
    }

    /// Says `words` on standard error and returns the exit that ends the program.
    public static func exit(_ program: String, _ words: String) -> ExitCode {
        let line = Array("\(program): \(marker)\(words)\n".utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        return ExitCode(.configuration)
    }
}
