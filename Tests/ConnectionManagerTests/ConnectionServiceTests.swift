import Foundation
import Logging
import Synchronization
import Testing
import TetherBus
import TetherSchema
import TetherTesting

@testable import ConnectionManager

/// connd's service on the in-memory bus: what it retains, the commands it answers and the
/// front ends it follows, with no process and no gateway.
@Suite struct ConnectionServiceTests {
    /// A service whose token cannot be read: it fails without reaching for the network.
    static func service(on memory: InMemoryBus) -> ConnectionService {
        let configuration = ConnectionConfiguration(
            url: "ws://127.0.0.1:9/ws", credential: .environment("TETHER_TEST_TOKEN_THAT_IS_NEVER_SET"), failedKnockInterval: nil)
        return ConnectionService(
            bus: memory.client("tether-connd"), configuration: configuration, lifecycle: LifecycleSettings(idleSuspendAfter: .milliseconds(200)),
            logger: Logger(label: "connd-test"))
    }

    /// The first value on `topic` that `matches`, within 5 s.
    static func first<Value: Decodable & Sendable>(
        _ type: Value.Type, on topic: Topic, from bus: some Bus, where matches: @escaping @Sendable (Value) -> Bool
    ) async throws -> Value? {
        let messages = try await bus.subscribe(to: [topic.name])
        return await withTaskGroup(of: Value?.self) { group in
            group.addTask {
                for await message in messages {
                    if let value = try? message.decode(Value.self), matches(value) { return value }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let found = await group.next() ?? nil
            group.cancelAll()
            return found
        }
    }

    @Test func itRetainsWhereItStandsAndAnswersCommands() async throws {
        let memory = InMemoryBus()
        let test = memory.client("test")
        let service = Self.service(on: memory)
        let running = Task { try await service.run() }
        defer { running.cancel() }

        let identity = try await Self.first(ConnectionIdentity.self, on: .connectionIdentity, from: test) { _ in true }
        #expect(identity?.keyID == "env:TETHER_TEST_TOKEN_THAT_IS_NEVER_SET")
        let failed = try await Self.first(ConnectionStatus.self, on: .connectionState, from: test) { $0.phase == .failed }
        #expect(failed?.failure == .credentialUnavailable)
        #expect(failed?.lastError?.hasPrefix("the token cannot be read: ") == true, "\(failed?.lastError ?? "")")

        let suspended = try await test.request(ConnectionCommand.self, .init(action: .suspend, reason: "a test"))
        #expect(suspended.accepted && suspended.phase == .suspended)
        let again = try await test.request(ConnectionCommand.self, .init(action: .suspend))
        #expect(!again.accepted, "suspended already, for the same reason")
        let status = try await Self.first(ConnectionStatus.self, on: .connectionState, from: test) { _ in true }
        #expect(status?.phase == .suspended && status?.suspendReason == .command)
        let resumed = try await test.request(ConnectionCommand.self, .init(action: .resume))
        #expect(resumed.accepted)
        #expect(try await Self.first(ConnectionStatus.self, on: .connectionState, from: test) { $0.phase == .failed } != nil)
    }

    @Test func itFollowsFrontEndsAndSuspendsWhenTheLastHasGone() async throws {
        let memory = InMemoryBus()
        let test = memory.client("test")
        let service = Self.service(on: memory)
        let running = Task { try await service.run() }
        defer { running.cancel() }
        _ = try await Self.first(ConnectionStatus.self, on: .connectionState, from: test) { $0.phase == .failed }

        let presence = FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .active)
        try test.publish(presence, on: .frontEndPresence)
        let attached = try await Self.first(AttachedFrontEnds.self, on: .frontEndsAttached, from: test) { !$0.frontEnds.isEmpty }
        #expect(attached?.frontEnds == [presence])
        try test.publish(FrontEndPresence(frontEnd: "tether", instance: "a", pid: 1, state: .leaving), on: .frontEndPresence)
        let idle = try await Self.first(ConnectionStatus.self, on: .connectionState, from: test) { $0.phase == .suspended }
        #expect(idle?.suspendReason == .idle, "suspended once the grace period (200 ms) passed")
        try test.publish(presence, on: .frontEndPresence)
        let back = try await Self.first(ConnectionStatus.self, on: .connectionState, from: test) { $0.phase != .suspended }
        #expect(back?.phase == .connecting || back?.phase == .failed, "a front end back resumes")
    }

    @Test func cancellingTheServiceEndsIt() async throws {
        let memory = InMemoryBus()
        let service = Self.service(on: memory)
        let running = Task { try await service.run() }
        _ = try await Self.first(ConnectionStatus.self, on: .connectionState, from: memory.client("test")) { $0.phase == .failed }
        let ended = Mutex(false)
        Task {
            _ = try? await running.value
            ended.withLock { $0 = true }
        }
        running.cancel()
        let done = await eventually(timeout: .seconds(5)) { ended.withLock { $0 } }
        #expect(done)
    }
}
