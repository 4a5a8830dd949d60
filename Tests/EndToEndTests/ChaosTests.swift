import Foundation
import Logging
import Synchronization
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// The chaos soak: the whole set in a network namespace while messages are sent and every
/// program is SIGKILLed at random moments, the gateway restarted, the link taken down and up,
/// and, with nftables, packets to and from the gateway lost (5% each way for the whole run)
/// and blackholed (two 5 s blackholes, one more each further minute; netem delay too where
/// the kernel has it). Nothing accepted may be lost, duplicated or reordered. A short run is
/// part of the suite; scripts/chaos runs a long one (TETHER_CHAOS_SECONDS, TETHER_CHAOS_SEED,
/// TETHER_CHAOS_FAULTS to choose the kinds, TETHER_CHAOS_LOSS for the loss in percent).
///
/// It runs against three gateways: the development gateway (exactly once), the same as a
/// seed-only peer (`strictSeed`: at least once, so copies are counted and shown, not failed),
/// and the development gateway speaking OpenClaw's protocol (exactly once: idempotency keys
/// and history lookups; its idempotency cache is lost at each restart).
@Suite(.serialized) struct ChaosTests {
    private static let environment = ProcessInfo.processInfo.environment

    /// The gateways the soak runs against, and the faults that make each.
    static let gateways = ["development", "strict-seed", "openclaw"]

    @Test(arguments: gateways)
    func chaosSoakLosesNothing(gateway: String) async throws {
        let seconds = Double(Self.environment["TETHER_CHAOS_SECONDS"] ?? "") ?? 20
        let seed = UInt64(Self.environment["TETHER_CHAOS_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
        var random = SeededRandom(seed: seed)
        let namespace: NetworkNamespace? = NetworkNamespace.unavailableReason == nil ? try NetworkNamespace() : nil
        var kinds = ["kill bus", "kill netmon", "kill snapd", "kill protod", "kill connd", "restart gateway"]
        var notes: [String] = []
        if let namespace {
            kinds += ["link down", "blackhole"]
            if (try? namespace.exec(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])) != nil {
                try namespace.exec(["tc", "qdisc", "del", "dev", "lo", "root"])
                kinds.append("loss and delay")
            } else {
                notes.append("loss and delay: not injected, this kernel has no netem qdisc")
            }
        } else {
            notes.append("link down, loss and delay: not injected, \(NetworkNamespace.unavailableReason ?? "")")
        }
        if let chosen = Self.environment["TETHER_CHAOS_FAULTS"]?.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }), !chosen.isEmpty {
            let unknown = chosen.filter { !kinds.contains($0) }
            try #require(unknown.isEmpty, "TETHER_CHAOS_FAULTS names faults this run cannot inject: \(unknown); it can: \(kinds)")
            kinds = chosen
        }
        let lossPercent = Int(Self.environment["TETHER_CHAOS_LOSS"] ?? "") ?? 5

