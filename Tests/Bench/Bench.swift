import Foundation
import Logging
import SnapshotStore
import Synchronization
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// The measurements, each beside its baseline taken in the same run.
struct Bench {
    struct Settings {
        var roundTrips: Int
        var busMessages: Int
        var probeMessages: Int
        var chunks: Int
        var pacedChunks: Int
        var transcriptEntries: [Int]
        var frontEnds: [Int]
        var idleSeconds: Int
        var preset: String
        var replyBytes: [Int]
    }

    let settings: Settings
    private let logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The parts of the bench, each a group of rows that can be measured alone (`--only`).
    enum Part: String, CaseIterable, Sendable {
        case bus, roundTrip = "round-trip", hops, frontEnds = "front-ends", chunks, gatewayRestart = "gateway-restart", linkUp = "link-up"
        case firstFrame = "first-frame", chunkLatency = "chunk-latency", status, idle, replySizes = "reply-sizes", wakeups
    }

    /// Measures every part in `parts`. A part that fails or cannot finish adds a row that says
    /// it was not measured and why, and the parts after it are still measured.
    func run(parts: Set<Part> = Set(Part.allCases), into table: inout BenchTable) async {
        table.notes.append(Self.machine())
        var rawHop: Double?
        if parts.contains(.bus) {
            await measuring("bus: publisher to subscriber through the proxy", into: &table) { rawHop = try await measureBus(into: &$0) }
        }
        let environment = ["TETHER_CHUNK_DELAY": "0", "TETHER_RECONNECT_PRESET": settings.preset]
        let onTheSet: Set<Part> = [.roundTrip, .hops, .frontEnds, .chunks, .wakeups, .gatewayRestart, .status, .idle, .replySizes]
        var baselines: Baselines?
        if !parts.isDisjoint(with: onTheSet) {
            await measuring(
                "the rows measured on the whole set (\(parts.intersection(onTheSet).map(\.rawValue).sorted().joined(separator: ", ")))", into: &table
            ) {
                baselines = try await measureOnTheSet(parts: parts, rawHop: rawHop, environment: environment, into: &$0)
            }
        }
        if parts.contains(.linkUp) {
            await measuring("reconnect after the link comes back", into: &table) {
                try await measureLinkUp(handshake: baselines?.handshakes, environment: environment, into: &$0)
            }
        }
        if parts.contains(.firstFrame) {
            await measuring("first frame and search, by stored entries", into: &table) { try await measureFirstFrames(environment: environment, into: &$0) }
        }
        if parts.contains(.chunkLatency) {
            await measuring("streamed chunks at the development bot's pace", into: &table) {
                try await measureChunkLatency(environment: environment, into: &$0)
            }
        }
    }

    /// The rows of one set from compose/default.yaml, in the order they disturb it least.
    private func measureOnTheSet(
        parts: Set<Part>, rawHop: Double?, environment: [String: String], into table: inout BenchTable
    ) async throws -> Baselines? {
        let set = try await ComposedSet(environment: environment)
        defer { set.stop() }
        let client = try BusClient(source: "bench", runDirectory: set.run.runDirectory, logger: logger)
        defer { Task { await client.close() } }
        try await awaitConnected(client, after: 0)

        // The direct client's figures are the baselines of several rows: without them those
        // rows say so.
        var baselines: Baselines?
        if !parts.isDisjoint(with: [.roundTrip, .hops, .frontEnds, .chunks, .gatewayRestart]) {
            await measuring("chat round trip: send to delivered mark", into: &table) {
                baselines = try await measureRoundTrips(set: set, client: client, rawHop: rawHop, into: &$0)
            }
        }
        func withBaselines(_ part: Part, _ title: String, _ body: (Baselines, inout BenchTable) async throws -> Void) async {
            guard parts.contains(part) else { return }
            await measuring(title, into: &table) { table in
                guard let baselines else { throw BenchError("its baseline, the direct client of the round-trip row, was not measured") }
                try await body(baselines, &table)
            }
        }
        await withBaselines(.hops, "chat round trip, where the time goes") { try await measureRoundTripHops(client: client, direct: $0.direct, into: &$1) }
        await withBaselines(.frontEnds, "chat round trip with front ends attached") {
            try await measureFrontEnds(set: set, client: client, direct: $0.direct, into: &$1)
        }
        await withBaselines(.chunks, "streamed chunks, gateway to front end") { try await measureChunks(client: client, directRate: $0.streamRate, into: &$1) }
        if parts.contains(.wakeups) {
            await measuring("thread wakeups a message", into: &table) { try await measureWakeups(set: set, client: client, into: &$0) }
        }
        await withBaselines(.gatewayRestart, "reconnect after a gateway restart") {
            try await measureGatewayRestart(set: set, client: client, handshake: $0.handshakes, into: &$1)
        }
        if parts.contains(.status) { await measuring("`tether status`", into: &table) { try measureStatus(set: set, into: &$0) } }
        if parts.contains(.idle) { await measuring("idle: each program", into: &table) { try await measureIdle(set: set, into: &$0) } }
        if parts.contains(.replySizes) { await measureReplySizes(client: client, into: &table) }
        return baselines
    }

    /// The direct client's figures, measured with the round trip.
    struct Baselines {
        var handshakes: Samples
        var direct: Samples
        var streamRate: Double
    }

    /// Measures one part: one that throws adds a row that says it was not measured and why.
    func measuring(_ measurement: String, into table: inout BenchTable, _ body: (inout BenchTable) async throws -> Void) async {
        do {
            try await body(&table)
        } catch {
            table.add(BenchRow(measurement: measurement, tether: "not measured: \(error)", baseline: "—", target: "", met: nil, measured: false))
        }
    }

