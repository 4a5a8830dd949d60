import Foundation
public import TetherBus
import Yams

/// A compose file: the programs of a set, in start order.
///
/// ```yaml
/// name: tether
/// environment:            # defaults; the caller's environment wins
///   TETHER_GATEWAY_PORT: "8765"
/// tokens:                 # files given a random token (mode 0600) when missing
///   - ${TETHER_STATE}/gateway.token
/// programs:
///   - name: bus
///     command: [tether-bus]
///   - name: connd
///     command: [tether-connd, --url, "ws://127.0.0.1:${TETHER_GATEWAY_PORT}/ws"]
///     depends_on: [bus]
///     restart: always     # always (default), on-failure or no
///     max_restarts: 10    # restarts within restart_window seconds before giving up (default 10 in 60)
///     restart_window: 60
///     ready: topic:conn.state  # heartbeat (default), topic:TOPIC, tcp:HOST:PORT or none
/// ```
public struct ComposeFile: Decodable, Sendable {
    public var name: String
    public var environment: [String: String]
    public var tokens: [String]
    public var programs: [ProgramSpec]

    private enum CodingKeys: String, CodingKey {
        case name, environment, tokens, programs
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? "tether"
        environment = try container.decodeIfPresent([String: String].self, forKey: .environment) ?? [:]
        tokens = try container.decodeIfPresent([String].self, forKey: .tokens) ?? []
        programs = try container.decode([ProgramSpec].self, forKey: .programs)
    }

    /// Reads and checks a compose file.
    public static func load(path: String) throws -> ComposeFile {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ComposeError(.invalidFile, "cannot read compose file \(path): \(error.localizedDescription)")
        }
        let file: ComposeFile
        do {
            file = try YAMLDecoder().decode(ComposeFile.self, from: text)
        } catch {
            throw ComposeError(.invalidFile, "compose file \(path) is not valid: \(error)")
        }
        try file.validate(path: path)
        return file
    }

    func validate(path: String) throws {
        var seen: Set<String> = []
        for program in programs {
            guard !program.command.isEmpty else { throw ComposeError(.invalidFile, "\(path): program '\(program.name)' has an empty command") }
            for dependency in program.dependsOn where !seen.contains(dependency) {
                throw ComposeError(.invalidFile, "\(path): program '\(program.name)' depends on '\(dependency)', which is not listed before it")
            }
            guard seen.insert(program.name).inserted else { throw ComposeError(.invalidFile, "\(path): program '\(program.name)' is listed twice") }
        }
    }

    /// The compose file `name` names: the path as given when it exists; else, for a bare name
    /// (`openclaw`, `web.yaml`), `compose/NAME.yaml` here; else the file of that name among the
    /// compose files installed with the programs (`PREFIX/share/tether/compose`, beside
    /// `programDirectory`, which is `PREFIX/lib/tether`). Nil when none exists.
    public static func locate(_ name: String, programDirectory: String, fileExists: (String) -> Bool) -> String? {
        if fileExists(name) { return name }
        let file = name.hasSuffix(".yaml") ? name : name + ".yaml"
        let base = String(file.split(separator: "/").last ?? Substring(file))
        var candidates: [String] = []
        if !name.contains("/") { candidates.append("compose/" + file) }
        if !name.hasPrefix("/") && (!name.contains("/") || name.hasPrefix("compose/")) {
            candidates.append(programDirectory + "/../../share/tether/compose/" + base)
        }
        return candidates.first(where: fileExists)
    }

    /// What cannot be made from `variables`: for each program whose command, and each token
    /// path, names a variable that is not set, the words naming the program and the variable.
    public func unsetSettings(variables: [String: String]) -> [String] {
        var problems: [String] = []
        for template in tokens {
            do { _ = try Self.expand(template, variables: variables) } catch { problems.append("the token file: \(error)") }
        }
        for program in programs {
            for part in program.command {
                do {
                    _ = try Self.expand(part, variables: variables)
                } catch {
                    problems.append("\(program.name): \(error)")
                    break
                }
            }
        }
        return problems
    }

    /// Replaces `${NAME}` and `${NAME:-default}` with values from `variables`.
    public static func expand(_ text: String, variables: [String: String]) throws -> String {
        var result = ""
        var rest = Substring(text)
        while let start = rest.range(of: "${") {
            result += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                throw ComposeError(.invalidFile, "unclosed ${ in '\(text)'")
            }
            let expression = rest[start.upperBound..<end]
            let parts = expression.split(separator: ":-", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            if let value = variables[name], !value.isEmpty {
                result += value
            } else if parts.count == 2 {
                result += parts[1]
            } else {
                throw ComposeError(.invalidFile, "variable \(name) is not set (in '\(text)')")
            }
            rest = rest[rest.index(after: end)...]
        }
        return result + rest
    }
}

