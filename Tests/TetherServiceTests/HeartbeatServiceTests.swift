import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherService
import TetherTesting

/// The heartbeat through a real proxy: retained, beating at once on a change and otherwise
/// only every ``HeartbeatService/interval``.
@Suite(.serialized) struct HeartbeatServiceTests {
    @Test func aChangeBeatsAtOnceAndAnIdleProgramStaysQuiet() async throws {
        let run = try TestRunDirectory()
        let proxy = try ChildProcess(Programs.path("tether-bus"), ["--run-dir", run.path], outputDirectory: run.path)
        defer { proxy.stop() }
        #expect(await eventually { FileManager.default.fileExists(atPath: run.path + "/bus.out") }, "the proxy did not bind")
        let program = try BusClient(source: "beating", runDirectory: run.runDirectory, logger: Logger(label: "beating"))
        let counters = ProgramCounters(names: ["handled"])
        let beating = Task { try await HeartbeatService(bus: program, program: "beating", counters: counters).run() }
        defer { beating.cancel() }

        // A subscriber arriving later gets the retained beat at once.
        try await Task.sleep(for: .milliseconds(300))
        let watcher = try BusClient(source: "watcher", runDirectory: run.runDirectory, logger: Logger(label: "watcher"))
        let subscribed = ContinuousClock.now
        let beats = try await BusRecorder(bus: watcher, topic: .heartbeat, as: Heartbeat.self)
        let first = try await beats.waitFor(timeout: .seconds(2)) { $0.program == "beating" }
        #expect(first.header.replay, "the first beat a late subscriber sees is the retained one")
        print("retained heartbeat \(subscribed.duration(to: first.receivedAt)) after subscribing")

        // Idle: nothing more for 3 s (the interval is 30 s).
        try await Task.sleep(for: .seconds(3))
        // (The proxy beats too: only this program's beats count.)
        let idle = await beats.entries.filter { $0.value.program == "beating" }
        #expect(idle.count == 1, "an idle program beat again: \(idle.map { ($0.header.sequence, $0.receivedAt) })")

        // A counter changes: a beat carrying it follows within the spacing.
        let changed = ContinuousClock.now
        counters.increment("handled")
        let counted = try await beats.waitFor(timeout: .seconds(2)) { $0.counters?["handled"] == 1 }
        print("a counter's change was on the bus \(changed.duration(to: counted.receivedAt)) later")
        await watcher.close()
        await program.close()
    }
}