    private static func machine() -> String {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        #if DEBUG
        let build = "debug build (figures not representative: use scripts/bench)"
        #else
        let build = "release build"
        #endif
        return "\(ProcessInfo.processInfo.activeProcessorCount) CPUs, Linux \(release), \(build), "
            + "measured \(ISO8601DateFormatter().string(from: Date()))"
    }

    // MARK: The bus

    /// Measures the bus rows; returns raw libzmq's p50 through the proxy, one hop of the
    /// round trip's floor.
    private func measureBus(into table: inout BenchTable) async throws -> Double {
        let run = try TestRunDirectory()
        let proxy = try ChildProcess(Programs.path("tether-bus"), ["--run-dir", run.path], outputDirectory: run.path)
        defer { proxy.stop() }
        guard await eventually(timeout: .seconds(10), { FileManager.default.fileExists(atPath: run.path + "/bus.out") }) else {
            throw BenchError("the proxy did not start: \(proxy.standardError)")
        }
        let busIn = try run.runDirectory.endpoint(Endpoints.busIn)
        let busOut = try run.runDirectory.endpoint(Endpoints.busOut)
        let count = settings.roundTrips * 4

        let latency = try await BusLatency.measure(runDirectory: run.runDirectory, count: count, warmup: 100)
        let rawLatency = try await RawBus.latency(busIn: busIn, busOut: busOut, count: count, warmup: 100)
        table.add(
            BenchRow(
                measurement: "bus: publisher to subscriber through the proxy, p50 / p99 (\(count) messages)",
                tether: "\(formatMilliseconds(latency.median)) / \(formatMilliseconds(latency.p99))",
                baseline: "\(formatMilliseconds(rawLatency.median)) / \(formatMilliseconds(rawLatency.p99)) raw libzmq",
                target: "p50 ≤ 1.5× raw", met: latency.median <= 1.5 * rawLatency.median))

        // Throughput: everything published at once, counted where it arrives.
        let (publisher, subscriber) = try BusLatency.clients(run.runDirectory)
        let subscription = try await subscriber.subscribe(to: ["bench.throughput"], confirm: true)
        try await BusLatency.awaitPresence(of: "bench.throughput", at: publisher)
        let total = settings.busMessages
        let progress = Mutex((received: 0, gaps: 0, expected: 0, last: ContinuousClock.now))
        let counting = Task {
            for await message in subscription {
                guard let tick = try? message.decode(BusLatency.Tick.self) else { continue }
                let done = progress.withLock { state in
                    state.received += 1
                    if tick.index != state.expected { state.gaps += 1 }
                    state.expected = tick.index + 1
                    state.last = .now
                    return tick.index == total - 1
                }
                if done { return }
            }
        }
        let start = ContinuousClock.now
        for index in 0..<total { try publisher.publish(BusLatency.Tick(index: index), on: "bench.throughput") }
        // Until the last one arrives, or nothing has come for 3 s.
        while !Task.isCancelled {
            try await Task.sleep(for: .milliseconds(100))
            let (received, last) = progress.withLock { ($0.received, $0.last) }
            if received == total || last.duration(to: .now) > .seconds(3) { break }
        }
        counting.cancel()
        await publisher.close()
        await subscriber.close()
        let result = progress.withLock { $0 }
        let elapsed = start.duration(to: result.last)
        let rate = Double(result.received) / elapsed.seconds
        let raw = try await RawBus.throughput(busIn: busIn, busOut: busOut, count: total)
        let rawRate = Double(raw.received) / raw.elapsed.seconds
        let lost = total - result.received
        table.add(
            BenchRow(
                measurement: "bus: messages per second, \(total) published at once (lost, gaps)",
                tether: "\(formatRate(rate, unit: "msg")) (\(lost) lost, \(result.gaps) gaps)",
                baseline: "\(formatRate(rawRate, unit: "msg")) raw libzmq (\(total - raw.received) lost, \(raw.gaps) gaps)",
                target: "≥ 0.5× raw, none lost", met: rate >= 0.5 * rawRate && lost == 0 && result.gaps == 0))
        try measureInstructions(run: run, into: &table)
        return rawLatency.median
    }

