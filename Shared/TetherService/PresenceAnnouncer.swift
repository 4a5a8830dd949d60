import FoundationEssentials
public import TetherBus
import TetherSchema

#if canImport(Glibc)
import Glibc
#endif

/// Announces a front end on the bus while it runs, so that connd knows one is attached:
/// a presence every second, and one saying it leaves when it stops.
public struct PresenceAnnouncer: Sendable {
    private let bus: any Bus
    private let frontEnd: String
    private let instance = UUID().uuidString.lowercased()

    public init(bus: any Bus, frontEnd: String) {
        self.bus = bus
        self.frontEnd = frontEnd
    }

    /// Publishes the presence every second until cancelled.
    public func run() async {
        while !Task.isCancelled {
            announce(.active)
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// Says the front end is leaving; connd starts its grace period at once.
    public func leave() {
        announce(.leaving)
    }

    private func announce(_ state: FrontEndPresence.State) {
        try? bus.publish(FrontEndPresence(frontEnd: frontEnd, instance: instance, pid: getpid(), state: state), on: .frontEndPresence)
    }
}
