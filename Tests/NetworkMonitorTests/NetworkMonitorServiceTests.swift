import Foundation
import Logging
import ServiceLifecycle
import Testing
import TetherBus
import TetherSchema
import TetherTesting

@testable import NetworkMonitor

/// tether-netmon's service on an in-memory bus, reading fixture kernel tables and told of
/// changes by the test instead of rtnetlink: what it publishes, without processes.
@Suite struct NetworkMonitorServiceTests {
    static let header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    static let wiredDefault = header + "eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"

    /// netmon on an in-memory bus over a fixture tree whose route table the test rewrites.
    final class Rig: Sendable {
        let bus = InMemoryBus()
        let root: TestRunDirectory
        let front: InMemoryBus.Client
        let kernel: AsyncStream<Void>.Continuation
        private let group: ServiceGroup
        private let running: Task<Void, Never>

        init(route: String) throws {
            root = try TestRunDirectory()
            let fileManager = FileManager.default
            try fileManager.createDirectory(atPath: root.path + "/proc/net", withIntermediateDirectories: true)
            try "".write(toFile: root.path + "/proc/net/ipv6_route", atomically: true, encoding: .utf8)
            for (name, type) in [("eth0", "1"), ("wlan0", "1")] {
                let directory = root.path + "/sys/class/net/\(name)"
                try fileManager.createDirectory(atPath: directory, withIntermediateDirectories: true)
                try "up\n".write(toFile: directory + "/operstate", atomically: true, encoding: .utf8)
                try "\(type)\n".write(toFile: directory + "/type", atomically: true, encoding: .utf8)
                if name == "wlan0" { try fileManager.createDirectory(atPath: directory + "/wireless", withIntermediateDirectories: true) }
            }
            front = bus.client("tether")
            let (changes, kernel) = AsyncStream<Void>.makeStream()
            self.kernel = kernel
            let routes = KernelRoutes(procRoot: root.path + "/proc", sysRoot: root.path + "/sys", hasUsableAddress: { _ in true })
            let logger = Logger(label: "netmon-test")
            let service = NetworkMonitorService(bus: bus.client("tether-netmon"), routes: routes, coalescing: .zero, changes: changes, logger: logger)
            group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: logger))
            try route.write(toFile: root.path + "/proc/net/route", atomically: true, encoding: .utf8)
            let group = self.group
            running = Task { try? await group.run() }
        }

        deinit {
            let group = self.group
            Task { await group.triggerGracefulShutdown() }
            running.cancel()
        }

        func setRoute(_ table: String) throws {
            try table.write(toFile: root.path + "/proc/net/route", atomically: true, encoding: .utf8)
        }
    }

    @Test func thePathIsRetainedAtStartForEverySubscriberThatComesLater() async throws {
        let rig = try Rig(route: Self.wiredDefault)
        let paths = try await BusRecorder<NetworkPath>(bus: rig.front, topic: .networkPath)
        let path = try await paths.waitFor(timeout: .seconds(30)) { _ in true }
        #expect(path.value == NetworkPath(satisfied: true, interface: "eth0", kind: .wired, expensive: false))
        let later = try await BusRecorder<NetworkPath>(bus: rig.bus.client("tether-connd"), topic: .networkPath)
        let replayed = try await later.waitFor(timeout: .seconds(30)) { _ in true }
        #expect(replayed.value == path.value && replayed.header.replay)
    }

    @Test func aChangeIsPublishedOnceAndAKernelMessageThatChangesNothingIsNot() async throws {
        let rig = try Rig(route: Self.wiredDefault)
        let paths = try await BusRecorder<NetworkPath>(bus: rig.front, topic: .networkPath)
        _ = try await paths.waitFor(timeout: .seconds(30)) { $0.interface == "eth0" }
        // The kernel says something changed, and nothing did.
        rig.kernel.yield()
        try rig.setRoute(Self.header)
        rig.kernel.yield()
        let lost = try await paths.waitFor(timeout: .seconds(30)) { !$0.satisfied }
        #expect(lost.value == NetworkPath(satisfied: false, interface: nil, kind: nil, expensive: false, reason: "no default route"))
        try rig.setRoute(Self.header + "wlan0\t00000000\t0100A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n")
        rig.kernel.yield()
        let wifi = try await paths.waitFor(timeout: .seconds(30)) { $0.interface == "wlan0" }
        #expect(wifi.value == NetworkPath(satisfied: true, interface: "wlan0", kind: .wifi, expensive: false))
        #expect(await paths.entries.map(\.value.interface) == ["eth0", nil, "wlan0"], "one publication for each change, none for no change")
    }
}
