import ArgumentParser
import Foundation
import TetherBus
import TetherSchema
import TetherService
import TetherWire

/// `reconnect`, `suspend` and `resume`: a command to tether-connd, answered with the phase after it.
protocol ConnectionControl: AsyncParsableCommand {
    var options: ProgramOptions { get }
    var remote: RemoteBusOptions { get }
    static var action: ConnectionCommand.Action { get }
}

extension ConnectionControl {
    func run() async throws {
        let reply = try await ask(ConnectionCommand.self, .init(action: Self.action), options, remote)
        if reply.accepted {
            print("\(Self.action.rawValue): the connection is now \(reply.phase.words)")
        } else {
            FileHandle.standardError.write(Data("tether: \(Self.action.rawValue) does not apply now: the connection is \(reply.phase.words)\n".utf8))
            throw ExitCode(.notDone)
        }
    }
}

struct Reconnect: ConnectionControl {
    static let configuration = CommandConfiguration(abstract: "Connect to the gateway now, whatever the backoff or a failure says.")
    static let action = ConnectionCommand.Action.reconnect
    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions
}

struct Suspend: ConnectionControl {
    static let configuration = CommandConfiguration(abstract: "Close the connection gracefully and keep it closed until resume.")
    static let action = ConnectionCommand.Action.suspend
    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions
}

struct Resume: ConnectionControl {
    static let configuration = CommandConfiguration(abstract: "Connect again after a suspend, with the same identity and credential.")
    static let action = ConnectionCommand.Action.resume
    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions
}

struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Cancel a message not yet delivered, or all of them.")

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Argument(help: "The message id (from tether watch --json); omit with --all.")
    var id: String?

    @Flag(help: "Cancel every message not yet delivered.")
    var all = false

    func validate() throws {
        guard (id != nil) != all else { throw ValidationError("give a message id or --all, not both") }
    }

    func run() async throws {
        let reply = try await ask(CancelCommand.self, .init(id: id.map(MessageID.init)), options, remote)
        print(reply.cancelled.isEmpty ? "nothing to cancel" : "cancelled \(reply.cancelled.count) message\(reply.cancelled.count == 1 ? "" : "s")")
    }
}

struct Sessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the gateway's sessions (OpenClaw); the one Tether chats in is marked *.",
        discussion: "Chat in another with tether session use KEY (or Ctrl-P in the terminal UI)."
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Flag(help: "One JSON object.")
    var json = false

    func run() async throws {
        let reply = try await ask(SessionsCommand.self, .init(), options, remote, timeout: .seconds(16), attempts: 1)
        if json {
            try printJSON(reply)
            return
        }
        for session in reply.sessions {
            let marker = session.key == reply.current ? "*" : " "
            let updated = session.updatedAt.map { " (last active \(ISO8601.formatPrecise($0)))" } ?? ""
            print(TerminalSafe.visible("\(marker) \(session.key)\(session.displayName.map { " \($0)" } ?? "")\(updated)", newlines: false))
        }
        if reply.sessions.isEmpty { print("(the gateway lists no session)") }
    }
}

struct SessionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session", abstract: "Choose the gateway's session to chat in, and its model and thinking level (OpenClaw).",
        subcommands: [Use.self, Set.self])

    struct Use: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Chat in another session from now on, without restarting anything; the choice is kept across restarts.",
            discussion: """
                KEY as a person writes it (side, main) or as the gateway names it (agent:main:side). Messages sent before \
                still go to the session they were sent in: Tether goes over once they are answered, and what is sent \
                meanwhile waits in the outbox. Front ends show the chosen session's transcript.
                """)

        @OptionGroup var options: ProgramOptions
        @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

        @Argument(help: "The session.")
        var key: String

        @Flag(help: "One JSON object.")
        var json = false

        func run() async throws {
            let reply = try await ask(SessionUseCommand.self, .init(key: key), options, remote, timeout: .seconds(5), attempts: 2)
            if json {
                try printJSON(reply)
            } else {
                print(TerminalSafe.visible(reply.detail, newlines: false))
            }
        }
    }
}

struct Abort: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop the reply the gateway is writing (OpenClaw); it ends incomplete, saying it was stopped.")

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Option(help: "Stop only the reply to this message (its id); else every reply of the session.")
    var id: String?

    func run() async throws {
        let reply = try await ask(AbortCommand.self, .init(id: id.map(MessageID.init)), options, remote, timeout: .seconds(12), attempts: 1)
        print(reply.stopped.isEmpty ? "no reply was running" : "stopped the reply to \(reply.stopped.map(\.value).joined(separator: ", "))")
    }
}
