import ArgumentParser
import BusTap
import Foundation
import Logging
import TetherBus
import TetherSchema
import TetherService

@main
struct TapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-tap",
        abstract: "Inspect the Tether bus: print its messages, their rates and gaps; record them and replay them.",
        version: TetherVersion.current,
        subcommands: [Echo.self, Replay.self],
        defaultSubcommand: Echo.self
    )
}

enum ColorChoice: String, ExpressibleByArgument, CaseIterable {
    case auto, always, never
}

struct Echo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print every message on the bus: time, source[pid]#sequence, topic, body (the default).",
        discussion: """
            Retained values (connection, network, bot, outbox, health) come first, marked (retained). \
            A line starting with -- is the tap's own finding: messages of a source it did not see (a gap) \
            or a source that restarted. Values of fields named like secrets (token, password, …) are shown \
            as <redacted>, here and in recordings.
            """
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Argument(help: "Topics to show: a prefix (conv.) or a glob (conn.*, *.state); none shows all.")
    var topics: [String] = []

    @Option(name: .customLong("source"), help: "Show only messages from this source (tether-protod) or glob (tether-c*); repeatable.")
    var sources: [String] = []

    @Flag(help: "One JSON object a line: {\"at\", \"topic\", \"header\", \"body\"}; a recording's format.")
    var json = false

    @Option(help: "Color the output: auto (on a terminal, unless NO_COLOR is set), always or never.")
    var color: ColorChoice = .auto

    @Flag(help: "Print messages per second per topic every second instead of the messages.")
    var rate = false

    @Option(help: "Also write the shown messages to FILE (JSON lines), for tether-tap replay.")
    var record: String?

    @Flag(help: "Also show the probes subscribers send to confirm their subscriptions.")
    var showProbes = false

    @Option(help: "Stop after this many messages.")
    var count: Int?

    func validate() throws {
        if let count, count <= 0 { throw ValidationError("--count must be positive") }
        if rate && json { throw ValidationError("--rate and --json cannot be combined") }
        _ = try remote.remoteBus()
    }

    func run() async throws {
        options.bootstrapLogging()
        let colored =
            switch color {
            case .always: true
            case .never: false
            case .auto: !json && isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
            }
        let recording = try record.map(Recording.init(path:))
        var session = TapSession(
            filter: TapFilter(topics: topics, sources: sources, showProbes: showProbes),
            formatter: TapFormatter(style: json ? .json : .pretty, colored: colored),
            showsRates: rate)
        let bus = try remote.makeBusClient(source: "tether-tap", runDirectory: options.resolvedRunDirectory, logger: Logger(label: "tether-tap"))
        let subscription: BusSubscription
        do {
            // Everything, whatever the filter: gaps are judged on every message of a source.
            subscription = try await bus.subscribe(to: [""], confirm: true)
        } catch {
            FileHandle.standardError.write(Data("tether-tap: \(error)\n".utf8))
            throw ExitCode(.notRunning)
        }
        let start = ContinuousClock.now
        func offset() -> TimeInterval {
            let elapsed = start.duration(to: .now).components
            return TimeInterval(elapsed.seconds) + TimeInterval(elapsed.attoseconds) / 1e18
        }
        let ticks = rate ? AsyncTimerSequence.repeating(every: .seconds(1)) : nil
        var shown = 0
        await withTaskGroup(of: Void.self) { group in
            let (events, continuation) = AsyncStream<TapEvent>.makeStream()
            group.addTask {
                for await message in subscription { continuation.yield(.message(message)) }
                continuation.finish()
            }
            if let ticks {
                group.addTask {
                    for await _ in ticks { continuation.yield(.tick) }
                }
            }
            loop: for await event in events {
                switch event {
                case .message(let message):
                    let output = session.receive(message, at: offset())
                    for line in output.lines { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
                    if let line = output.recorded { recording?.write(line) }
                    if output.shown { shown += 1 }
                    if let count, shown >= count { break loop }
                case .tick:
                    let table = session.rateTable(at: offset())
                    let clear = colored ? "\u{1B}[H\u{1B}[2J" : "\n"
                    FileHandle.standardOutput.write(Data((clear + table + "\n").utf8))
                }
            }
            group.cancelAll()
        }
        await bus.close()
    }
}

private enum TapEvent: Sendable {
    case message(BusMessage)
    case tick
}

/// The file `--record` writes, mode 0600: it holds the conversation.
private struct Recording {
    let handle: FileHandle

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: path)
        else {
            throw ValidationError("cannot create the recording \(path): \(String(cString: strerror(errno)))")
        }
        self.handle = handle
    }

    func write(_ line: String) {
        do {
            try handle.write(contentsOf: Data((line + "\n").utf8))
        } catch {
            FileHandle.standardError.write(Data("tether-tap: cannot write the recording: \(error)\n".utf8))
        }
    }
}

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a recording (tether-tap --record) into a bus again, with its timing.",
        discussion: """
            Each message goes out with its recorded topic, header and body, at its recorded offset \
            (divided by --speed). The probes of the recording are left out. Subscribers should be \
            listening before the replay starts: a bus keeps nothing for those that come later.
            """
    )

    @OptionGroup var options: ProgramOptions
    @OptionGroup(title: "A bus on another host") var remote: RemoteBusOptions

    @Argument(help: "The recording.")
    var file: String

    @Option(help: "Replay this many times faster than recorded; 0 sends everything at once.")
    var speed: Double = 1

    @Option(help: "Replay only these topics: prefixes or globs, as for the tap.")
    var topic: [String] = []

    func validate() throws {
        if speed < 0 { throw ValidationError("--speed must be 0 or more") }
        _ = try remote.remoteBus()
    }

    func run() async throws {
        options.bootstrapLogging()
        let filter = TapFilter(topics: topic)
        let messages: [RecordedMessage]
        do {
            messages = try RecordedMessage.load(path: file).filter { !$0.topic.hasPrefix(Topic.probePrefix) }
        } catch {
            FileHandle.standardError.write(Data("tether-tap: \(error)\n".utf8))
            throw ExitCode(.notDone)
        }
        let bus = try remote.makeBusClient(source: "tether-tap", runDirectory: options.resolvedRunDirectory, logger: Logger(label: "tether-tap"))
        do {
            // A probe's round trip proves the path into the proxy is open before anything is sent.
            _ = try await bus.subscribe(to: [Topic.probePrefix + "replay"], confirm: true)
        } catch {
            FileHandle.standardError.write(Data("tether-tap: \(error)\n".utf8))
            throw ExitCode(.notRunning)
        }
        let start = ContinuousClock.now
        var sent = 0
        for message in messages {
            guard filter.topics.isEmpty || filter.accepts(message.busMessage) else { continue }
            if speed > 0 { try await Task.sleep(until: start + .seconds(message.at / speed), clock: .continuous) }
            try bus.publishRaw(message.frames)
            sent += 1
        }
        await bus.close()
        let dropped = bus.statistics.dropped[BusDrop.publishRefused, default: 0]
        print("replayed \(sent) messages from \(file)\(dropped > 0 ? "; \(dropped) dropped by a full queue" : "")")
        if dropped > 0 { throw ExitCode(.notDone) }
    }
}

extension RecordedMessage {
    var busMessage: BusMessage {
        BusMessage(topic: Topic(topic), header: header, body: body)
    }
}