    /// Instructions a message costs its publisher and subscriber (libzmq's threads included,
    /// the proxy left out: it is the same for both), counted by callgrind.
    private func measureInstructions(run: TestRunDirectory, into table: inout BenchTable) throws {
        let messages = settings.probeMessages
        let measurement =
            "bus: instructions per message, publisher and subscriber together, one at a time, a body written and read directly (callgrind: runs of \(messages) and \(2 * messages), the difference over \(messages))"
        guard let valgrind = Self.executable(named: "valgrind") else {
            table.add(
                BenchRow(
                    measurement: measurement, tether: "not measured: valgrind is not installed (scripts/bootstrap --tests installs it)", baseline: "—",
                    target: "≤ 3× raw", met: nil, measured: false))
            return
        }
        let probe = try Self.withoutDebugInformation(FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"), in: run)
        let tether = try instructionsPerMessage(valgrind: valgrind, probe: probe, run: run, options: [])
        let foundation = try instructionsPerMessage(valgrind: valgrind, probe: probe, run: run, options: ["--foundation-coders"])
        let raw = try instructionsPerMessage(valgrind: valgrind, probe: probe, run: run, options: ["--raw"])
        table.add(
            BenchRow(
                measurement: measurement,
                tether: "\(formatCount(tether)) instructions (\(String(format: "%.1f", tether / raw))× raw); "
                    + "\(formatCount(foundation)) with the body through Foundation's coders (\(String(format: "%.1f", foundation / raw))×)",
                baseline: "\(formatCount(raw)) raw libzmq", target: "≤ 3× raw", met: tether <= 3 * raw))
    }

    /// The bus probe (`tether-bench bus-probe`) under callgrind with n and 2n messages: the
    /// difference over n, so what starting and stopping cost cancels out.
    private func instructionsPerMessage(valgrind: String, probe bench: String, run: TestRunDirectory, options: [String]) throws -> Double {
        let messages = settings.probeMessages
        let counts = try [messages, 2 * messages].map { count in
            let probe = try ChildProcess(
                valgrind,
                ["--tool=callgrind", "--callgrind-out-file=/dev/null", bench, "bus-probe", "--run-dir", run.path, "--messages", "\(count)"] + options,
                outputDirectory: run.path, name: "bus-probe")
            let status = try probe.waitForExit(timeout: .seconds(600))
            let collected = probe.standardError.split(separator: "\n").lazy.compactMap { line in
                line.range(of: "Collected : ").flatMap { Int(line[$0.upperBound...].trimmingCharacters(in: .whitespaces)) }
            }.first
            guard status == 0, let collected else {
                throw BenchError("the bus probe under callgrind failed (exit \(status)): \(probe.standardError.suffix(1500))")
            }
            return collected
        }
        return Double(counts[1] - counts[0]) / Double(messages)
    }

    /// A copy of `program` without its debug information, which valgrind 3.19 cannot read
    /// (it gives up on the DWARF 5 that Swift's compiler writes).
    private static func withoutDebugInformation(_ program: String, in run: TestRunDirectory) throws -> String {
        guard let objcopy = executable(named: "llvm-objcopy") ?? executable(named: "objcopy") else {
            throw BenchError("neither llvm-objcopy (of the Swift toolchain) nor objcopy is on PATH")
        }
        let copy = run.path + "/tether-bench-probe"
        // The library every program links goes beside it, found there through its run path ($ORIGIN).
        let library = (program as NSString).deletingLastPathComponent + "/libTetherKit.so"
        var copies = [(program, copy)]
        if FileManager.default.fileExists(atPath: library) { copies.append((library, run.path + "/libTetherKit.so")) }
        for (original, stripped) in copies {
            let stripping = try ChildProcess(objcopy, ["--strip-debug", original, stripped], outputDirectory: run.path, name: "objcopy")
            guard try stripping.waitForExit(timeout: .seconds(120)) == 0 else { throw BenchError("\(objcopy) failed: \(stripping.standardError)") }
        }
        return copy
    }

    /// The path of the executable `name` on PATH, if there is one.
    private static func executable(named name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    // MARK: The gateway

    /// Round trips through the whole set and through a direct client; returns the direct
    /// client's WebSocket handshake times, the baseline of the reconnect rows, its round trips
    /// and the rate at which it reads a streamed reply (the chunks row's baseline).
    ///
    /// The target is twice this architecture's floor, measured in the same run: three hops
    /// through the proxy at raw libzmq's pace (`rawHop`, the send command, `wire.out`,
    /// `wire.in`: the outbox's commit lies between the first two), one flush to the disk (the
    /// commit's) and the direct client's own round trip.
    private func measureRoundTrips(
        set: ComposedSet, client: BusClient, rawHop measured: Double?, into table: inout BenchTable
    ) async throws -> Baselines {
        // Without the bus rows, raw libzmq's hop is measured through this set's proxy.
        let rawHop: Double
        if let measured {
            rawHop = measured
        } else {
            rawHop = try await RawBus.latency(
                busIn: try set.run.runDirectory.endpoint(Endpoints.busIn), busOut: try set.run.runDirectory.endpoint(Endpoints.busOut), count: 2_000,
                warmup: 100
            ).median
        }
        // The gateway has one conversation: the set steps aside while the direct client talks.
        _ = try await client.request(ConnectionCommand.self, .init(action: .suspend))
        try await awaitPhase(client, .suspended)
        let direct = DirectClient(url: "ws://127.0.0.1:\(set.port)/ws", token: try set.gatewayToken)
        let directTrips = try await direct.roundTrips(count: settings.roundTrips, warmup: 50)
        let handshakes = try await direct.handshakes(count: 50)
        let streamRate = try await direct.streamRate(words: max(1, settings.chunks - 2))
        _ = try await client.request(ConnectionCommand.self, .init(action: .resume))
        try await awaitConnected(client, after: 0)

        let samples = try await roundTrips(client: client, count: settings.roundTrips, warmup: 50)
        let flush = try Self.flushMilliseconds(in: set.run.path)
        let floor = 3 * rawHop + flush + directTrips.median
        table.add(
            BenchRow(
                measurement: "chat round trip: send to delivered mark, p50 / p99 (\(settings.roundTrips) messages)",
                tether: "\(formatMilliseconds(samples.median)) / \(formatMilliseconds(samples.p99)) whole set",
                baseline: "\(formatMilliseconds(directTrips.median)) / \(formatMilliseconds(directTrips.p99)) direct WebSocket client; "
                    + "floor \(formatMilliseconds(floor)) (3 × \(formatMilliseconds(rawHop)) raw libzmq, a flush \(formatMilliseconds(flush)), the direct trip)",
                target: "p50 ≤ 2× the floor", met: samples.median <= 2 * floor))
        return Baselines(handshakes: handshakes, direct: directTrips, streamRate: streamRate)
    }

    /// A 4 KB write and its `fdatasync` in `directory`, p50 of 50: the flush of an outbox commit.
    private static func flushMilliseconds(in directory: String) throws -> Double {
        let path = directory + "/bench-flush"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw BenchError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer {
            close(descriptor)
            unlink(path)
        }
        let page = [UInt8](repeating: 0x2a, count: 4096)
        var samples = Samples()
        for _ in 0..<50 {
            let start = ContinuousClock.now
            guard page.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) == page.count, fdatasync(descriptor) == 0 else {
                throw BenchError("cannot write and flush \(path): \(String(cString: strerror(errno)))")
            }
            samples.add(start.duration(to: .now))
        }
        return samples.median
    }

    /// `count` messages sent one at a time, each timed from the send command to its delivered
    /// mark, leaving out the first `warmup`.
    func roundTrips(client: BusClient, count: Int, warmup: Int) async throws -> Samples {
        let deliveries = try await client.subscribe(to: [Topic.conversationDelivery.name], confirm: true)
        var updates = deliveries.makeAsyncIterator()
        var samples = Samples()
        for index in 0..<(count + warmup) {
            let id = MessageID("bench-\(UUID().uuidString.lowercased())")
            let start = ContinuousClock.now
            _ = try await client.request(SendMessageCommand.self, .init(id: id, content: "round trip \(index)"))
            try await awaitDelivered([id], from: &updates)
            if index >= warmup { samples.add(start.duration(to: .now)) }
        }
        return samples
    }

    /// Where a round trip's time goes, from the bus: each message is followed on `wire.out`
    /// (protod wrote its frame), `wire.in` (connd read the gateway's acknowledgement) and
    /// `conv.delivery` (protod marked it delivered), by the publishers' own timestamps. A pass
    /// of its own, as following the wire costs the bench too.
    private func measureRoundTripHops(client: BusClient, direct: Samples, into table: inout BenchTable) async throws {
        let count = max(20, settings.roundTrips / 2)
        let observed = try await client.subscribe(to: [Topic.wireOutbound.name, Topic.wireInbound.name, Topic.conversationDelivery.name], confirm: true)
        var messages = observed.makeAsyncIterator()
        var hops = Array(repeating: 0.0, count: 4)
        var totals = Samples()
        for index in 0..<(count + 20) {
            let id = MessageID("bench-\(UUID().uuidString.lowercased())")
            let needle = Data(id.value.utf8)
            let sent = Date()
            let start = ContinuousClock.now
            _ = try await client.request(SendMessageCommand.self, .init(id: id, content: "hop \(index)"))
            var framed: Date?
            var acknowledged: Date?
            var delivered: Date?
            while delivered == nil {
                guard let message = await messages.next() else { throw BenchError("the wire subscription ended") }
                switch message.topic {
                case .wireOutbound where framed == nil && message.body.range(of: needle) != nil:
                    framed = message.header.timestamp
                case .wireInbound where acknowledged == nil && message.body.range(of: needle) != nil && message.body.range(of: Data("message.ack".utf8)) != nil:
                    acknowledged = message.header.timestamp
                case .conversationDelivery:
                    if let update = try? message.decode(DeliveryUpdate.self), update.id == id, update.status == .delivered {
                        delivered = message.header.timestamp
                    }
                default:
                    break
                }
            }
            let elapsed = start.duration(to: .now)
            guard index >= 20 else { continue }
            guard let framed, let acknowledged, let delivered else {
                throw BenchError("message \(id) was delivered without its frame or acknowledgement on the bus")
            }
            let marks = [sent, framed, acknowledged, delivered]
            for hop in 0..<3 { hops[hop] += marks[hop + 1].timeIntervalSince(marks[hop]) * 1000 }
            hops[3] += elapsed.seconds * 1000 - delivered.timeIntervalSince(sent) * 1000
            totals.add(elapsed)
        }
        let means = hops.map { $0 / Double(count) }
        table.add(
            BenchRow(
                measurement:
                    "chat round trip, where the time goes: mean of each hop, from the bus timestamps (to the millisecond; \(count) messages while the wire is followed)",
                tether: String(
                    format: "send to frame on wire.out (protod) %.2f ms; to acknowledgement on wire.in (connd, gateway) %.2f ms; "
                        + "to delivered on conv.delivery (protod) %.2f ms; to the front end %.2f ms; total %.2f ms",
                    means[0], means[1], means[2], means[3], means.reduce(0, +)),
                baseline: "\(formatMilliseconds(direct.median)) direct WebSocket client, whole round trip (p50)", target: "", met: nil))
    }

    /// The round trip with front ends attached (`tether watch`, each following the
    /// conversation and the streamed replies).
    private func measureFrontEnds(set: ComposedSet, client: BusClient, direct: Samples, into table: inout BenchTable) async throws {
        let count = max(20, settings.roundTrips / 5)
        var figures: [String] = []
        var met = true
        for frontEnds in settings.frontEnds {
            let watchers = try (0..<frontEnds).map { index in
                try ChildProcess(
                    Programs.path("tether"), ["watch", "--run-dir", set.run.path, "--history", "0"], outputDirectory: set.run.path, name: "watch-\(index)")
            }
            defer { watchers.forEach { $0.stop() } }
            let attached = try await client.subscribe(to: [Topic.frontEndsAttached.name])
            try await withDeadline(.seconds(60), "waiting for \(frontEnds) front ends to attach") {
                for await message in attached {
                    if let list = try? message.decode(AttachedFrontEnds.self),
                        list.frontEnds.filter({ $0.frontEnd == "tether watch" && $0.state == .active }).count >= frontEnds
                    {
                        return
                    }
                }
            }
            let samples = try await roundTrips(client: client, count: count, warmup: 10)
            met = met && samples.median <= 2 * direct.median
            figures.append("\(frontEnds): \(formatMilliseconds(samples.median)) / \(formatMilliseconds(samples.p99))")
        }
        table.add(
            BenchRow(
                measurement: "chat round trip with front ends attached (`tether watch`), p50 / p99 (\(count) messages each)",
                tether: figures.joined(separator: "; "),
                baseline: "\(formatMilliseconds(direct.median)) direct WebSocket client (p50)", target: "p50 ≤ 2× direct at each", met: met))
    }

    private func measureChunks(client: BusClient, directRate: Double, into table: inout BenchTable) async throws {
        // The development bot streams its reply a word a chunk: "You ", "said: ", then the words.
        let reply = try await streamReply(client: client, words: max(1, settings.chunks - 2), id: "bench-stream")
        table.add(
            BenchRow(
                measurement: "streamed chunks, gateway to front end (one reply of \(reply.chunks) chunks, \(reply.messages) conv.stream messages)",
                tether: "\(formatRate(reply.rate, unit: "chunk")) (reply \(reply.whole ? "whole" : "NOT whole"), \(reply.breaks) breaks)",
                baseline: "\(formatRate(directRate, unit: "chunk")) direct WebSocket client (the gateway's own pace)",
                target: "≥ 0.9× the gateway's pace, none lost", met: reply.rate >= 0.9 * directRate && reply.whole && reply.breaks == 0))

    }

    /// The time from a chunk's frame on `wire.in` (connd has read it off the WebSocket) to a
    /// front end holding it (`conv.stream` covers its index), at the development bot's own
    /// pace: a set of its own whose bot waits 20 ms between chunks, as by default.
    private func measureChunkLatency(environment: [String: String], into table: inout BenchTable) async throws {
        let set = try await ComposedSet(environment: environment.merging(["TETHER_CHUNK_DELAY": "20"]) { $1 })
        defer { set.stop() }
        let client = try BusClient(source: "bench-chunk-latency", runDirectory: set.run.runDirectory, logger: logger)
        defer { Task { await client.close() } }
        try await awaitConnected(client, after: 0)
        let observed = try await client.subscribe(to: [Topic.wireInbound.name, Topic.conversationStream.name], confirm: true)
        let words = max(1, settings.pacedChunks - 2)
        let message = MessageID("bench-paced")
        _ = try await client.request(SendMessageCommand.self, .init(id: message, content: Array(repeating: "w", count: words).joined(separator: " ")))
        let samples = try await withDeadline(.seconds(120), "waiting for the paced reply") {
            let codec = WireCodec()
            var messages = observed.makeAsyncIterator()
            // When each chunk's frame was on the bus, by index; the reply is the one that answers `message`.
            var arrived: [Int: ContinuousClock.Instant] = [:]
            var reply: MessageID?
            var held = -1
            var samples = Samples()
            while let bus = await messages.next() {
                let now = ContinuousClock.now
                if bus.topic == .wireInbound {
                    guard let frame = try? bus.decode(WireFrame.self), case .streamingChunk(let envelope)? = try? codec.decode(frame.text) else { continue }
                    if reply == nil, envelope.payload.replyTo == message || envelope.payload.replyTo == nil { reply = envelope.payload.messageID }
                    if envelope.payload.messageID == reply { arrived[envelope.payload.chunkIndex] = now }
                } else if let progress = try? bus.decode(StreamProgress.self), progress.id == reply {
                    for index in max(0, held + 1)...max(0, progress.chunkIndex) {
                        if let sent = arrived.removeValue(forKey: index) { samples.add(sent.duration(to: now)) }
                    }
                    held = max(held, progress.chunkIndex)
                    if progress.isFinal { return samples }
                }
            }
            throw BenchError("the bus subscription ended")
        }
        table.add(
            BenchRow(
                measurement:
                    "streamed chunks at the development bot's pace (20 ms apart): a chunk's frame on wire.in to a front end holding it, p50 / p99 (\(samples.count) chunks; protod publishes a reply's growth at most every 50 ms)",
                tether: "\(formatMilliseconds(samples.median)) / \(formatMilliseconds(samples.p99))", baseline: "—", target: "", met: nil))
    }

    /// How the bytes on the bus grow with a reply's length. Measured last: a 1 MB reply leaves
    /// protod and snapd larger, which the idle row is not about.
    private func measureReplySizes(client: BusClient, into table: inout BenchTable) async {
        var figures: [String] = []
        var linear = true
        var unmeasured = false
        for bytes in settings.replyBytes {
            let name = formatBytes(bytes)
            do {
                let sized = try await streamReply(client: client, words: bytes / 2, id: "bench-reply-\(bytes)")
                let ratio = Double(sized.bytes) / Double(sized.length)
                linear = linear && ratio <= 4 && sized.whole && sized.breaks == 0
                figures.append(
                    "\(name): \(formatBytes(sized.bytes)) in \(sized.messages) messages (\(String(format: "%.1f", ratio))× the reply), \(formatMilliseconds(sized.elapsed.seconds * 1000))"
                        + (sized.whole ? "" : ", NOT whole"))
            } catch {
                unmeasured = true
                figures.append("\(name): not measured: \(error)")
            }
        }
        table.add(
            BenchRow(
                measurement: "a streamed reply's conv.stream bytes on the bus and its time, first chunk to whole, by its length",
                tether: figures.joined(separator: "; "), baseline: "—", target: "bytes ≤ 4× the reply at every length (linear)",
                met: unmeasured ? nil : linear, measured: !unmeasured))
    }

    /// A reply protod cut as incomplete, in its words.
    private struct ReplyCut: Error {
        var description: String
    }

    struct StreamedReply {
        /// Chunks the gateway sent, and the reply's UTF-8 length.
        var chunks: Int
        var length: Int
        var messages: Int
        /// The conv.stream bodies' bytes.
        var bytes: Int
        /// Progresses that did not fit the reply as followed.
        var breaks: Int
        var whole: Bool
        var elapsed: Duration

        var rate: Double { Double(chunks) / elapsed.seconds }
    }

    /// Sends `words` words to the development bot and follows its streamed answer, as a front
    /// end does (``StreamProgress/following(_:)``), until it is final. Streams are told apart
    /// by id: the reply to an earlier message may still be streaming.
    func streamReply(client: BusClient, words: Int, id: String) async throws -> StreamedReply {
        // The entry too: a reply cut as incomplete ends there, not on conv.stream.
        let subscription = try await client.subscribe(to: [Topic.conversationStream.name, Topic.conversationMessage.name], confirm: true)
        let content = Array(repeating: "w", count: words).joined(separator: " ")
        let expected = "You said: " + content
        let message = MessageID(id)
        _ = try await client.request(SendMessageCommand.self, .init(id: message, content: content), timeout: .seconds(30))
        struct Followed {
            var first: ContinuousClock.Instant = .now
            var messages = 0
            var bytes = 0
            var breaks = 0
            var latest: StreamProgress?
        }
        // A reply whose chunks outran protod (it drops what it cannot take) may end without the
        // whole text: its final progress then says so rather than the bench waiting on. One
        // that stops says how far it came: a minute, and a second more for each 5,000 bytes.
        let seen = Mutex((updates: 0, chunk: -1, bytes: 0))
        let limit = Duration.seconds(60 + expected.utf8.count / 5_000)
        do {
            return try await withDeadline(limit, "waiting for the streamed reply to \(id)") {
                var progress = subscription.makeAsyncIterator()
                var streams: [MessageID: Followed] = [:]
                while let bus = await progress.next() {
                    if bus.topic == .conversationMessage {
                        guard let entry = try? bus.decode(TranscriptEntry.self), entry.inReplyTo == message, entry.status == .incomplete else { continue }
                        let stream = streams[entry.id] ?? Followed()
                        throw ReplyCut(
                            description:
                                "the reply was cut as incomplete after \(formatBytes(entry.content.utf8.count)) of \(formatBytes(expected.utf8.count)) "
                                + "(\(stream.messages) conv.stream messages): \(entry.detail ?? "no reason given")")
                    }
                    guard let update = try? bus.decode(StreamProgress.self) else { continue }
                    var stream = streams[update.id] ?? Followed()
                    stream.messages += 1
                    stream.bytes += bus.body.count
                    if let followed = update.following(stream.latest) { stream.latest = followed } else { stream.breaks += 1 }
                    streams[update.id] = stream
                    let text = stream.latest?.content ?? ""
                    let answersThis = update.inReplyTo == message || (text.hasPrefix("You said: w") && text.utf8.count >= expected.utf8.count)
                    if update.inReplyTo == message { seen.withLock { $0 = (stream.messages, update.chunkIndex, text.utf8.count) } }
                    guard update.isFinal, answersThis else { continue }
                    return StreamedReply(
                        chunks: update.chunkIndex + 1, length: expected.utf8.count, messages: stream.messages, bytes: stream.bytes, breaks: stream.breaks,
                        whole: text == expected && update.chunkIndex == words + 1, elapsed: stream.first.duration(to: .now))
                }
                throw BenchError("the streamed reply did not finish")
            }
        } catch let cut as ReplyCut {
            throw BenchError(cut.description)
        } catch {
            let (updates, chunk, bytes) = seen.withLock { $0 }
            let reached =
                updates == 0
                ? "no conv.stream answered it"
                : "it had reached chunk \(chunk + 1) of \(words + 2), \(formatBytes(bytes)) of \(formatBytes(expected.utf8.count)), in \(updates) conv.stream messages"
            throw BenchError("no whole reply in \(limit): \(reached)")
        }
    }

    private func measureGatewayRestart(set: ComposedSet, client: BusClient, handshake: Samples, into table: inout BenchTable) async throws {
        let samples = try await reconnectSamples(client) {
            guard let pid = set.pid(of: "gateway") else { throw BenchError("the gateway is not running") }
            try await Task.sleep(for: .milliseconds(100))
            kill(pid, SIGKILL)
            // The event: the restarted gateway accepts connections again.
            return try await Self.whenListening(port: set.port, after: pid)
        }
        table.add(
            reconnectRow(
                "reconnect after a gateway restart: port open to connected, median / max (5, preset \(settings.preset))", samples: samples,
                handshake: handshake))
    }

    private func measureLinkUp(handshake: Samples?, environment: [String: String], into table: inout BenchTable) async throws {
        if let reason = NetworkNamespace.unavailableReason {
            table.add(
                BenchRow(
                    measurement: "reconnect after the link comes back", tether: "not measured: \(reason)", baseline: "—", target: "≤ 100 ms", met: nil,
                    measured: false))
            return
        }
        let namespace = try NetworkNamespace()
        let set = try await ComposedSet(environment: environment, namespace: namespace)
        defer { set.stop() }
        let client = try BusClient(source: "bench-link", runDirectory: set.run.runDirectory, logger: logger)
        defer { Task { await client.close() } }
        try await awaitConnected(client, after: 0)
        let samples = try await reconnectSamples(client) {
            try namespace.exec(["ip", "link", "set", namespace.interface, "down"])
            try await awaitPhase(client, .waitingForNetwork)
            try await Task.sleep(for: .milliseconds(500))
            try namespace.exec(["ip", "link", "set", namespace.interface, "up"])
            try namespace.exec(["ip", "route", "replace", "default", "via", "10.231.0.1", "dev", namespace.interface])
            return ContinuousClock.now
        }
        table.add(
            reconnectRow(
                "reconnect after the link comes back (namespace): default route back to connected, median / max (5)", samples: samples,
                handshake: handshake))
    }

    /// Five reconnects: each time `fault` breaks the connection and returns the moment the
    /// way back opens (the event); a sample is from then to connd's next `connected`.
    private func reconnectSamples(_ client: BusClient, fault: () async throws -> ContinuousClock.Instant) async throws -> Samples {
        var samples = Samples()
        for _ in 0..<5 {
            let epoch = try await currentEpoch(client)
            async let reconnected = awaitConnected(client, after: epoch)
            let event = try await fault()
            let connected = try await reconnected
            samples.add(event.duration(to: connected))
            try await Task.sleep(for: .seconds(1))
        }
        return samples
    }

    private func reconnectRow(_ measurement: String, samples: Samples, handshake: Samples?) -> BenchRow {
        BenchRow(
            measurement: measurement, tether: "\(formatMilliseconds(samples.median)) / \(formatMilliseconds(samples.maximum))",
            baseline: handshake.map { "\(formatMilliseconds($0.median)) bare WebSocket handshake" } ?? "— (the round-trip row's handshakes not measured)",
            target: "≤ 100 ms", met: samples.maximum <= 100)
    }

    // MARK: The front end

    /// `tether --plain` started to its newest stored line shown, with transcripts of each
    /// size in `transcriptEntries`: each a set of its own, whose snapd's file was filled
    /// beforehand through snapd's own store (filling it through the gateway would take hours
    /// at a million entries).
    private func measureFirstFrames(environment: [String: String], into table: inout BenchTable) async throws {
        var figures: [String] = []
        var met = true
        var page = 0
        var searches: [(figure: String, met: Bool)] = []
        for entries in settings.transcriptEntries {
            let run = try TestRunDirectory()
            let newest = try await Self.fillTranscript(at: run.path + "/snapd.sqlite", entries: entries)
            let set = try await ComposedSet(environment: environment.merging(["TETHER_TRANSCRIPT_LIMIT": "\(entries)"]) { $1 }, in: run)
            defer { set.stop() }
            let client = try BusClient(source: "bench-first-frame", runDirectory: set.run.runDirectory, logger: logger)
            page = try await client.request(TranscriptCommand.self, .init(limit: TranscriptCommand.pageLimit)).entries.count
            searches.append(try await measureSearch(set: set, client: client, entries: entries))
            await client.close()
            var samples = Samples()
            for _ in 0..<5 {
                let start = ContinuousClock.now
                let frontEnd = try ChildProcess(Programs.path("tether"), ["--plain", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "plain")
                // Read every millisecond: the figure is within 1 ms of the line's arrival.
                let shown = await eventually(timeout: .seconds(30), every: .milliseconds(1)) {
                    (try? String(contentsOfFile: frontEnd.stdoutPath, encoding: .utf8))?.contains(newest) == true
                }
                let elapsed = start.duration(to: .now)
                frontEnd.stop()
                guard shown else { throw BenchError("tether --plain did not show the transcript of \(entries) entries: \(frontEnd.standardError)") }
                samples.add(elapsed)
            }
            met = met && samples.median <= 100
            figures.append("\(formatCount(Double(entries))): \(formatMilliseconds(samples.median)) / \(formatMilliseconds(samples.maximum))")
        }
        table.add(
            BenchRow(
                measurement: "first frame: `tether --plain` started to its newest stored line shown, median / max (5), by stored entries (\(page) a page)",
                tether: figures.joined(separator: "; "), baseline: "—", target: "≤ 100 ms at every size", met: met))
        table.add(
            BenchRow(
                measurement:
                    "search: the first page of 20 hits through the bus, words in every entry (\"stored entry\") / a long start of one in every entry (\"transcripti\") / a word in one entry, median / max (5); `tether search` started to exited, median; by stored entries",
                tether: searches.map(\.figure).joined(separator: "; "), baseline: "—", target: "≤ 100 ms at every size", met: searches.allSatisfy(\.met)))
    }

    /// snapd's search over a store of `entries` filled by ``fillTranscript(at:entries:)``:
    /// words every entry holds (the page is the newest 20 of all), short ones and a start
    /// longer than the index keeps as a term of its own, and one a single entry holds.
    private func measureSearch(set: ComposedSet, client: BusClient, entries: Int) async throws -> (figure: String, met: Bool) {
        var every = Samples()
        var long = Samples()
        var one = Samples()
        var command = Samples()
        let rare = "\(entries / 2)"
        for _ in 0..<5 {
            var start = ContinuousClock.now
            let all = try await client.request(SearchCommand.self, .init(words: "stored entry", limit: 20))
            every.add(start.duration(to: .now))
            start = ContinuousClock.now
            let longStart = try await client.request(SearchCommand.self, .init(words: "transcripti", limit: 20))
            long.add(start.duration(to: .now))
            start = ContinuousClock.now
            let single = try await client.request(SearchCommand.self, .init(words: rare, limit: 20))
            one.add(start.duration(to: .now))
            let newest = "stored entry \(entries - 1) of the transcription"
            guard all.hits.count == 20, all.hits.first?.entry.content == newest, longStart.hits.first?.entry.content == newest,
                longStart.hits.count == 20, single.hits.map(\.entry.content) == ["stored entry \(rare) of the transcription"]
            else {
                throw BenchError(
                    "search over \(entries) entries found \(all.hits.count), \(longStart.hits.count) and \(single.hits.map(\.entry.content))")
            }
            start = ContinuousClock.now
            let printed = try set.tether(["search", rare])
            command.add(start.duration(to: .now))
            guard printed.status == 0, printed.standardOutput.contains("stored entry \(rare)") else {
                throw BenchError("tether search \(rare): status \(printed.status.map(String.init) ?? "none") \(printed.standardOutput)\(printed.standardError)")
            }
        }
        let figure =
            "\(formatCount(Double(entries))): \(formatMilliseconds(every.median)) / \(formatMilliseconds(every.maximum)), "
            + "\(formatMilliseconds(long.median)) / \(formatMilliseconds(long.maximum)), "
            + "\(formatMilliseconds(one.median)) / \(formatMilliseconds(one.maximum)); \(formatMilliseconds(command.median))"
        return (figure, every.maximum <= 100 && long.maximum <= 100 && one.maximum <= 100)
    }

    /// Fills a new transcript store with `entries` entries (messages and their replies,
    /// delivered), in transactions of 50,000; returns the newest entry's text.
    static func fillTranscript(at path: String, entries: Int) async throws -> String {
        let store = try TranscriptStore(path: path, maximumEntries: entries)
        let start = Date(timeIntervalSinceNow: -Double(entries))
        func entry(_ index: Int) -> TranscriptEntry {
            let isReply = index % 2 == 1
            return TranscriptEntry(
                id: MessageID("stored-\(index)"), sender: isReply ? .bot(name: "Opta") : .user, content: "stored entry \(index) of the transcription",
                timestamp: start.addingTimeInterval(Double(index)), status: isReply ? .received : .delivered,
                inReplyTo: isReply ? MessageID("stored-\(index - 1)") : nil)
        }
        for batch in stride(from: 0, to: entries, by: 50_000) {
            _ = try await store.restore((batch..<min(batch + 50_000, entries)).map(entry))
        }
        return "stored entry \(entries - 1) of the transcription"
    }

    // MARK: Idle

    private func measureIdle(set: ComposedSet, into table: inout BenchTable) async throws {
        try await Task.sleep(for: .seconds(5))
        guard let state = set.state() else { throw BenchError("no compose state") }
        var programs = state.programs.compactMap { program in program.pid.map { (program.name, $0) } }
        programs.append(("compose", state.supervisorPID))
        let before = programs.map { ProcessUsage(pid: $0.1) }
        let start = ContinuousClock.now
        try await Task.sleep(for: .seconds(settings.idleSeconds))
        let elapsed = start.duration(to: .now).seconds
        var setProportional = 0.0
        for ((name, pid), first) in zip(programs, before) {
            guard let first, let last = ProcessUsage(pid: pid) else {
                table.add(BenchRow(measurement: "idle: \(name)", tether: "restarted during the measurement", baseline: "—", target: "", met: false))
                continue
            }
            let cpu = (last.cpuSeconds - first.cpuSeconds) / elapsed * 100
            let wakeups = Double(last.contextSwitches(since: first)) / elapsed
            // The development gateway stands in for the real one: it has no target.
            let isTether = name != "gateway"
            if isTether { setProportional += last.proportionalMegabytes }
            table.add(
                BenchRow(
                    measurement: "idle \(settings.idleSeconds) s: \(name): CPU / wakeups per second / peak resident set (proportional, private at the end)",
                    tether: String(
                        format: "%.2f%% / %.1f/s / %.1f MB (%.1f MB, %.1f MB)", cpu, wakeups, last.peakMegabytes, last.proportionalMegabytes,
                        last.privateMegabytes),
                    baseline: "—",
                    target: isTether ? "< 0.2% / ≤ 1/s / ≤ 20 MB" : "", met: isTether ? cpu < 0.2 && wakeups <= 1 && last.peakMegabytes <= 20 : nil))
        }
        table.add(
            BenchRow(
                measurement: "idle: the whole set's proportional memory (Pss summed, the development gateway left out)",
                tether: String(format: "%.1f MB", setProportional), baseline: "—", target: "≤ 60 MB", met: setProportional <= 60))
    }

    /// `tether status` from start to exit, five times.
    private func measureStatus(set: ComposedSet, into table: inout BenchTable) throws {
        var times = Samples()
        for _ in 0..<5 {
            let start = ContinuousClock.now
            let status = try set.tether(["status"])
            guard status.status == 0, status.standardOutput.contains("connection: Connected"), status.standardOutput.contains("tether-protod") else {
                throw BenchError("tether status failed: \(status.standardOutput)\(status.standardError)")
            }
            times.add(start.duration(to: .now))
        }
        table.add(
            BenchRow(
                measurement: "`tether status`: started to exited, median / max (5)",
                tether: "\(formatMilliseconds(times.median)) / \(formatMilliseconds(times.maximum))", baseline: "—", target: "< 100 ms",
                met: times.median < 100))
    }

    // MARK: Waiting on the set

    private func awaitDelivered(_ ids: [MessageID], from updates: inout BusSubscription.AsyncIterator) async throws {
        var waiting = Set(ids)
        while !waiting.isEmpty {
            guard let message = await updates.next() else { throw BenchError("the delivery subscription ended") }
            guard let update = try? message.decode(DeliveryUpdate.self) else { continue }
            if update.status == .delivered { waiting.remove(update.id) }
            if update.status == .failed || update.status == .expired, waiting.contains(update.id) {
                throw BenchError("message \(update.id) \(update.status): \(update.detail ?? "")")
            }
        }
    }

    private func currentEpoch(_ client: BusClient) async throws -> Int {
        try await connectionStatus(client) { _ in true }.epoch
    }

    /// The moment the connection is open with an epoch above `epoch`.
    @discardableResult
    private func awaitConnected(_ client: BusClient, after epoch: Int) async throws -> ContinuousClock.Instant {
        _ = try await connectionStatus(client) { $0.phase == .connected && $0.epoch > epoch }
        return .now
    }

    private func awaitPhase(_ client: BusClient, _ phase: ConnectionPhase) async throws {
        _ = try await connectionStatus(client) { $0.phase == phase }
    }

    /// The first connection status (the retained one, then each change) that `matches`, within 60 s.
    private func connectionStatus(_ client: BusClient, matching matches: @escaping @Sendable (ConnectionStatus) -> Bool) async throws -> ConnectionStatus {
        let states = try await client.subscribe(to: [Topic.connectionState.name])
        return try await withDeadline(.seconds(60), "waiting for the connection") {
            for await message in states {
                if let status = try? message.decode(ConnectionStatus.self), matches(status) { return status }
            }
            throw BenchError("the connection-state subscription ended")
        }
    }

    /// When the gateway that replaced `pid` accepts TCP connections on `port`.
    private static func whenListening(port: Int, after pid: Int32) async throws -> ContinuousClock.Instant {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if kill(pid, 0) != 0, Self.accepts(port: port) { return .now }
            try await Task.sleep(for: .microseconds(500))
        }
        throw BenchError("the gateway did not come back on port \(port)")
    }

    private static func accepts(port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// Runs `operation`, or throws once `limit` has passed (cancelling it).
func withDeadline<T: Sendable>(_ limit: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw BenchError("\(what) took longer than \(limit)") }
        return value
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