/// One program of a compose file.
public struct ProgramSpec: Decodable, Sendable {
    public var name: String
    /// The executable (looked up in the binary directory unless it is a path) and its arguments.
    public var command: [String]
    public var dependsOn: [String]
    public var restart: RestartPolicy
    /// How many restarts by policy are allowed within a window before the program is left failed.
    public var restartLimit: RestartBudget
    public var ready: Readiness

    private enum CodingKeys: String, CodingKey {
        case name, command, restart, ready
        case dependsOn = "depends_on"
        case maxRestarts = "max_restarts"
        case restartWindow = "restart_window"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        command = try container.decode([String].self, forKey: .command)
        dependsOn = try container.decodeIfPresent([String].self, forKey: .dependsOn) ?? []
        restart = try container.decodeIfPresent(RestartPolicy.self, forKey: .restart) ?? .always
        let maxRestarts = try container.decodeIfPresent(Int.self, forKey: .maxRestarts) ?? 10
        let window = try container.decodeIfPresent(Double.self, forKey: .restartWindow) ?? 60
        guard maxRestarts >= 0, window > 0 else {
            throw DecodingError.dataCorruptedError(
                forKey: .maxRestarts, in: container, debugDescription: "max_restarts must be 0 or more and restart_window positive")
        }
        restartLimit = RestartBudget(limit: maxRestarts, window: window)
        let readiness = try container.decodeIfPresent(String.self, forKey: .ready) ?? "heartbeat"
        guard let ready = Readiness(readiness) else {
            throw DecodingError.dataCorruptedError(
                forKey: .ready, in: container, debugDescription: "ready must be heartbeat, topic:TOPIC, tcp:HOST:PORT or none, not '\(readiness)'")
        }
        self.ready = ready
    }
}

/// When a program that exited is started again.
public enum RestartPolicy: String, Decodable, Sendable {
    case always
    case onFailure = "on-failure"
    case no

    /// Whether a program that exited with `status` (nil when killed by a signal) is restarted.
    public func restarts(afterExitStatus status: Int32?) -> Bool {
        switch self {
        case .always: true
        case .onFailure: status != 0
        case .no: false
        }
    }
}

/// How many restarts by policy a program gets within a window of time: a program that keeps
/// dying is left failed rather than restarted forever.
public struct RestartBudget: Sendable, Equatable {
    public var limit: Int
    /// The window, in seconds.
    public var window: Double
    private var restarts: [Double] = []

    public init(limit: Int, window: Double) {
        self.limit = limit
        self.window = window
    }

    /// Spends one restart at `time` (seconds on any monotonic clock); false when the window
    /// already holds `limit` of them.
    public mutating func spend(at time: Double) -> Bool {
        restarts.removeAll { $0 <= time - window }
        guard restarts.count < limit else { return false }
        restarts.append(time)
        return true
    }

    public static func == (lhs: RestartBudget, rhs: RestartBudget) -> Bool {
        lhs.limit == rhs.limit && lhs.window == rhs.window
    }
}

/// How the supervisor knows a program is ready for those that depend on it.
public enum Readiness: Sendable, Equatable {
    /// Its heartbeat is on the bus.
    case heartbeat
    /// It published on the topic (its retained state, such as `conn.state`).
    case topic(String)
    /// It accepts TCP connections at the address (after variable expansion).
    case tcp(String)
    /// As soon as it is started.
    case none

    init?(_ text: String) {
        if text == "heartbeat" {
            self = .heartbeat
        } else if text == "none" {
            self = .none
        } else if text.hasPrefix("topic:"), text.count > 6 {
            self = .topic(String(text.dropFirst(6)))
        } else if text.hasPrefix("tcp:") {
            self = .tcp(String(text.dropFirst(4)))
        } else {
            return nil
        }
    }
}

/// A compose error.
public typealias ComposeError = CodedError<ComposeErrorCode>

/// What went wrong in compose.
public enum ComposeErrorCode: String, ErrorCode {
    /// The compose file cannot be read, is not valid, or names a variable not set.
    case invalidFile
    /// A set is already running in the run directory.
    case alreadyRunning
    /// No set is running in the run directory.
    case notRunning
    /// The set, or a program restarted, was not ready in time.
    case notReady
    /// What was asked for is not there (a program's log).
    case notFound
    /// The supervisor did not answer, or refused what was asked.
    case supervisor
    /// A process could not be started.
    case cannotStart
}
