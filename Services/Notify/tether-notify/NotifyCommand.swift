import ArgumentParser
import DesktopNotifier
import FoundationEssentials
import Logging
import TetherBus
import TetherService

@main
struct NotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-notify",
        abstract: "Shows a desktop notification when a reply completes or an approval waits and no front end has the user's attention.",
        discussion: """
            Notifications go to org.freedesktop.Notifications on the user's D-Bus session bus \
            (DBUS_SESSION_BUS_ADDRESS, else the bus socket in XDG_RUNTIME_DIR). Where there is none, \
            tether-notify says so once in its log and carries on.
            """,
        version: TetherVersion.current,
    )

    enum Switch: String, ExpressibleByArgument, CaseIterable {
        case on
        case off
    }

    @OptionGroup var options: ProgramOptions

    @Option(help: "Show desktop notifications (on, where a notification service runs) or not (off).")
    var notifications: Switch = .on

    func run() async throws {
        // Before the first logger is made: a logger keeps the handler it was made with.
        options.bootstrapLogging()
        let address = SessionBusNotifications.sessionAddress(in: ProcessInfo.processInfo.environment)
        let counters = ProgramCounters(names: NotifyService.counterNames)
        let logger = Logger(label: "tether-notify")
        let condition = NotifierCondition(logger: logger)
        try await BusProgram.run(
            "tether-notify", options: options, state: { condition.state }, stateChanged: condition.changed, counters: counters
        ) { bus, logger in
            [
                NotifyService(
                    bus: bus, notifications: notifications == .on ? SessionBusNotifications(address: address) : nil, condition: condition,
                    counters: counters, logger: logger)
            ]
        }
    }
}
