import Foundation
import NetworkMonitor
import Testing
import TetherSchema
import TetherTesting

/// The path read from procfs and sysfs, on fixture trees.
@Suite struct KernelRoutesTests {
    private func fixture(
        route: String, ipv6: String = "", interfaces: [String: [String: String]], addressed: Set<String>? = nil
    ) throws -> (TestRunDirectory, KernelRoutes) {
        let root = try TestRunDirectory()
        let fileManager = FileManager.default
        try fileManager.createDirectory(atPath: root.path + "/proc/net", withIntermediateDirectories: true)
        try route.write(toFile: root.path + "/proc/net/route", atomically: true, encoding: .utf8)
        try ipv6.write(toFile: root.path + "/proc/net/ipv6_route", atomically: true, encoding: .utf8)
        for (name, files) in interfaces {
            let directory = root.path + "/sys/class/net/\(name)"
            try fileManager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for (file, contents) in files {
                if contents == "<dir>" {
                    try fileManager.createDirectory(atPath: directory + "/" + file, withIntermediateDirectories: true)
                } else {
                    try (contents + "\n").write(toFile: directory + "/" + file, atomically: true, encoding: .utf8)
                }
            }
        }
        let withAddresses = addressed ?? Set(interfaces.keys)
        return (root, KernelRoutes(procRoot: root.path + "/proc", sysRoot: root.path + "/sys", hasUsableAddress: { withAddresses.contains($0) }))
    }

    private let header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"

    @Test func wiredDefaultRoute() throws {
        let (root, routes) = try fixture(
            route: header + "eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\neth0\t0000A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n",
            interfaces: ["eth0": ["operstate": "up", "type": "1"]])
        withExtendedLifetime(root) {
            #expect(routes.currentPath() == NetworkPath(satisfied: true, interface: "eth0", kind: .wired, expensive: false))
        }
    }

    @Test func lowestMetricWinsAndWifiIsRecognised() throws {
        let (root, routes) = try fixture(
            route: header + "eth0\t00000000\t0100A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\nwlan0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n",
            interfaces: ["eth0": ["operstate": "up", "type": "1"], "wlan0": ["operstate": "up", "type": "1", "wireless": "<dir>"]])
        withExtendedLifetime(root) {
            #expect(routes.currentPath().interface == "wlan0")
            #expect(routes.currentPath().kind == .wifi)
        }
    }

    @Test func cellularIsExpensive() throws {
        let (root, routes) = try fixture(
            route: header + "wwan0\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n",
            interfaces: ["wwan0": ["operstate": "unknown", "flags": "0x1041", "type": "519", "uevent": "DEVTYPE=wwan"]])
        withExtendedLifetime(root) {
            #expect(routes.currentPath() == NetworkPath(satisfied: true, interface: "wwan0", kind: .cellular, expensive: true))
        }
    }

    @Test func noDefaultRouteOrInterfaceDown() throws {
        let (root, routes) = try fixture(route: header, interfaces: [:])
        let (downRoot, downRoutes) = try fixture(
            route: header + "eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n", interfaces: ["eth0": ["operstate": "down", "type": "1"]])
        withExtendedLifetime((root, downRoot)) {
            #expect(routes.currentPath().satisfied == false)
            #expect(routes.currentPath().reason == "no default route")
            #expect(downRoutes.currentPath().satisfied == false)
            #expect(downRoutes.currentPath().reason == "interface eth0 is down")
        }
    }

    @Test func ipv6OnlyDefaultRoute() throws {
        let ipv6 =
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth1\n"
            + "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n"
        let (root, routes) = try fixture(route: header, ipv6: ipv6, interfaces: ["eth1": ["operstate": "up", "type": "1"]])
        withExtendedLifetime(root) {
            #expect(routes.currentPath().interface == "eth1")
            #expect(routes.currentPath().satisfied)
        }
    }

    @Test func upButWithoutAnAddress() throws {
        let (root, routes) = try fixture(
            route: header + "eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
            interfaces: ["eth0": ["operstate": "up", "type": "1"]], addressed: [])
        withExtendedLifetime(root) {
            #expect(routes.currentPath().satisfied == false)
            #expect(routes.currentPath().reason == "interface eth0 has no usable address")
        }
    }

    /// This machine's own tables parse into a path, whatever it is.
    @Test func thisMachine() {
        let path = KernelRoutes().currentPath()
        #expect(path.satisfied == (path.interface != nil && path.reason == nil))
    }
}
