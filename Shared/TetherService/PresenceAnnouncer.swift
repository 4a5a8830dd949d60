import FoundationEssentials
import Synchronization
public import TetherBus
public import TetherSchema

#if canImport(Glibc)
import Glibc
#endif

/// Announces a front end on the bus while it runs, so that connd knows one is attached: a
/// presence as it starts and then every ``renewal`` (seldom: an idle front end sleeps), and
/// one saying it leaves when it stops. A front end that crashes says nothing; connd counts
/// it gone once three renewals did not come.
public struct PresenceAnnouncer: Sendable {
    /// The variable that sets the renewal in seconds, for the tests that kill a front end and
    /// must not wait three of the usual renewals for connd to notice.
    public static let renewalVariable = "TETHER_PRESENCE_RENEWAL"

    private let bus: any Bus
    private let frontEnd: String
    private let instance = UUID().uuidString.lowercased()
    /// How often the presence is published again.
    public let renewal: Duration
    /// Whether the user looks at the front end, as it last said; nil while it cannot tell.
    private let attention: AttentionBox

    /// `renewal` defaults to ``FrontEndPresence/renewal``, or the seconds `TETHER_PRESENCE_RENEWAL` says;
    /// `attention` is what the front end can tell of the user's attention as it starts (nil: nothing).
    public init(bus: any Bus, frontEnd: String, renewal: Duration? = nil, attention: FrontEndPresence.Attention? = nil) {
        self.bus = bus
        self.frontEnd = frontEnd
        self.attention = AttentionBox(attention)
        let configured = ProcessInfo.processInfo.environment[Self.renewalVariable].flatMap(Int.init).map { Duration.seconds($0) }
        self.renewal = renewal ?? configured ?? FrontEndPresence.renewal
    }

    /// Publishes the presence, again every ``renewal``, and again whenever a subscriber to
    /// presences arrives, until cancelled: the first may have gone out before this client's
    /// connection to the proxy was up, and a connd that restarted knows no front end. Told by
    /// the proxy (a subscription reaching this publisher), so it costs nothing while idle.
    public func run() async {
        let listeners = try? bus.subscriberPresence(for: .frontEndPresence)
        await withDiscardingTaskGroup { group in
            group.addTask {
                while !Task.isCancelled {
                    announce(.active)
                    try? await Task.sleep(for: renewal)
                }
            }
            if let listeners {
                group.addTask {
                    for await present in listeners where present { announce(.active) }
                }
            }
        }
    }

    /// Says at once that the user's attention changed (the terminal's focus, the page's
    /// visibility); nothing when it is what was said last.
    public func setAttention(_ now: FrontEndPresence.Attention?) {
        let changed = attention.said.withLock { attention in
            defer { attention = now }
            return attention != now
        }
        if changed { announce(.active) }
    }

    /// Says the front end is leaving; connd starts its grace period at once.
    public func leave() {
        announce(.leaving)
    }

    private func announce(_ state: FrontEndPresence.State) {
        let seconds = Int(renewal.components.seconds)
        try? bus.publish(
            FrontEndPresence(
                frontEnd: frontEnd, instance: instance, pid: getpid(), state: state, renewalSeconds: seconds, attention: attention.said.withLock { $0 }),
            on: .frontEndPresence)
    }
}

/// The attention a front end said last, shared by the copies of its announcer.
private final class AttentionBox: Sendable {
    let said: Mutex<FrontEndPresence.Attention?>

    init(_ attention: FrontEndPresence.Attention?) {
        said = Mutex(attention)
    }
}
