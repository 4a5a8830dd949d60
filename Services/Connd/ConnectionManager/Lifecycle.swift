import FoundationEssentials
import Logging
import TetherSchema
import TetherService

#if canImport(Glibc)
import Glibc
#endif

/// What suspends and resumes the connection besides commands: front ends coming and going,
/// and the machine sleeping.
public struct LifecycleSettings: Sendable {
    /// How long after the last front end left the connection is suspended; nil never.
    public var idleSuspendAfter: Duration?
    /// Where logind's signals are read from; nil when not followed.
    public var logind: LogindBus?

    public init(idleSuspendAfter: Duration? = .seconds(30), logind: LogindBus? = nil) {
        self.idleSuspendAfter = idleSuspendAfter
        self.logind = logind
    }
}

/// The D-Bus bus logind's `PrepareForSleep` signal is read from.
public enum LogindBus: Sendable, Equatable {
    /// The system bus, where logind lives.
    case system
    /// Another bus, by address (`unix:path=…`): a private bus in tests.
    case address(String)

    /// The system bus when logind runs on this machine, else nil.
    public static func detect() -> LogindBus? {
        let manager = FileManager.default
        guard manager.fileExists(atPath: "/run/systemd/system"), manager.fileExists(atPath: "/run/dbus/system_bus_socket") else { return nil }
        return .system
    }

    var monitorArguments: [String] {
        let rule = "type='signal',interface='org.freedesktop.login1.Manager',member='PrepareForSleep'"
        switch self {
        case .system: return ["--system", rule]
        case .address(let address): return ["--address", address, rule]
        }
    }
}

/// Which front ends are attached, from their presence messages, and the idle suspend that
/// follows them: the first to arrive resumes an idle suspend; when the last is gone (it
/// left, or its presence lapsed: ``FrontEndPresence/lapsesAfter``, each by its own renewal)
/// for the grace period, the connection is suspended. Time is passed in: the service wakes
/// it at ``nextDeadline`` and carries its actions out.
struct FrontEndTracker {
    enum Action: Equatable {
        /// The front ends attached changed (retained on `frontend.attached`).
        case attachedChanged([FrontEndPresence])
        /// The first front end arrived: an idle suspend ends.
        case firstArrived
        /// The last front end is gone: the connection is suspended after `grace` unless one comes back.
        case graceStarted(Duration)
        /// No front end came back within the grace period: suspend.
        case graceElapsed
    }

    /// Each front end's latest presence, and when it lapses unless renewed.
    private var seen: [String: (presence: FrontEndPresence, lapses: ContinuousClock.Instant)] = [:]
    private let idleSuspendAfter: Duration?
    /// When the grace period after the last front end left ends.
    private var graceEnds: ContinuousClock.Instant?

    /// - Parameter idleSuspendAfter: the grace period; nil never suspends.
    init(idleSuspendAfter: Duration?) {
        self.idleSuspendAfter = idleSuspendAfter
    }

    /// How many front ends are attached.
    var count: Int { seen.count }

    /// The front ends attached, by kind, then pid.
    var attached: [FrontEndPresence] {
        seen.values.map(\.presence).sorted { ($0.frontEnd, $0.pid, $0.instance) < ($1.frontEnd, $1.pid, $1.instance) }
    }

    /// When ``timePassed(at:)`` is next due: the first presence lapsing unless renewed, or
    /// the grace period ending. Nil while nothing is due: no front end, no grace period.
    var nextDeadline: ContinuousClock.Instant? {
        (seen.values.map(\.lapses) + [graceEnds].compactMap { $0 }).min()
    }

    mutating func observe(_ presence: FrontEndPresence, at now: ContinuousClock.Instant) -> [Action] {
        let before = attached
        switch presence.state {
        case .active: seen[presence.instance] = (presence, now + presence.lapsesAfter)
        case .leaving: seen[presence.instance] = nil
        }
        return changed(from: before, at: now)
    }

    /// Forgets the front ends whose presence lapsed, and ends the grace period if it is over.
    mutating func timePassed(at now: ContinuousClock.Instant) -> [Action] {
        let before = attached
        seen = seen.filter { now < $0.value.lapses }
        var actions = changed(from: before, at: now)
        if let ends = graceEnds, now >= ends {
            graceEnds = nil
            actions.append(.graceElapsed)
        }
        return actions
    }

    private mutating func changed(from before: [FrontEndPresence], at now: ContinuousClock.Instant) -> [Action] {
        let after = attached
        // A front end's attention changing is a change of the list too (tether-notify follows it).
        guard after.map(\.instance) != before.map(\.instance) || after.map(\.attention) != before.map(\.attention) else { return [] }
        var actions: [Action] = [.attachedChanged(after)]
        switch (before.count, after.count) {
        case (0, 1...):
            graceEnds = nil
            actions.append(.firstArrived)
        case (1..., 0):
            if let grace = idleSuspendAfter {
                graceEnds = now + grace
                actions.append(.graceStarted(grace))
            }
        default:
            break
        }
        return actions
    }
}

/// Reads `dbus-monitor`'s output: a signal line naming the member, then its arguments
/// indented below it. Yields true when the machine is about to sleep, false when it woke.
struct SleepSignalParser {
    private var inPrepareForSleep = false

    mutating func read(_ line: String) -> Bool? {
        if line.hasPrefix("signal ") {
            inPrepareForSleep = line.contains("member=PrepareForSleep")
            return nil
        }
        guard inPrepareForSleep else { return nil }
        let words = line.split(whereSeparator: \.isWhitespace)
        guard words.count == 2, words[0] == "boolean" else { return nil }
        inPrepareForSleep = false
        return words[1] == "true"
    }
}

/// Follows logind's `PrepareForSleep` through `dbus-monitor`, which stays in connd's process
/// group so that whatever stops connd's group stops it too.
struct SleepWatcher: Sendable {
    let bus: LogindBus
    let logger: Logger

    /// Calls `onChange(true)` before the machine sleeps and `onChange(false)` after it wakes,
    /// until cancelled; restarts the monitor if it ends.
    func run(_ onChange: @escaping @Sendable (Bool) async -> Void) async {
        while !Task.isCancelled {
            do {
                let monitor = try ProgramProcess(
                    executable: "/usr/bin/env", arguments: ["dbus-monitor"] + bus.monitorArguments, environment: ProcessInfo.processInfo.environment,
                    group: .starters, standardError: false)
                logger.info("following logind's sleep signals", metadata: ["logind.bus": "\(bus)"])
                let ended: ExitStatus? = await withTaskCancellationHandler {
                    var parser = SleepSignalParser()
                    for await event in monitor.events {
                        switch event {
                        case .line(let line):
                            if let sleeping = parser.read(line) { await onChange(sleeping) }
                        case .exited(let status):
                            return status
                        }
                    }
                    return nil
                } onCancel: {
                    monitor.signalGroup(SIGTERM)
                }
                if let ended, !Task.isCancelled {
                    // 127: env found no dbus-monitor.
                    let reason = ended == .exited(127) ? "dbus-monitor is not installed" : "dbus-monitor \(ended.description)"
                    logger.warning("cannot follow logind's sleep signals: \(reason); trying again in 5 s")
                }
            } catch {
                logger.warning("cannot follow logind's sleep signals", metadata: ["logind.error": "\(error)"])
            }
            try? await Task.sleep(for: .seconds(5))
        }
    }
}
