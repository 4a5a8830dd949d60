// The words a person reads for the payloads' states: kept apart from the data types, so
// that what a front end says can be read (and changed) in one place.

extension ConnectionPhase {
    /// The words a person sees for this phase.
    public var words: String {
        switch self {
        case .disconnected: "Disconnected"
        case .connecting: "Connecting…"
        case .connected: "Connected"
        case .reconnecting: "Reconnecting…"
        case .suspended: "Disconnected (app suspended)"
        case .waitingForNetwork: "No network — waiting for connection."
        case .failed: "Connection lost — press r to reconnect"
        }
    }
}

extension ConnectionFailure {
    /// The way forward, in words.
    public var advice: String {
        switch self {
        case .unreachable: "check the gateway address and that the gateway is running"
        case .credentialRejected: "the token was rejected: fix the token file, then reconnect"
        case .credentialUnavailable: "the token cannot be read here (the error says why): fix it; Tether connects as soon as it can read it"
        case .tls: "the gateway's certificate is not trusted: check the address, or pass its CA with --ca-file"
        case .retriesExhausted: "the gateway is not answering: reconnect when it is back"
        case .pairingRequired: "approve this device on the gateway (openclaw devices approve ID); Tether connects by itself once approved"
        case .protocolMismatch: "the gateway speaks another protocol version: update Tether or the gateway"
        case .originRefused: "the gateway refused this client: check the gateway's allowed origins"
        case .scopeMissing: "the gateway did not grant operator.read and operator.write: grant them to this device, then reconnect"
        case .gatewayRefused: "the gateway refused the connection: see the error, fix it, then reconnect"
        }
    }
}

extension ConnectionStatus {
    /// What a person should read of a connection: the phase's words, with the way forward when
    /// it failed (the request to approve, when the gateway waits for a person's approval).
    static func words(phase: ConnectionPhase, failure: ConnectionFailure?, lastError: String?) -> String {
        if failure == .pairingRequired, let lastError {
            // The request to approve is in the error: the way forward is those words.
            "Waiting for approval: \(lastError)"
        } else {
            failure.map { "\(phase.words) (\($0.advice))" } ?? phase.words
        }
    }
}

extension DeliveryStatus {
    /// The mark a front end shows beside a message the user sent: `✓✓ delivered`.
    public var mark: String {
        switch self {
        case .queued: "… queued"
        case .sent: "✓ sent"
        case .accepted: "✓ accepted, waiting in the gateway's queue"
        case .delivered: "✓✓ delivered"
        case .failed: "✗ failed"
        case .expired: "✗ expired"
        case .cancelled: "✗ cancelled"
        case .lost: "✗ lost with a damaged outbox"
        case .received, .incomplete: rawValue
        }
    }
}

extension Int {
    /// `12,345`: digits grouped by thousands, as the words of sizes and token counts show them.
    public var grouped: String {
        let digits = String(magnitude)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return (self < 0 ? "-" : "") + out
    }
}

extension TranscriptEntry {
    /// The mark beside a message the user sent: its status's, or, for a message delivered with
    /// words of its own (steered into the reply in progress), those words: `✓✓ steered into …`.
    public var deliveryMark: String {
        if status == .delivered, let detail { return "✓✓ " + detail }
        return status.mark
    }
}
