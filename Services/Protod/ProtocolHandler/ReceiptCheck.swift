import OpenClawWire

/// What today's OpenClaw gateway says of Tether's messages by their idempotency keys, read
/// into one verdict each: its receipts (`chat.history` with `inputRunIds`), its pending
/// inputs, the session's runs, and the keys of the turns in the page. No text is compared.
///
/// A value: the delivery machine asks it which keys to ask and hands it each answer; it says
/// what the gateway has. Whether the gateway keeps receipts is learned from its first history
/// answer (no capability announces them, and its closed schema refuses `inputRunIds` where it
/// does not know them), so the field is sent only to a gateway that showed it has them.
struct ReceiptCheck: Sendable, Equatable {
    /// Whether the gateway answers receipts, as its history showed.
    enum Support: Sendable, Equatable {
        case unknown
        /// It pages its pending inputs: it keeps accepted inputs and answers receipts.
        case offered
        /// Its history has neither: what it kept is read from its transcript.
        case notOffered
    }

    /// What the gateway has of one message.
    enum Verdict: Sendable, Equatable {
        /// Its turn is in the transcript: a `consumed` receipt, or the page's user entry keyed with it.
        case consumed
        /// Its run is in progress (`sessionInfo.activeRunIds`), its turn not shown yet.
        case running
        /// Kept and waiting for its turn; `queued`: behind another run in the busy session.
        case waiting(queued: Bool)
        /// The gateway will not run it: the run it waited behind was stopped.
        case cancelled
        /// A restart of the gateway ended its wait: the gateway does not run it by itself.
        case interrupted
        /// No receipt, no pending input, no run and no turn: the gateway does not have it.
        case absent
    }

    /// What one answer says.
    struct Reading: Sendable, Equatable {
        var verdicts: [String: Verdict] = [:]
        /// Receipts for keys that were not asked: ignored, and said.
        var strays: [String] = []
    }

    private(set) var support = Support.unknown
    /// Messages decided by receipts and by texts since protod started (`outbox.summary`).
    private(set) var decidedByReceipt = 0
    private(set) var decidedByText = 0

    /// Learns from a history answer whether the gateway keeps receipts; once known, it stays.
    mutating func learn(from result: ChatHistoryResult) {
        guard support == .unknown else { return }
        support = result.showsReceipts ? .offered : .notOffered
    }

    /// The release whose answers taught ``support``.
    private var learnedOf: String?

    /// A connection opened to a gateway of `release`: what another release (or one that did not
    /// name itself) showed does not hold.
    mutating func meet(release: String?) {
        guard release != learnedOf || release == nil else { return }
        support = .unknown
        learnedOf = release
    }

    /// Counts messages decided one way or the other.
    mutating func count(byReceipt: Int, byText: Int) {
        decidedByReceipt += byReceipt
        decidedByText += byText
    }

    /// The keys one lookup asks for: at most ``ChatHistoryParams/maximumInputRunIds``, each once,
    /// none the gateway's schema refuses (over 256 characters); nil when none are due or the
    /// gateway has not shown it answers them.
    func keysToAsk(_ keys: [String]) -> [String]? {
        guard support == .offered else { return nil }
        var seen: Set<String> = []
        let asked = keys.filter { !$0.isEmpty && $0.count <= 256 && seen.insert($0).inserted }.prefix(ChatHistoryParams.maximumInputRunIds)
        return asked.isEmpty ? nil : Array(asked)
    }

    /// Reads an answer to a lookup that asked `asked`; nil when it answered no receipts at all
    /// (a gateway that showed it has them and then does not say: nothing is decided by it).
    static func read(_ result: ChatHistoryResult, asked: [String]) -> Reading? {
        guard let receipts = result.inputReceipts else { return nil }
        let wanted = Set(asked)
        var reading = Reading()
        reading.strays = receipts.map(\.runId).filter { !wanted.contains($0) }
        let byKey = Dictionary(receipts.filter { wanted.contains($0.runId) }.map { ($0.runId, $0) }, uniquingKeysWith: { first, _ in first })
        let inputs = Dictionary(
            (result.pendingInputs?.items ?? []).compactMap { item in item.runId.map { ($0, item) } }, uniquingKeysWith: { first, _ in first })
        let turns = Set(result.messages.compactMap(\.turnKey))
        let running = Set(result.sessionInfo?.activeRunIds ?? [])
        for key in asked {
            reading.verdicts[key] = verdict(
                receipt: byKey[key], input: inputs[key], turned: turns.contains(ChatTranscriptMessage.userTurnKey(of: key)), running: running.contains(key))
        }
        return reading
    }

    /// One key's verdict. A pending input's own state comes first: a receipt says `pending` for
    /// an input a restart interrupted too.
    static func verdict(receipt: InputReceipt?, input: PendingInputsPage.Item?, turned: Bool, running: Bool) -> Verdict {
        if receipt?.state == "consumed" || turned { return .consumed }
        switch input?.state {
        case "cancelled"?: return .cancelled
        case "interrupted"?: return .interrupted
        case .some: return running ? .running : .waiting(queued: receipt?.queued == true)
        case nil: break
        }
        if let receipt, receipt.state == "pending" {
            if receipt.cancelled == true { return .cancelled }
            return running ? .running : .waiting(queued: receipt.queued == true)
        }
        return running ? .running : .absent
    }
}
