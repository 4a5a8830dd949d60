public import ArgumentParser
import Foundation
import FrontEnd
import Logging
import ServiceLifecycle
import TetherBus
import TetherSchema
import TetherService
import TetherWire

@main
struct TetherCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether",
        abstract: "Chat through the Tether set: send messages, watch the conversation, check the status.",
        version: TetherVersion.current,
        subcommands: [
            Chat.self, Send.self, Watch.self, Search.self, Status.self, Sessions.self, SessionCommand.self, Models.self, Agents.self, Abort.self,
            Approvals.self, Approve.self, Cancel.self, Reconnect.self, Suspend.self, Resume.self, Web.self, Setup.self,
        ],
        defaultSubcommand: Chat.self
    )
}

/// Opens a bus client for a command-line front end; a clear error if the run directory is unusable.
/// The bus in the run directory, or the one on another host that `remote` names (commands
/// included, through its relay).
func openBus(_ options: ProgramOptions, _ remote: RemoteBusOptions) throws -> BusClient {
    options.bootstrapLogging()
    return try remote.makeBusClient(source: "tether", runDirectory: options.resolvedRunDirectory, logger: Logger(label: "tether"))
}

/// Asks the set one command over a bus opened for it and closed after: the reply, or the
/// error the command line ends with (``commandError(_:_:_:)``).
func ask<Command: BusCommand>(
    _ command: Command.Type, _ request: Command.Request, _ options: ProgramOptions, _ remote: RemoteBusOptions,
    timeout: Duration = .milliseconds(2500), attempts: Int = 3
) async throws -> Command.Reply {
    let bus = try openBus(options, remote)
    do {
        let reply = try await bus.request(command, request, timeout: timeout, attempts: attempts)
        await bus.close()
        return reply
    } catch {
        await bus.close()
        throw commandError(error, options, remote)
    }
}

/// Prints `value` as one JSON object, as `--json` asks.
func printJSON(_ value: some Encodable) throws {
    print(String(decoding: try BusSchema.makeEncoder().encode(value), as: UTF8.self))
}

/// The error a command ends with: a bus that does not answer becomes ``TetherExitCode/notRunning`` with words.
func commandError(_ error: any Error, _ options: ProgramOptions, _ remote: RemoteBusOptions) -> any Error {
    guard let report = SendReport(unreachable: error) else { return error }
    for note in report.notes { FileHandle.standardError.write(Data("tether: \(note)\n".utf8)) }
    if let error = error as? BusError, error.isBusMissing {
        FileHandle.standardError.write(Data("tether: the set is not running: \(StartingTheSet.howTo(options, remote))\n".utf8))
    }
    return ExitCode(report.exitCode)
}

struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat in the terminal (the default): the conversation, a banner when the connection is not there, a composer.",
        discussion: """
            Enter sends; Up and Down recall what was sent; PgUp and PgDn scroll; Esc hides the \
            banner; Ctrl-R (or r on "Connection lost") reconnects; Ctrl-X stops the reply being written (OpenClaw); Ctrl-Z suspends (the connection \
            closes; fg brings it back; only when started from a shell); Ctrl-C quits. /help lists the commands Tether handles itself \
            (/status, /models, /model NAME, /think LEVEL, /agent ID, /session KEY, /new, /reset); any other line is sent as typed. \
            With --plain, or when the output is not a \
            terminal: plain lines, every change announced in words; lines typed are sent.
            """
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Flag(help: "Plain lines instead of the full screen: for screen readers, logs and pipes.")
    var plain = false

    func run() async throws {
        await StartingTheSet.ensureRunning(options, remote)
        let bus = try openBus(options, remote)
        let plainLines = plain || isatty(STDOUT_FILENO) == 0 || isatty(STDIN_FILENO) == 0
        let name = plainLines ? "tether --plain" : TerminalSession.frontEndName
        do {
            // Subscribe first, then the snapshot: nothing falls between the two (the Clone pattern).
            let events = try await bus.subscribe(
                to: [
                    "conv.", Topic.connectionState.name, Topic.networkPath.name, Topic.botState.name, Topic.outboxSummary.name, Topic.storage.name,
                    Topic.approvals.name, Topic.sessionSettings.name, Topic.misconfigured.name,
                ],
                confirm: true)
            let frame = try await Conversation(bus: bus).firstFrame(frontEnd: name)
            if plainLines {
                // A bus of its own for each report: on this one, the retained values the report
                // asks for would reach the conversation's subscription too, as repeats.
                let (options, remote) = (options, remote)
                let status: @Sendable () async throws -> String = {
                    let reportBus = try openBus(options, remote)
                    defer { Task { await reportBus.close() } }
                    return try await StatusReport.gather(bus: reportBus).render()
                }
                await PlainSession(bus: bus, frame: frame, status: status).run(events: events)
            } else {
                await TerminalSession(bus: bus, frame: frame).run(events: events)
            }
        } catch {
            await bus.close()
            throw commandError(error, options, remote)
        }
        await bus.close()
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a message and print the bot's reply.",
        discussion: """
            Exit codes: 0 delivered and the reply printed; 1 not delivered in time (it stays queued \
            and is sent when the connection returns), not confirmed (tether-protod did not answer), \
            refused, expired or cancelled; 3 delivered but no whole reply (none in time, or one cut \
            off, printed as far as it came); 4 the set is not running (no bus); 5 refused at send \
            time, nothing queued.
            """
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Argument(help: "The message (may be empty with --attach).")
    var text: [String] = []

    @Option(
        name: .customLong("attach"),
        help: ArgumentHelp(
            "An image to send with the message (PNG, JPEG, GIF or WebP, at most 5,000,000 bytes; OpenClaw gateways only); repeatable.",
            valueName: "file"))
    var attachments: [String] = []

    @Option(help: "Seconds to wait for the acknowledgement and the reply.")
    var timeout: Double = 30

    @Option(
        help:
            "Delivery: queued (kept until delivered, the default), immediate (fail at once when not connected) or latestOnly (only the newest of --kind is kept)."
    )
    var strategy: DeliveryStrategy = .queued

    @Option(help: "With --strategy latestOnly: the kind of message.")
    var kind: String?

    @Option(help: "With --strategy immediate: what to do instead when not connected (queued or latestOnly).")
    var fallback: DeliveryStrategy?

    @Option(help: "Retry policy: default (3 attempts, 200 ms apart, 10 s each), patient (5, 1 s, 30 s) or none.")
    var retry: RetryPolicy?

    @Option(help: "Seconds to wait for a connection before sending; fails with exit code 1 if none comes.")
    var wait: Double?

    @Flag(
        help: ArgumentHelp(
            "If a reply is in progress: --steer gives the message to it (that reply answers both), --interrupt stops it and this message is answered instead; by default the message waits and gets a reply of its own. Today's OpenClaw gateways only: others are told, and the message waits."
        ))
    var whileBusy: WhileBusy?

    func validate() throws {
        // The shell hands over bytes: ones that are not UTF-8 are refused, not rewritten.
        guard Self.argumentsAreUTF8 else {
            throw ValidationError("the message is not valid UTF-8 text (check the terminal's or the file's encoding): nothing was sent")
        }
        guard !text.joined().trimmingCharacters(in: .whitespacesAndNewlines).isEmpty || !attachments.isEmpty else {
            throw ValidationError("the message is empty (only spaces or line breaks): nothing was sent")
        }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        if strategy == .latestOnly && kind == nil { throw ValidationError("--strategy latestOnly needs --kind") }
        if let wait, wait <= 0 { throw ValidationError("--wait must be positive") }
    }

    /// Whether every argument, as the process received it, is valid UTF-8.
    static var argumentsAreUTF8: Bool {
        (0..<Int(CommandLine.argc)).allSatisfy { index in
            CommandLine.unsafeArgv[index].map { String(validatingCString: $0) != nil } ?? true
        }
    }

    func run() async throws {
        // Each file is read and checked before anything is sent: a refusal loses nothing.
        var images: [Attachment] = []
        for path in attachments {
            switch ImageAttachments.attachment(at: path) {
            case .success(let attachment): images.append(attachment)
            case .failure(let refusal):
                say("\(refusal); nothing was sent")
                throw ExitCode(.refused)
            }
        }
        let content = text.joined(separator: " ")
        if let refusal = ImageAttachments.refusal(for: images, text: content) {
            say("\(refusal); nothing was sent")
            throw ExitCode(.refused)
        }
        await StartingTheSet.ensureRunning(options, remote)
        let bus = try openBus(options, remote)
        let outcome: SendOutcome
        let conversation = Conversation(bus: bus)
        let request = SendMessageCommand.Request(
            id: .random(), content: "", strategy: strategy, kind: kind, fallback: fallback, retry: retry, attachments: images.isEmpty ? nil : images,
            whileBusy: whileBusy)
        // A front end while it runs: a connection suspended because none was attached resumes.
        let presence = PresenceAnnouncer(bus: bus, frontEnd: "tether send", attention: .unattended)
        let announcing = Task { await presence.run() }
        defer { announcing.cancel() }
        do {
            if let wait, try await !conversation.waitForConnection(timeout: .seconds(wait)) {
                FileHandle.standardError.write(Data("tether: no connection to the gateway within \(wait) s; nothing sent\n".utf8))
                throw ExitCode(.notDone)
            }
            outcome = try await conversation.send(
                content, options: request, timeout: .seconds(timeout),
                accepted: { if let warning = $0.warning { say("warning: \(warning)") } }, note: { say($0) })
        } catch {
            presence.leave()
            await bus.close()
            throw commandError(error, options, remote)
        }
        presence.leave()
        await bus.close()
        let report = SendReport(outcome, timeout: timeout)
        if let reply = report.reply { print(TerminalSafe.visible(reply)) }
        for note in report.notes { say(note) }
        if report.exitCode != .success { throw ExitCode(report.exitCode) }
    }
}

