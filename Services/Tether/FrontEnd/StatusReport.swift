public import Foundation
import Synchronization
public import TetherBus
public import TetherSchema
import TetherService
public import TetherWire

/// What `tether status` shows: each program's heartbeat and the retained state of the set.
public struct StatusReport: Sendable, Codable {
    public var programs: [Heartbeat] = []
    public var connection: ConnectionStatus?
    public var network: NetworkPath?
    public var outbox: OutboxSummary?
    public var health: HealthReport?
    public var bot: BotActivity?
    public var session: ConversationSession?
    /// The session's settings and usage (model, thinking level, tokens), as protod learnt them.
    public var settings: SessionSettings?
    /// The front ends attached now, as tether-connd counts them; nil when connd said nothing.
    public var frontEnds: [FrontEndPresence]?
    /// What each program that keeps files says of them: a full disk, damaged databases set aside.
    public var storage: [StorageReport] = []

    public init() {}

    /// Gathers the report from what the set's programs retain on the bus (heartbeats, the
    /// front ends attached, the connection, the network, the outbox, storage), which each
    /// replays to a new subscriber at once: done once connd, netmon, protod and snapd have
    /// answered (each replays its heartbeat first, as it is subscribed to first) and nothing
    /// new has come for `quiet`, or after `limit` whatever came (a program that is not running
    /// retains nothing).
    public static func gather(
        bus: any Bus, quiet: Duration = .milliseconds(25), limit: Duration = .milliseconds(1500)
    ) async throws(BusError) -> StatusReport {
        let subscription = try await bus.subscribe(
            to: [
                Topic.heartbeat.name, Topic.connectionState.name, Topic.networkPath.name, Topic.outboxSummary.name, Topic.botState.name,
                Topic.health.name, Topic.frontEndsAttached.name, Topic.conversationSession.name,
                Topic.storage.name, Topic.sessionSettings.name,
            ],
            confirm: true)
        let arrivals = Arrivals()
        return await withTaskGroup(of: StatusReport?.self) { group in
            group.addTask {
                var report = StatusReport()
                var heartbeats: [String: Heartbeat] = [:]
                var storage: [String: StorageReport] = [:]
                for await message in subscription {
                    arrivals.note(.init(topic: message.topic, source: message.header.source))
                    switch message.topic {
                    case .heartbeat: if let beat = try? message.decode(Heartbeat.self) { heartbeats[beat.program] = beat }
                    case .connectionState: report.connection = try? message.decode(ConnectionStatus.self)
                    case .networkPath: report.network = try? message.decode(NetworkPath.self)
                    case .outboxSummary: report.outbox = try? message.decode(OutboxSummary.self)
                    case .botState: report.bot = try? message.decode(BotActivity.self)
                    case .health: report.health = try? message.decode(HealthReport.self)
                    case .conversationSession: report.session = try? message.decode(ConversationSession.self)
                    case .sessionSettings: report.settings = try? message.decode(SessionSettings.self)
                    case .storage: if let stored = try? message.decode(StorageReport.self) { storage[stored.program] = stored }
                    case .frontEndsAttached: report.frontEnds = try? message.decode(AttachedFrontEnds.self).frontEnds
                    default: break
                    }
                    report.programs = heartbeats.values.sorted { $0.program < $1.program }
                    report.storage = storage.values.sorted { $0.program < $1.program }
                    if Task.isCancelled { break }
                }
                return report
            }
            group.addTask {
                let deadline = ContinuousClock.now + limit
                let needed: Set<Arrivals.Source> = [
                    .init(topic: .connectionState, source: "tether-connd"), .init(topic: .networkPath, source: "tether-netmon"),
                    .init(topic: .outboxSummary, source: "tether-protod"), .init(topic: .storage, source: "tether-snapd"),
                ]
                while ContinuousClock.now < deadline, !arrivals.settled(having: needed, quiet: quiet) {
                    guard (try? await Task.sleep(for: .milliseconds(10))) != nil else { break }
                }
                return nil
            }
            _ = await group.next()
            group.cancelAll()
            return (await group.next() ?? nil) ?? StatusReport()
        }
    }

