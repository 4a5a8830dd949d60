public import TetherSchema

/// The commands a running supervisor answers on its own endpoint, `compose.cmd` in the run
/// directory: `tether-compose ps`, `restart` and `kill` reach it there and nowhere else. The
/// endpoint is the supervisor's, not the bus's, so it answers whatever state the bus is in
/// (`restart bus` too).
public enum ComposeCommands {
    /// The endpoint's name in the run directory.
    public static let endpoint = "compose.cmd"

    /// The set as the supervisor sees it now.
    public enum Status: BusCommand {
        public static let method = "status"
        public static let endpoint = ComposeCommands.endpoint

        public struct Request: Codable, Sendable {
            public init() {}
        }

        public typealias Reply = ComposeState
    }

    /// Stop a program and start it again, whatever its policy; start it if it had stopped.
    /// Answered at once, with the program as it was: the caller waits for a new run that is ready.
    public enum Restart: BusCommand {
        public static let method = "restart"
        public static let endpoint = ComposeCommands.endpoint

        public struct Request: Codable, Sendable {
            public var program: String

            public init(program: String) {
                self.program = program
            }
        }

        public typealias Reply = ProgramStatus
    }

    /// Send a signal to a program's process group, as a crash or an operator would: its
    /// restart policy then applies.
    public enum Kill: BusCommand {
        public static let method = "kill"
        public static let endpoint = ComposeCommands.endpoint

        public struct Request: Codable, Sendable {
            public var program: String
            public var signal: Int32

            public init(program: String, signal: Int32) {
                self.program = program
                self.signal = signal
            }
        }

        public struct Reply: Codable, Sendable {
            /// What was done, in words.
            public var words: String

            public init(words: String) {
                self.words = words
            }
        }
    }
}
