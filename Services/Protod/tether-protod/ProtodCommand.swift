import ArgumentParser
import Logging
import ProtocolHandler
import TetherBus
import TetherSchema
import TetherService

@main
struct ProtodCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-protod",
        abstract: "The protocol handler: durable outbox, acknowledgements, streamed replies, ping/pong."
    )

    @OptionGroup var options: ProgramOptions

    @Option(help: "The outbox database (default: protod.sqlite in the run directory).")
    var outbox: String?

    @Option(help: "The conversation journal snapd catches up from (default: conversation.sqlite in the run directory).")
    var journal: String?

    @Option(help: "Retry policy of messages that name none: default (3 attempts, 200 ms apart, 10 s each), patient (5, 1 s, 30 s) or none.")
    var retry = "default"

    @Option(help: "At most this many messages wait; the oldest is dropped for a new one.")
    var maxPending = 100

    @Option(help: "Seconds after which a message not delivered expires.")
    var expiry: Double = 3600

    func validate() throws {
        guard RetryPolicy.named(retry) != nil else { throw ValidationError("--retry must be default, patient or none") }
        guard maxPending >= 1 else { throw ValidationError("--max-pending must be at least 1") }
        guard expiry > 0 else { throw ValidationError("--expiry must be positive") }
    }

    func run() async throws {
        let path = outbox ?? options.resolvedRunDirectory.file("protod.sqlite")
        let journalPath = journal ?? options.resolvedRunDirectory.file("conversation.sqlite")
        let settings = ProtocolSettings(
            defaultRetry: RetryPolicy.named(retry) ?? .default, maximumPending: maxPending, expiry: .milliseconds(Int(expiry * 1000)))
        let counters = ProgramCounters(names: ProtocolCounter.all)
        try await BusProgram.run("tether-protod", options: options, counters: counters) { bus, logger in
            [
                ProtocolService(
                    bus: bus, outbox: try Outbox(path: path), journal: try ConversationJournal(path: journalPath), settings: settings,
                    counters: counters, logger: logger)
            ]
        }
    }
}
