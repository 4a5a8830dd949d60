import FoundationEssentials

/// The payload of a `chat` event: one step of a run's reply.
public struct ChatEventPayload: Sendable, Hashable, Codable {
    public enum State: String, Sendable, Hashable, Codable {
        case delta, final, aborted, error
        /// Today's gateways: where a run stands before its reply starts (its phase, a retry).
        case status
    }

    /// A `status` event's retry: the model is asked again after a failure.
    public struct Retry: Sendable, Hashable, Codable {
        public var attempt: Int?
        public var maxAttempts: Int?
        /// Why (`rate_limit`, …).
        public var reason: String?

        public init(attempt: Int?, maxAttempts: Int?, reason: String?) {
            self.attempt = attempt
            self.maxAttempts = maxAttempts
            self.reason = reason
        }
    }

    /// The `idempotencyKey` of the `chat.send` that started the run.
    public var runId: String
    public var sessionKey: String?
    /// The run's own counter (with holes); gaps are found on the frame's `seq` instead.
    public var seq: Int?
    public var state: State
    /// On a delta, the text so far (protocol 3 and 4); on a final, the whole reply.
    public var message: ChatTranscriptMessage?
    /// Protocol 4: the increment of a delta.
    public var deltaText: String?
    /// Protocol 4: the buffer starts again with this delta.
    public var replace: Bool?
    public var errorMessage: String?
    /// Today's gateways, on `error`: `refusal`, `timeout`, `rate_limit`, `context_length` or `unknown`.
    public var errorKind: String?
    public var errorDetail: String?
    public var stopReason: String?
    /// Today's gateways, on `status`: the run's phase (preparing its workspace, starting the model, …).
    public var phase: String?
    /// Today's gateways, on `status`: the model is being retried.
    public var retry: Retry?

    public init(
        runId: String, sessionKey: String?, seq: Int?, state: State, message: ChatTranscriptMessage? = nil, deltaText: String? = nil,
        replace: Bool? = nil, errorMessage: String? = nil, errorKind: String? = nil, errorDetail: String? = nil, stopReason: String? = nil,
        phase: String? = nil, retry: Retry? = nil
    ) {
        self.errorKind = errorKind
        self.errorDetail = errorDetail
        self.phase = phase
        self.retry = retry
        self.runId = runId
        self.sessionKey = sessionKey
        self.seq = seq
        self.state = state
        self.message = message
        self.deltaText = deltaText
        self.replace = replace
        self.errorMessage = errorMessage
        self.stopReason = stopReason
    }
}
