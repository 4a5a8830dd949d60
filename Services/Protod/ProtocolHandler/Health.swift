public import Foundation
public import TetherSchema

/// Judges health from the outcomes of the latest five messages: healthy when all were
/// acknowledged, degraded when one or two were not, unhealthy when three or more were not.
public struct HealthMonitor: Sendable {
    public static let window = 5

    private var outcomes: [Bool] = []
    public private(set) var state: HealthState = .healthy
    public private(set) var since: Date

    public init(now: Date = Date()) {
        since = now
    }

    /// Records an outcome; returns the new state when it changed.
    public mutating func record(success: Bool, now: Date = Date()) -> HealthState? {
        outcomes.append(success)
        if outcomes.count > Self.window { outcomes.removeFirst(outcomes.count - Self.window) }
        let failures = outcomes.filter { !$0 }.count
        let next: HealthState = failures >= 3 ? .unhealthy : failures >= 1 ? .degraded : .healthy
        guard next != state else { return nil }
        state = next
        since = now
        return next
    }

    public var report: HealthReport {
        HealthReport(state: state, recentSuccesses: outcomes.filter { $0 }.count, recentFailures: outcomes.filter { !$0 }.count, since: since)
    }
}

/// Hands out each suggestion at most once in `interval` (30 s): the same words again sooner are held back.
public struct SuggestionBook: Sendable {
    public let interval: TimeInterval
    private var lastGiven: [String: Date] = [:]

    public init(interval: TimeInterval = 30) {
        self.interval = interval
    }

    /// True when the suggestion should be published now.
    public mutating func offer(_ suggestion: RecoverySuggestion, now: Date = Date()) -> Bool {
        if let last = lastGiven[suggestion.text], now.timeIntervalSince(last) < interval { return false }
        lastGiven[suggestion.text] = now
        return true
    }
}

/// The words for what a person can do, by problem.
public enum Suggestions {
    public static let checkNetwork = RecoverySuggestion(severity: .major, text: "No network: check the network connection; Tether reconnects when it is back.")
    public static let checkGatewayAddress = RecoverySuggestion(
        severity: .major, text: "The gateway cannot be reached: check its address and that it is running, then run tether reconnect.")
    public static let tokenRejected = RecoverySuggestion(
        severity: .critical, text: "The gateway rejected the token: fix the token file, then run tether reconnect.")
    public static let certificateUntrusted = RecoverySuggestion(
        severity: .critical, text: "The gateway's certificate is not trusted: check the address, or give its CA to tether-connd with --ca-file.")
    public static let gatewayNotAnswering = RecoverySuggestion(
        severity: .moderate, text: "The gateway is not answering: Tether keeps trying; run tether reconnect to try now.")
    public static let messagesNotAcknowledged = RecoverySuggestion(
        severity: .moderate,
        text: "The gateway is slow to acknowledge messages: Tether keeps them and checks the connection; check the gateway if this goes on.")
    public static let tokenUnreadable = RecoverySuggestion(
        severity: .critical, text: "Tether cannot read its token: fix the token file (it must exist, hold the token and be mode 0600) or the variable.")
    public static let outboxFull = RecoverySuggestion(
        severity: .minor, text: "The outbox is full: new messages are refused until the waiting ones have gone out.")

    /// The suggestion for a connection status, if it calls for one.
    public static func forConnection(_ status: ConnectionStatus) -> RecoverySuggestion? {
        switch (status.phase, status.failure) {
        case (.waitingForNetwork, _): checkNetwork
        case (.failed, .credentialRejected): tokenRejected
        case (.failed, .credentialUnavailable): tokenUnreadable
        case (.failed, .tls): certificateUntrusted
        case (.failed, .unreachable): checkGatewayAddress
        case (.failed, _): gatewayNotAnswering
        case (.reconnecting, _) where status.attempt >= 3: gatewayNotAnswering
        default: nil
        }
    }
}