        let strict = gateway == "strict-seed"
        // A seed peer answers one message at a time: quicker chunks keep it ahead of the sender.
        let environment =
            strict
            ? ["TETHER_GATEWAY_FAULTS": #"{"strictSeed": true}"#, "TETHER_CHUNK_DELAY": "5"]
            : gateway == "openclaw"
                // As the real gateway (protocol 3): one event counter for the whole gateway, a
                // busy session's queue, and a model that fails one run in twenty (each failure
                // holds the next message back until the gateway says it gave up).
                ? [
                    "TETHER_DIALECT": "openclaw", "TETHER_GATEWAY_PROTOCOLS": "3", "TETHER_GATEWAY_FAULTS": #"{"modelFailureFraction": 0.05}"#,
                    "TETHER_GATEWAY_MODEL_RETRY": "0.1", "TETHER_CHUNK_DELAY": "5",
                ] : [:]
        let set = try await ComposedSet(environment: environment.merging(["TETHER_RECONNECT_PRESET": "aggressive"]) { $1 }, namespace: namespace)
        defer { set.stop() }
        // Packets to and from the gateway's port lost and blackholed, where nftables works.
        var filter: PacketFilter?
        var blackholesDue: [ContinuousClock.Instant] = []
        // Blackholes come at set times (two, one more each further minute), not at random.
        let wantsBlackholes = kinds.contains("blackhole")
        kinds.removeAll { $0 == "blackhole" }
        if let namespace, wantsBlackholes || lossPercent > 0 {
            if let reason = PacketFilter.unavailableReason(in: namespace) {
                notes.append("packet loss and blackholes: not injected, \(reason)")
            } else {
                filter = try PacketFilter(namespace: namespace, port: set.port)
                if lossPercent > 0 { try filter?.lose(percent: lossPercent) }
                let count = wantsBlackholes ? max(2, Int(seconds / 60)) : 0
                let start = ContinuousClock.now
                blackholesDue = (0..<count).map { start + .milliseconds(Int(seconds * 1000 * (0.2 + 0.6 * Double($0) / Double(max(1, count - 1))))) }
            }
        }
        print(
            "chaos: \(seconds) s, seed \(seed), gateway \(gateway), faults: \(kinds.joined(separator: ", "))"
                + (filter == nil ? "" : "; \(lossPercent)% packet loss each way on the gateway's port, \(blackholesDue.count) blackholes of 5 s"))
        let client = try BusClient(source: "chaos", runDirectory: set.run.runDirectory, logger: Logger(label: "chaos"))
        let sender = ChaosSender(client: client)

        // OpenClaw runs one message at a time, each after the reply before it: five a second.
        let interval = Duration.milliseconds(gateway == "openclaw" ? 200 : 100)
        let sending = Task {
            var index = 0
            while !Task.isCancelled {
                index += 1
                await sender.send(id: "chaos-\(index)")
                try? await Task.sleep(for: interval)
            }
        }
        var faults: [String: Int] = [:]
        var recoveries: [String: [Duration]] = [:]
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var marker = 0
        // The blackholes still due when the time is up come too: a fault that overran the end
        // must not leave the soak without them.
        while ContinuousClock.now < end || !blackholesDue.isEmpty {
            let kind: String
            if let due = blackholesDue.first, due <= .now || ContinuousClock.now >= end {
                blackholesDue.removeFirst()
                kind = "blackhole"
            } else if kinds.isEmpty {
                try await Task.sleep(for: .milliseconds(500))
                continue
            } else {
                kind = kinds[Int(random.next() % UInt64(kinds.count))]
            }
            faults[kind, default: 0] += 1
            if kind == "blackhole", let filter {
                try filter.blackhole(true)
                try await Task.sleep(for: .seconds(5))
                try filter.blackhole(false)
            } else {
                try await inject(kind, set: set, namespace: namespace, random: &random)
            }
            // Recovered once a message sent after the fault has reached the gateway.
            let over = ContinuousClock.now
            marker += 1
            let id = "recovery-\(marker)"
            await sender.send(id: id)
            let arrived = await eventually(timeout: .seconds(60)) { set.gatewayRecord().contains { $0["id"] as? String == id } }
            #expect(arrived, "nothing reached the gateway within 60 s after \(kind)")
            recoveries[kind, default: []].append(over.duration(to: .now))
            try await Task.sleep(for: .milliseconds(300 + Int(random.next() % 1200)))
        }
        sending.cancel()
        _ = await sending.value
        if let filter {
            let dropped = filter.droppedPackets
            notes.append(
                "packet loss: \(lossPercent)% of the packets to and from the gateway's port dropped at random for the whole run (nftables): \(dropped.loss) packets"
            )
            notes.append("blackholes: \(faults["blackhole"] ?? 0) of 5 s, every packet to and from the gateway's port dropped: \(dropped.blackhole) packets")
            #expect(!wantsBlackholes || faults["blackhole", default: 0] >= 2, "the soak ended before its two blackholes")
        }

        let sent = await sender.accepted
        let everything = await eventually(timeout: .seconds(90)) {
            Set(set.gatewayRecord().compactMap { $0["id"] as? String }).isSuperset(of: sent)
        }
        #expect(everything, "some accepted messages have not reached the gateway after 90 s")
        let received = set.gatewayRecord().compactMap { $0["id"] as? String }.filter { $0.hasPrefix("chaos-") || $0.hasPrefix("recovery-") }
        let transcript = try await client.request(TranscriptCommand.self, .init(limit: 1000)).entries
        let incomplete = transcript.filter { $0.status == .incomplete }.count
        // Order is judged among the steady stream; the recovery markers go out from another task.
        let report = ChaosReport(
            gateway: strict
                ? "strict-seed (no duplicate suppression, no resume: at least once)"
                : gateway == "openclaw"
                    ? "openclaw (idempotency keys, history lookups, cache lost on restart: exactly once)"
                    : "development (duplicate suppression, resume: exactly once)",
            sent: sent, received: received, faults: faults, repliesIncomplete: incomplete, recoveries: recoveries,
            ordered: { $0.hasPrefix("chaos-") })
        print("chaos report (seed \(seed)):\n\(report.text)" + notes.map { "\nnote: \($0)" }.joined())
        #expect(report.lost.isEmpty, "lost: \(report.lost.prefix(20))")
        if !strict {
            #expect(report.duplicated.isEmpty, "duplicated: \(report.duplicated)")
        }
        #expect(report.outOfOrder == 0, "late: \(report.lateExamples.map { "\($0.late) after \($0.after)" })")
        #expect(report.sent > Int(seconds), "too few messages went through the soak to mean anything")
        await client.close()
    }