    /// The report as a table and a few lines of words.
    public func render(now: Date = Date()) -> String {
        var table = TextTable(header: ["PROGRAM", "STATE", "PID", "UP", "DROPPED"])
        for beat in programs {
            table.append([beat.program, beat.state, "\(beat.pid)", uptimeWords(now.timeIntervalSince(beat.startedAt)), "\(beat.dropped)"])
        }
        var lines = [table.render()]
        if programs.isEmpty { lines.append("(no program answered on the bus)") }
        lines.append("")
        if let connection {
            // The words on the bus are the terminal UI's ("press r"); here the way forward is a command.
            let stated =
                connection.phase == .failed && connection.failure != .pairingRequired
                ? "Connection lost — tether reconnect tries again" + (connection.failure.map { " (\($0.advice))" } ?? "") : connection.words
            var words = "connection: \(stated) \(connection.url) (epoch \(connection.epoch))"
            if connection.attempt > 0 { words += ", attempt \(connection.attempt)" }
            if let next = connection.nextAttemptAt { words += ", next in \(String(format: "%.1f", max(0, next.timeIntervalSince(now)))) s" }
            if let error = connection.lastError, connection.phase != .connected { words += "\n  last error: \(error)" }
            lines.append(words)
            if let gateway = connection.gateway, gateway.dialect == .openclaw {
                var about =
                    gateway.generation.map { "gateway: \($0.words)" }
                    ?? "gateway: OpenClaw protocol \(gateway.protocolVersion.map(String.init) ?? "?")"
                    + (gateway.serverVersion.map { ", release \($0)" } ?? "")
                if let device = gateway.deviceID { about += ", device \(device.prefix(12))…" }
                lines.append(about)
                if let generation = gateway.generation { lines.append("  \(generation.features)") }
                if gateway.connectedWithDeviceToken == true {
                    lines.append("  connected with this device's token: the gateway refused the shared token; put its new token in the token file")
                }
            }
        } else {
            lines.append("connection: unknown (tether-connd is not running)")
        }
        if let network {
            lines.append(
                network.satisfied
                    ? "network: available via \(network.interface ?? "?") (\(network.kind?.rawValue ?? "other"))"
                    : "network: unavailable (\(network.reason ?? "no usable route"))")
        } else {
            lines.append("network: unknown (tether-netmon is not running)")
        }
        lines.append("outbox: " + (outbox.map { "\($0.pending) pending" } ?? "unknown (tether-protod is not running)"))
        if let undelivered = outbox?.undelivered, !undelivered.isEmpty {
            let counts = undelivered.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            let last = outbox?.lastUndelivered.map { "; the latest \($0.status.rawValue): \($0.detail ?? "no reason given")" } ?? ""
            lines.append("  left undelivered since tether-protod started: \(counts)\(last)")
        }
        if let confirmations = outbox?.confirmations {
            let how =
                confirmations.receipts
                ? "the gateway answers receipts by key" : "the gateway keeps no receipts: its history's texts are matched"
            lines.append(
                "  what the gateway kept, since tether-protod started: \(how); \(confirmations.byReceipt) message(s) decided by receipt or key, \(confirmations.byText) by matching texts"
            )
        }
        if let health {
            lines.append("health: \(health.state.rawValue)")
        }
        if !storage.isEmpty {
            var notices = StorageNotices()
            for stored in storage { _ = notices.apply(stored) }
            lines.append(contentsOf: notices.current.isEmpty ? ["storage: ok"] : notices.current.map { "storage: " + $0 })
        }
        if let key = session?.sessionKey {
            lines.append("session: \(key)" + (session?.requested.map { " (asked for \($0))" } ?? ""))
            if let finishing = session?.finishing, let waiting = session?.finishingMessages {
                lines.append("  \(waiting) message\(waiting == 1 ? "" : "s") sent before still finishing in \(finishing); what is sent now waits until then")
            }
        }
        if let settings { lines.append(settings.unavailable == nil ? "settings: \(settings.words)" : settings.words) }
        if let bot { lines.append("bot: \(bot.botName) is \(bot.state.rawValue)") }
        switch frontEnds {
        case nil: lines.append("front ends: unknown (tether-connd is not running)")
        case let frontEnds? where frontEnds.isEmpty: lines.append("front ends: none attached")
        case let frontEnds?:
            lines.append("front ends: " + frontEnds.map { "\($0.frontEnd) (pid \($0.pid)\(Self.words($0.attention)))" }.joined(separator: ", "))
        }
        for beat in programs {
            guard let dropped = beat.droppedByKind, !dropped.isEmpty else { continue }
            lines.append("\(beat.program) dropped: " + dropped.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        for beat in programs {
            guard let counters = beat.counters, !counters.isEmpty else { continue }
            let words = counters.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append("\(beat.program): \(words)")
        }
        return lines.joined(separator: "\n")
    }
}

/// What `gather` has received so far: which topics from which programs, and when the last message came.
private final class Arrivals: Sendable {
    struct Source: Hashable, Sendable {
        var topic: Topic
        var source: String
    }

    private let state = Mutex((seen: Set<Source>(), last: ContinuousClock.now))

    func note(_ source: Source) {
        state.withLock {
            $0.seen.insert(source); $0.last = .now
        }
    }

    /// True once every one of `needed` came and nothing new has come for `quiet`.
    func settled(having needed: Set<Source>, quiet: Duration) -> Bool {
        state.withLock { needed.isSubset(of: $0.seen) && $0.last.duration(to: .now) >= quiet }
    }
}

extension StatusReport {
    /// What `tether status` says of a front end's attention: only what it reported of the user.
    fileprivate static func words(_ attention: FrontEndPresence.Attention?) -> String {
        switch attention {
        case .focused?: ", looked at"
        case .away?: ", not looked at"
        case .unattended?, nil: ""
        }
    }
}
