import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting

/// tether-netmon in a network namespace made by the test, watching real kernel changes.
@Suite(.serialized, .enabled(if: NetworkNamespace.unavailableReason == nil, "\(NetworkNamespace.unavailableReason ?? "")"))
struct NetmonTests {
    @Test func everyTransitionAppearsOnTheBus() async throws {
        let run = try TestRunDirectory()
        let namespace = try NetworkNamespace()
        let bus = try ChildProcess(Programs.path("tether-bus"), ["--run-dir", run.path], outputDirectory: run.path)
        defer { bus.stop() }
        let client = try BusClient(source: "netmon-test", runDirectory: run.runDirectory, logger: Logger(label: "netmon-test"))
        let paths = try await BusRecorder<NetworkPath>(bus: client, topic: .networkPath)
        let (executable, arguments) = namespace.command(Programs.path("tether-netmon"), ["--run-dir", run.path])
        let netmon = try ChildProcess(executable, arguments, outputDirectory: run.path, name: "netmon")
        defer { netmon.stop() }

        let first = try await paths.waitFor { $0.satisfied }
        #expect(first.value.interface == namespace.interface)
        #expect(first.value.kind == .wired)

        var figures: [String] = []
        func change(_ label: String, _ command: [String], expect condition: @escaping @Sendable (NetworkPath) -> Bool) async throws {
            let changed = ContinuousClock.now
            try namespace.exec(command)
            let event = try await paths.waitFor(timeout: .seconds(5), since: changed, condition)
            figures.append("\(label) \(changed.duration(to: event.receivedAt))")
        }
        // Setting a link down also makes the kernel drop the routes through it.
        try await change("link down:", ["ip", "link", "set", namespace.interface, "down"]) { !$0.satisfied }
        try namespace.exec(["ip", "link", "set", namespace.interface, "up"])
        // As a DHCP client or network manager would once the link is back.
        try await change("link up, route back:", ["ip", "route", "add", "default", "via", "10.231.0.1", "dev", namespace.interface]) {
            $0.satisfied && $0.interface == "tt0"
        }
        try await change("default route removed:", ["ip", "route", "del", "default"]) { !$0.satisfied && $0.reason == "no default route" }
        try await change("default route restored:", ["ip", "route", "add", "default", "via", "10.231.0.1", "dev", namespace.interface]) { $0.satisfied }
        // A second interface takes the default route: the primary interface changes.
        try namespace.exec(["ip", "link", "add", "tt2", "type", "veth", "peer", "name", "tt3"])
        try namespace.exec(["ip", "link", "set", "tt3", "up"])
        try namespace.exec(["ip", "link", "set", "tt2", "up"])
        try namespace.exec(["ip", "addr", "add", "10.232.0.2/24", "dev", "tt2"])
        try await change("primary interface changed:", ["ip", "route", "replace", "default", "via", "10.232.0.1", "dev", "tt2"]) {
            $0.satisfied && $0.interface == "tt2"
        }
        try await change("back to the first:", ["ip", "route", "replace", "default", "via", "10.231.0.1", "dev", namespace.interface]) {
            $0.satisfied && $0.interface == "tt0"
        }
        try await change("address removed:", ["ip", "addr", "del", "10.231.0.2/24", "dev", namespace.interface]) { !$0.satisfied }
        print("from the kernel change to the event on the bus: " + figures.joined(separator: ", "))
        #expect(netmon.standardError.contains("rtnetlink") == false, "netmon fell back to polling: \(netmon.standardError)")
        await client.close()
    }

    @Test func wholeSetInANamespaceWaitsForTheNetworkAndReconnectsWhenItReturns() async throws {
        let namespace = try NetworkNamespace()
        let set = try await ComposedSet(namespace: namespace)
        defer { set.stop() }
        let client = try BusClient(source: "netmon-test", runDirectory: set.run.runDirectory, logger: Logger(label: "netmon-test"))
        let states = try await BusRecorder<ConnectionStatus>(bus: client, topic: .connectionState)
        _ = try await states.waitFor { $0.phase == .connected }

        try namespace.exec(["ip", "link", "set", namespace.interface, "down"])
        let waiting = try await states.waitFor { $0.phase == .waitingForNetwork }
        #expect(waiting.value.words == "No network — waiting for connection.")
        let status = try set.tether(["status"])
        #expect(status.standardOutput.contains("No network — waiting for connection."))
        #expect(status.standardOutput.contains("network: unavailable"))

        try namespace.exec(["ip", "link", "set", namespace.interface, "up"])
        let back = ContinuousClock.now
        try namespace.exec(["ip", "route", "add", "default", "via", "10.231.0.1", "dev", namespace.interface])
        let connected = try await states.waitFor(since: back) { $0.phase == .connected }
        let elapsed = back.duration(to: connected.receivedAt)
        print("network back to connected, the whole set in a namespace: \(elapsed)")
        #expect(elapsed < .seconds(1), "the default preset's first retry waits 1 s; a returning network must not")
        let send = try set.tether(["send", "back", "online"])
        #expect(send.standardOutput == "You said: back online\n")
        await client.close()
    }
}
