import ArgumentParser
import BusTap
import Foundation
import Logging
import TetherBus
import TetherService

@main
struct TapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-tap",
        abstract: "Print every message on the Tether bus: time, source and sequence, topic, body.",
        discussion: "Retained values (connection, network, bot, outbox) are shown first, marked (retained)."
    )

    @OptionGroup var options: ProgramOptions

    @Argument(help: "Topic prefixes to show (conv. shows conv.message, conv.delivery, …); none shows all.")
    var prefixes: [String] = []

    @Flag(help: "One JSON object a line: {\"topic\", \"header\", \"body\"}.")
    var json = false

    @Flag(help: "Also show the probes subscribers send to confirm their subscriptions.")
    var showProbes = false

    @Option(help: "Stop after this many messages.")
    var count: Int?

    func validate() throws {
        if let count, count <= 0 { throw ValidationError("--count must be positive") }
    }

    func run() async throws {
        options.bootstrapLogging()
        let logger = Logger(label: "tether-tap")
        let bus = try BusClient(source: "tether-tap", runDirectory: options.resolvedRunDirectory, logger: logger)
        let filter = TapFilter(prefixes: prefixes, showProbes: showProbes)
        let formatter = TapFormatter(style: json ? .json : .pretty)
        let subscription: BusSubscription
        do {
            subscription = try await bus.subscribe(to: filter.subscription, confirm: true)
        } catch {
            FileHandle.standardError.write(Data("tether-tap: \(error)\n".utf8))
            throw ExitCode(4)
        }
        var shown = 0
        for await message in subscription where filter.accepts(message) {
            FileHandle.standardOutput.write(Data((formatter.format(message) + "\n").utf8))
            shown += 1
            if let count, shown >= count { break }
        }
        await bus.close()
    }
}