/// Writes a line of `tether send`'s own to standard error.
private func say(_ words: String) {
    FileHandle.standardError.write(Data("tether: \(TerminalSafe.visible(words, newlines: false))\n".utf8))
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the conversation as it happens, starting with the stored transcript.")

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Flag(help: "One JSON object a line: {\"topic\", \"body\"}.")
    var json = false

    @Option(help: "How many stored messages to print first.")
    var history = 50

    func run() async throws {
        await StartingTheSet.ensureRunning(options, remote)
        let bus = try openBus(options, remote)
        do {
            // Until SIGINT or SIGTERM; then it says it leaves, and the bus closes after it.
            try await BusProgram.run(
                [BusClientService(bus: bus), ConversationPrinter(bus: bus, json: json, history: history)], logger: Logger(label: "tether"))
        } catch {
            throw commandError(error, options, remote)
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show each program, the connection, the network and the outbox.")

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Flag(help: "Print the report as JSON.")
    var json = false

    func run() async throws {
        // A program its supervisor left stopped for a wrong setting says nothing on the bus: its words are the supervisor's.
        let problems = ComposeStateProbe.misconfigured(runDirectory: options.resolvedRunDirectory.path)
        let bus = try openBus(options, remote)
        let report: StatusReport
        do {
            report = try await StatusReport.gather(bus: bus)
        } catch {
            for problem in problems { FileHandle.standardError.write(Data("tether: \(TerminalSafe.visible(problem))\n".utf8)) }
            await bus.close()
            throw commandError(error, options, remote)
        }
        if json {
            print(String(decoding: try BusSchema.makeEncoder().encode(report), as: UTF8.self))
        } else {
            print(TerminalSafe.visible(([report.render()] + problems).joined(separator: "\n")))
        }
        await bus.close()
    }
}

extension DeliveryStrategy: ArgumentParser.ExpressibleByArgument {}
extension WhileBusy: ArgumentParser.EnumerableFlag {}

struct Web: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the URL that opens the web page of tether-web (it carries the access token), or open it in the browser."
    )

    @OptionGroup var options: ProgramOptions

    @Flag(help: "Open the page in the desktop's web browser (xdg-open) instead of printing its URL.")
    var open = false

    func run() async throws {
        let directory = options.resolvedRunDirectory
        guard let url = try? String(contentsOfFile: directory.file("web.url"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
            !url.isEmpty
        else {
            FileHandle.standardError.write(Data("tether: tether-web is not running in \(directory.path) (start it, or run compose/web.yaml)\n".utf8))
            throw ExitCode(.notRunning)
        }
        let token: String
        do {
            token = try SecretFile.read(directory.file("web.token"), kind: "web token file")
        } catch {
            FileHandle.standardError.write(Data("tether: \(error)\n".utf8))
            throw ExitCode(.notDone)
        }
        let address = "\(url)?token=\(token)"
        guard open else { return print(address) }
        // xdg-open hands the address to the browser the desktop chose, and returns.
        let status = await ProgramProcess.runToEnd("xdg-open", arguments: [address])
        guard status == 0 else {
            FileHandle.standardError.write(
                Data(
                    "tether: xdg-open could not open the page (\(status == 127 ? "there is no xdg-open here" : "status \(status)")); tether web prints its address\n"
                        .utf8))
            throw ExitCode(.notDone)
        }
    }
}
