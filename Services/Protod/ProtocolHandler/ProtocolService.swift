import Foundation
public import Logging
import OpenClawWire
public import ServiceLifecycle
public import TetherBus
public import TetherSchema
public import TetherService
public import TetherStorage
import TetherWire

/// How protod keeps its outbox.
public struct ProtocolSettings: Sendable {
    /// The retry policy of a message that names none.
    public var defaultRetry: RetryPolicy
    /// The delivery machine's limits and timings.
    public var delivery: DeliveryStateMachine.Settings

    public init(defaultRetry: RetryPolicy = .default, delivery: DeliveryStateMachine.Settings = .init()) {
        self.defaultRetry = defaultRetry
        self.delivery = delivery
    }
}

/// The counters protod sends with its heartbeat.
public enum ProtocolCounter {
    /// Frames from the gateway (or bus messages) that could not be read, dropped.
    public static let malformedFrames = "malformedFrames"
    /// Gateway messages of a type this version does not know, ignored.
    public static let unknownTypes = "unknownTypes"
    public static let all = [malformedFrames, unknownTypes]
}

/// The protocol handler: turns send commands into chat messages through the durable
/// outbox, tracks their acknowledgements, assembles streamed replies, answers pings,
/// judges health, and publishes the conversation, suggestions and diagnostics on the bus.
///
/// Its decisions are ``DeliveryStateMachine``'s; this service feeds it the bus's events
/// one at a time and carries out its actions.
public struct ProtocolService: Service {
    private let bus: any Bus
    private let engine: ProtocolEngine
    private let outbox: Outbox
    private let journal: ConversationJournal
    private let logger: Logger

    /// - Parameters:
    ///   - damaged: the stores found damaged at start and made anew.
    ///   - storage: what protod says of its files (retained on `storage`); by default, that all is well.
    ///   - counters: where the frames protod drops are counted (``ProtocolCounter``).
    public init(
        bus: any Bus, outbox: Outbox, journal: ConversationJournal, settings: ProtocolSettings = ProtocolSettings(), damaged: DamagedStores = DamagedStores(),
        storage: StorageCondition = StorageCondition(program: "tether-protod", path: ".", replaced: []),
        counters: ProgramCounters = ProgramCounters(), logger: Logger
    ) {
        self.bus = bus
        self.outbox = outbox
        self.journal = journal
        self.logger = logger
        self.engine = ProtocolEngine(
            bus: bus, outbox: outbox, journal: journal, settings: settings, damaged: damaged, storage: storage, counters: counters,
            logger: logger)
    }

    public func run() async throws {
        let commands = try await bus.serve(endpoint: SendMessageCommand.endpoint)
        let inbound = try await bus.subscribe(to: [Topic.connectionState.name, Topic.wireInbound.name, Topic.networkPath.name])
        let wirePath = try bus.subscriberPresence(for: .wireOutbound)
        let bus = self.bus
        var builder = CommandDispatcher(bus: bus, logger: logger)
        let engine = self.engine
        // A command that waits on the gateway's answer runs alongside: a send is not left
        // unanswered behind it while the gateway is slow or gone.
        builder.on(SendMessageCommand.self) { request in
            try await engine.send(request)
        }
        builder.on(CancelCommand.self) { request in
            try await engine.cancel(request.id)
        }
        builder.on(AbortCommand.self, .alongside) { request in
            try await engine.abort(request.id)
        }
        builder.on(ApprovalsCommand.self) { _ in
            try await engine.approvals()
        }
        builder.on(ApproveCommand.self, .alongside) { request in
            try await engine.approve(request)
        }
        builder.on(SessionsCommand.self, .alongside) { _ in
            try await engine.sessions()
        }
        builder.on(ModelsCommand.self, .alongside) { _ in
            try await engine.models()
        }
        builder.on(AgentsCommand.self, .alongside) { _ in
            try await engine.agents()
        }
        builder.on(SessionSetCommand.self, .alongside) { request in
            try await engine.setSession(request)
        }
        builder.on(SessionUseCommand.self) { request in
            try await engine.useSession(request.key)
        }
        builder.on(RecoverCommand.self) { _ in
            await engine.attemptRecovery()
        }
        builder.on(JournalCommand.self) { request in
            try await engine.journalChanges(after: request.after, limit: request.limit)
        }
        try await engine.start()
        let dispatcher = builder
        await withDiscardingTaskGroup { group in
            group.addTask { await engine.run() }
            group.addTask { await dispatcher.run(commands) }
            group.addTask {
                for await message in inbound {
                    await engine.receive(message)
                }
            }
            group.addTask {
                for await heard in wirePath {
                    // The gateway's replay must find this side listening too.
                    if heard { try? await bus.confirmRoundTrip(timeout: .seconds(2)) }
                    await engine.handle(.wirePath(heard: heard))
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        // Every task that used the stores has ended: closed now, not whenever the process lets go of them.
        for (what, close) in [("the outbox", outbox.close), ("the conversation journal", journal.close)] {
            do {
                try close()
            } catch {
                logger.warning("\(what) did not close cleanly; SQLite recovers its write-ahead log at the next start", metadata: ["error": "\(error)"])
            }
        }
    }
}