    private func inject(_ kind: String, set: ComposedSet, namespace: NetworkNamespace?, random: inout SeededRandom) async throws {
        switch kind {
        case "restart gateway":
            guard let pid = set.pid(of: "gateway") else { return }
            kill(pid, SIGKILL)
            _ = await set.awaitRestart(of: "gateway", replacing: pid, timeout: .seconds(30))
        case "link down":
            guard let namespace else { return }
            try namespace.exec(["ip", "link", "set", namespace.interface, "down"])
            try await Task.sleep(for: .milliseconds(300 + Int(random.next() % 1500)))
            try namespace.exec(["ip", "link", "set", namespace.interface, "up"])
            try namespace.exec(["ip", "route", "replace", "default", "via", "10.231.0.1", "dev", namespace.interface])
        case "loss and delay":
            guard let namespace else { return }
            try namespace.exec(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "80ms", "20ms", "loss", "10%"])
            try await Task.sleep(for: .milliseconds(1000 + Int(random.next() % 2000)))
            try namespace.exec(["tc", "qdisc", "del", "dev", "lo", "root"])
        default:
            let program = String(kind.dropFirst("kill ".count))
            guard let pid = set.pid(of: program) else { return }
            kill(pid, SIGKILL)
            _ = await set.awaitRestart(of: program, replacing: pid, timeout: .seconds(30))
        }
    }
}

/// Sends messages with ids of its own, again with the same id until protod accepts it (a
/// killed protod, a full retry budget), as a careful front end would.
actor ChaosSender {
    private let client: BusClient
    /// The ids accepted, in the order they were sent.
    private(set) var accepted: [String] = []

    init(client: BusClient) {
        self.client = client
    }

    func send(id: String) async {
        while !Task.isCancelled {
            let request = SendMessageCommand.Request(id: MessageID(id), content: "chaos \(id)")
            // Not accepted means an earlier attempt whose reply was lost already committed it.
            if (try? await client.request(SendMessageCommand.self, request, requestID: id, timeout: .seconds(1))) != nil {
                accepted.append(id)
                return
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
    }
}
