public import ArgumentParser
import Logging
import ProtocolHandler
import TetherBus
import TetherSchema
import TetherService
import TetherStorage

@main
struct ProtodCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-protod",
        abstract: "The protocol handler: durable outbox, acknowledgements, streamed replies, ping/pong.",
        version: TetherVersion.current,
    )

    @OptionGroup var options: ProgramOptions

    @Option(help: "The outbox database (default: protod.sqlite in the state directory).")
    var outbox: String?

    @Option(help: "The conversation journal snapd catches up from (default: conversation.sqlite in the state directory).")
    var journal: String?

    @Option(help: "Retry policy of messages that name none: default (an acknowledgement is late after 10 s), patient (30 s) or none.")
    var retry = RetryPolicy.default

    @Option(help: "At most this many messages wait to be written to the gateway; --when-full says what happens to a new one beyond.")
    var maxPending = 100

    @Option(
        help: ArgumentHelp(
            "What a full outbox does with a new message: refuse (at once, in words; nothing accepted is touched) or drop-oldest "
                + "(accept it and drop the oldest message never written, announced on the bus; every sender is told its message may be dropped)."))
    var whenFull = OverflowPolicy.refuse

    @Option(help: "Seconds after which a message never written to the gateway expires.")
    var expiry: Double = 3600

    @Option(help: "Seconds an acknowledgement or the next chunk of a reply may take on a live connection before it is probed.")
    var probeAfter: Double = 2

    @Option(help: "Seconds the gateway has to answer a probe (system.ping) or session.resume.")
    var probeDeadline: Double = 2

    @Option(help: "OpenClaw: the session to chat in (default: the gateway's main session; `main` means it too).")
    var session: String?

    @Option(
        help:
            "Seconds a reply may stop growing on a live connection before it is marked incomplete (the seed dialect; OpenClaw runs end by the gateway's word).")
    var replyStall: Double = 30

    func validate() throws {
        guard maxPending >= 1 else { throw ValidationError("--max-pending must be at least 1") }
        for (name, value) in [("--expiry", expiry), ("--probe-after", probeAfter), ("--probe-deadline", probeDeadline), ("--reply-stall", replyStall)] {
            guard value > 0 else { throw ValidationError("\(name) must be positive") }
        }
    }

    func run() async throws {
        let state = options.resolvedStateDirectory
        let path = outbox ?? state.file("protod.sqlite")
        let journalPath = journal ?? state.file("conversation.sqlite")
        // Stores at their default place may still be where an earlier Tether kept them.
        var moving: [StoreRelocation.Store] = []
        if outbox == nil { moving.append(.init("protod.sqlite", what: "the outbox")) }
        if journal == nil { moving.append(.init("conversation.sqlite", what: "the conversation journal")) }
        let settings = ProtocolSettings(
            defaultRetry: retry,
            delivery: .init(
                maximumQueued: maxPending, expiry: expiry, probeAfter: probeAfter, probeDeadline: probeDeadline, replyStallDeadline: replyStall,
                sessionKey: session, whenFull: whenFull))
        let counters = ProgramCounters(names: ProtocolCounter.all)
        try await BusProgram.run("tether-protod", options: options, counters: counters) { bus, logger in
            try state.prepare()
            let moves = try StoreRelocation.moveStores(moving, into: state.path, from: state.legacyDirectories(runDirectory: options.resolvedRunDirectory))
            StoreRelocation.log(moves, to: logger)
            // The journal first: what it holds is what a damaged outbox is recovered from.
            let (journal, journalReplaced, outbox, outboxReplaced, recovery) = try await ConfigurationProblem.guarding("tether-protod") {
                let (journal, journalReplaced) = try await ConversationJournal.openChecked(path: journalPath)
                let recent = journalReplaced == nil ? ((try? journal.recentEntries(limit: DeliveryStateMachine.knownLimit)) ?? []) : []
                let (outbox, outboxReplaced, recovery) = try await Outbox.openChecked(path: path, recoveringFrom: recent, retry: retry)
                return (journal, journalReplaced, outbox, outboxReplaced, recovery)
            }
            let replaced = [outboxReplaced, journalReplaced].compactMap { $0 }
            for file in replaced { logger.error("\(file.words)") }
            return [
                ProtocolService(
                    bus: bus, outbox: outbox, journal: journal, settings: settings,
                    damaged: DamagedStores(outbox: recovery, journal: journalReplaced != nil),
                    storage: StorageCondition(program: "tether-protod", path: path, replaced: replaced), counters: counters, logger: logger)
            ]
        }
    }
}

extension OverflowPolicy: ExpressibleByArgument {}
