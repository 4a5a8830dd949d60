public import Logging
public import ServiceLifecycle
public import TetherBus
import TetherSchema
import TetherService

/// The snapshot store: records the conversation from the bus and gives a front end the
/// latest transcript when it asks.
public struct SnapshotService: Service {
    private let bus: BusClient
    private let store: TranscriptStore
    private let logger: Logger

    public init(bus: BusClient, store: TranscriptStore, logger: Logger) {
        self.bus = bus
        self.store = store
        self.logger = logger
    }

    public func run() async throws {
        let updates = try await bus.subscribe(to: [Topic.conversationMessage.name, Topic.conversationDelivery.name])
        let commands = try await bus.serve(endpoint: TranscriptCommand.endpoint)
        var builder = CommandDispatcher(bus: bus, logger: logger)
        let store = self.store
        builder.on(TranscriptCommand.self) { request in
            let page = try await store.latest(limit: min(request.limit, TranscriptCommand.pageLimit), before: request.before)
            return TranscriptCommand.Reply(entries: page.entries, nextBefore: page.nextBefore)
        }
        let dispatcher = builder
        await withDiscardingTaskGroup { group in
            group.addTask { await dispatcher.run(commands) }
            group.addTask { await record(updates) }
            try? await gracefulShutdown()
            group.cancelAll()
        }
    }

    private func record(_ updates: BusSubscription) async {
        for await message in updates {
            do {
                switch message.topic {
                case .conversationMessage:
                    try await store.upsert(try message.decode(TranscriptEntry.self))
                case .conversationDelivery:
                    try await store.update(try message.decode(DeliveryUpdate.self))
                default:
                    break
                }
            } catch {
                logger.warning("cannot record a conversation update", metadata: ["bus.topic": "\(message.topic)", "snapd.error": "\(error)"])
            }
        }
    }
}
