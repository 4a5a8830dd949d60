public import Foundation

/// The set as the supervisor sees it: its answer to `status`, and what it writes to
/// `compose/state.json` in the run directory at every change, for `down`, for `ps` after a
/// supervisor that died, and for people.
public struct ComposeState: Codable, Sendable {
    public var supervisorPID: Int32
    public var file: String
    public var startedAt: Date
    public var programs: [ProgramStatus]

    public init(supervisorPID: Int32, file: String, startedAt: Date, programs: [ProgramStatus]) {
        self.supervisorPID = supervisorPID
        self.file = file
        self.startedAt = startedAt
        self.programs = programs
    }
}

/// One program as the supervisor sees it.
public struct ProgramStatus: Codable, Sendable, Equatable {
    public enum Phase: String, Codable, Sendable {
        case waiting
        case starting
        case running
        case backoff
        case exited
        /// Exited too often within its restart window: left stopped until `restart`.
        case failed
        /// Exited because a setting is wrong (status 78, or 64 for its command line), or could
        /// not be started as the compose file says: left stopped until `restart`, since
        /// starting it again as it is cannot help. ``ProgramStatus/problem`` says what to fix.
        case misconfigured
        case stopping
        case stopped
    }

    public var name: String
    public var phase: Phase
    public var pid: Int32?
    public var ready: Bool
    public var restarts: Int
    public var startedAt: Date?
    /// How the last run ended, in words.
    public var lastExit: String?
    /// Misconfigured: the setting that is wrong and how to fix it, in the program's words.
    public var problem: String?

    public init(name: String) {
        self.name = name
        self.phase = .waiting
        self.ready = false
        self.restarts = 0
    }
}

/// Where a set's files live in its run directory.
public struct ComposePaths: Sendable {
    public let directory: String

    public init(runDirectory: String) {
        directory = runDirectory + "/compose"
    }

    public var state: String { directory + "/state.json" }
    public var lock: String { directory + "/compose.lock" }
    public var supervisorLog: String { directory + "/supervisor.log" }
    public func log(_ program: String) -> String { directory + "/logs/\(program).log" }

    /// The state file, if a supervisor wrote one.
    public func readState() -> ComposeState? {
        guard let data = FileManager.default.contents(atPath: state) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try? decoder.decode(ComposeState.self, from: data)
    }

    func write(_ composeState: ComposeState) {
        guard let data = try? Self.encode(composeState) else { return }
        try? data.write(to: URL(fileURLWithPath: state), options: .atomic)
    }

    /// The state as the state file holds it: JSON, dates in ISO 8601, keys sorted.
    public static func encode(_ composeState: ComposeState) throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(composeState)
    }
}
