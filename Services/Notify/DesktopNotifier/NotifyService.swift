import FoundationEssentials
public import Logging
public import ServiceLifecycle
import Synchronization
public import TetherBus
import TetherSchema
public import TetherService

/// Whether tether-notify shows notifications, for its heartbeat's state word, and what it
/// has said of it: each change is said once in words in the log, never again while it holds.
public final class NotifierCondition: Sendable {
    private enum Condition: Equatable {
        case starting
        case off
        case notifying
        case unavailable(String)
    }

    private let condition = Mutex<(now: Condition, checkedAt: ContinuousClock.Instant?)>((.starting, nil))
    /// Notified when ``state`` reads differently.
    public let changed = ChangeSignal()
    private let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    /// The heartbeat's word: starting, notifying, unavailable (the log says why) or off.
    public var state: String {
        switch condition.withLock({ $0.now }) {
        case .starting: "starting"
        case .off: "off"
        case .notifying: "notifying"
        case .unavailable: "unavailable"
        }
    }

    /// Whether the last look found the notification service.
    var isNotifying: Bool {
        condition.withLock { $0.now == .notifying }
    }

    /// How long a service found missing is not looked for again.
    static let recheckAfter: Duration = .seconds(30)

    func off(_ why: String) {
        change(to: .off) { logger.notice("desktop notifications are off: \(why)") }
    }

    func available(address: String) {
        change(to: .notifying) {
            logger.notice("desktop notifications are shown through \(SessionBusNotifications.service) on the session bus at \(address)")
        }
    }

    func unavailable(_ error: NotificationServiceError) {
        change(to: .unavailable(error.description)) {
            logger.warning("desktop notifications are not shown: \(error.description); Tether carries on without them")
        }
    }

    /// Whether a service found missing is due to be looked for again.
    func shouldCheck(now: ContinuousClock.Instant) -> Bool {
        condition.withLock { condition in
            switch condition.now {
            case .off: return false
            case .notifying, .starting: return true
            case .unavailable:
                guard let checked = condition.checkedAt, now - checked < Self.recheckAfter else {
                    condition.checkedAt = now
                    return true
                }
                return false
            }
        }
    }

    private func change(to new: Condition, say: () -> Void) {
        let changed = condition.withLock { condition in
            defer { condition.now = new }
            return condition.now != new
        }
        if changed {
            say()
            self.changed.notify()
        }
    }
}

/// tether-notify's work: follows the front ends attached (their attention), the replies and
/// the approvals on the bus, and shows what ``NotificationMachine`` decides through the
/// desktop's notification service. Without one (no session bus, nothing owning
/// `org.freedesktop.Notifications`), it says so once and carries on, looking again when
/// there is something to show, at most every 30 s.
public struct NotifyService: Service {
    private let bus: any Bus
    /// Nil when notifications are off.
    private let notifications: SessionBusNotifications?
    private let condition: NotifierCondition
    private let counters: ProgramCounters
    private let logger: Logger

    /// - Parameter notifications: the session bus's notification service; nil when
    ///   notifications are off (`--notifications off`).
    public init(
        bus: any Bus, notifications: SessionBusNotifications?, condition: NotifierCondition, counters: ProgramCounters, logger: Logger
    ) {
        self.bus = bus
        self.notifications = notifications
        self.condition = condition
        self.counters = counters
        self.logger = logger
    }

    /// The counters tether-notify's heartbeat carries.
    public static let counterNames = ["notificationsShown", "notificationsClosed", "notificationsFailed"]

    public func run() async throws {
        guard let notifications else {
            condition.off("--notifications off (TETHER_NOTIFICATIONS)")
            try? await gracefulShutdown()
            return
        }
        check(notifications)
        let attached = try await bus.subscribe(to: [Topic.frontEndsAttached.name])
        let messages = try await bus.subscribe(to: [Topic.conversationMessage.name])
        let approvals = try await bus.subscribe(to: [Topic.approvals.name])
        let driver = MachineDriver<NotificationMachine, ContinuousClock>(clock: ContinuousClock())
        let feed: @Sendable (NotificationMachine.Event) async -> Void = { event in
            _ = try? await driver.perform { context in
                for action in context.machine.handle(event, now: context.now) {
                    if let shown = carryOut(action, notifications) { _ = context.machine.handle(shown, now: context.now) }
                }
            }
        }
        await withDiscardingTaskGroup { group in
            group.addTask { await driver.run(NotificationMachine(notBefore: Date())) { _ in } }
            group.addTask {
                for await message in attached {
                    if let body = try? message.decode(AttachedFrontEnds.self) { await feed(.frontEnds(body.frontEnds)) }
                }
            }
            group.addTask {
                for await message in messages {
                    if let entry = try? message.decode(TranscriptEntry.self) { await feed(.message(entry)) }
                }
            }
            group.addTask {
                for await message in approvals {
                    if let body = try? message.decode(ApprovalsUpdate.self) { await feed(.approvals(body.pending)) }
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        notifications.close()
    }

    /// Looks for the notification service, and says what it found when that changed.
    @discardableResult
    private func check(_ notifications: SessionBusNotifications) -> Bool {
        do {
            try notifications.checkAvailable()
            condition.available(address: notifications.address ?? "?")
            return true
        } catch {
            condition.unavailable(error)
            return false
        }
    }

    /// Carries out one action; the event saying the notification was shown, with its id.
    private func carryOut(_ action: NotificationMachine.Action, _ notifications: SessionBusNotifications) -> NotificationMachine.Event? {
        guard condition.isNotifying || (condition.shouldCheck(now: .now) && check(notifications)) else { return nil }
        do {
            switch action {
            case .notify(let notification):
                let id = try notifications.notify(notification)
                counters.increment("notificationsShown")
                logger.info("notification shown", metadata: ["notify.id": "\(id)", "notify.summary": "\(notification.summary)"])
                return .shown(notification.notice, id: id)
            case .close(let id):
                try notifications.close(notification: id)
                counters.increment("notificationsClosed")
                logger.info("notification closed", metadata: ["notify.id": "\(id)"])
                return nil
            }
        } catch {
            counters.increment("notificationsFailed")
            condition.unavailable(error)
            return nil
        }
    }
}
