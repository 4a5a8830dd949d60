import Foundation
import Logging
import OpenClawWire
import TetherService

/// Today's gateway (`--openclaw current`) keeps every input sent to an existing session before
/// it acknowledges it (`session_pending_inputs`), answers receipts for it by idempotency key,
/// and pages what awaits a turn (`chat-pending-inputs.ts`,
/// `session-accessor.sqlite-pending-input-receipts.ts`). A single input's row is deleted when its
/// turn is placed in the transcript, whose user entry then carries `<key>:user`; a restart ends
/// the wait of what was queued (`interrupted`), and the gateway does not replay it.
extension OpenClawGateway {
    /// An input the gateway accepted and has not placed in a transcript yet.
    struct KeptInput: Codable, Sendable {
        var id: String
        /// The idempotency key it was sent with.
        var runId: String
        var session: String
        var text: String
        /// Milliseconds since 1970.
        var acceptedAt: Int
        /// `queued`, `cancelled` or `interrupted`.
        var state: String
        /// It waits in the busy session's queue behind another run.
        var behindRun: Bool
    }

    /// Keeps an input before its acknowledgement, when this release does and the session exists.
    func keepInput(key: String, text: String, session: String, behindRun: Bool) {
        guard settings.release.keepsInputs, transcripts[session]?.isEmpty == false else { return }
        keptInputs[key] = KeptInput(
            id: String(UUID().uuidString.lowercased().prefix(8)), runId: key, session: session, text: text,
            acceptedAt: OpenClawProtocol.milliseconds(Date()), state: "queued", behindRun: behindRun)
        saveKeptInputs()
    }

    /// A single input's turn was placed in the transcript: its row goes.
    func consumeInput(key: String?) {
        guard let key, keptInputs.removeValue(forKey: key) != nil else { return }
        saveKeptInputs()
    }

    /// What a restart leaves of the inputs kept before it: the wait of each is over (`interrupted`).
    static func loadKeptInputs(_ directory: String?) -> [String: KeptInput] {
        guard let directory, let data = FileManager.default.contents(atPath: inputsPath(directory)),
            var inputs = try? JSONDecoder().decode([String: KeptInput].self, from: data)
        else { return [:] }
        for key in inputs.keys where inputs[key]?.state == "queued" { inputs[key]?.state = "interrupted" }
        return inputs
    }

    private func saveKeptInputs() {
        guard let directory = settings.stateDirectory, let data = try? JSONEncoder().encode(keptInputs) else { return }
        // Replaced whole, by rename: a SIGKILL leaves the file before or after, never half of it.
        let path = Self.inputsPath(directory)
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else { return }
        _ = rename(temporary, path)
    }

    private static func inputsPath(_ directory: String) -> String { directory + "/pending-inputs.json" }

    /// What today's `chat.history` adds to a page: the pending inputs, the session's runs, and
    /// the receipts asked for. Nil: the release adds nothing.
    func historyAdditions(for params: ChatHistoryParams, session: String) -> ChatHistoryResult? {
        guard settings.release.keepsInputs else { return nil }
        let waiting = keptInputs.values.filter { $0.session == session }.sorted { $0.acceptedAt < $1.acceptedAt }
        let items = waiting.suffix(20).map { input in
            PendingInputsPage.Item(
                id: input.id, runId: input.runId.count <= 256 ? input.runId : nil, message: .string(input.text), acceptedAt: Double(input.acceptedAt),
                state: input.state)
        }
        let active = activeRuns.filter { $0.value.sessionKey == session }
        let receipts = params.inputRunIds.map { keys in
            keys.compactMap { key -> InputReceipt? in
                guard let input = keptInputs[key], input.session == session else { return nil }
                return InputReceipt(
                    runId: key, state: "pending", queued: input.state == "queued" && input.behindRun ? true : nil,
                    cancelled: input.state == "cancelled" ? true : nil)
            }
        }
        let running = active.keys.sorted()
        return ChatHistoryResult(
            sessionKey: nil, sessionId: nil, messages: [], inputReceipts: receipts, pendingInputs: PendingInputsPage(items: Array(items), total: waiting.count),
            sessionInfo: ChatSessionInfo(hasActiveRun: !active.isEmpty, activeRunIds: running),
            inFlightRun: running.first.map { InFlightRun(runId: $0, text: activeRuns[$0]?.text) })
    }

    /// The gateway's refusal of a receipt query it cannot answer: over 50 keys, a key over
    /// 256 characters, none, or one twice (checked before any session is read).
    static func receiptQueryError(_ keys: [String]?) -> GatewayErrorShape? {
        guard let keys else { return nil }
        if keys.isEmpty { return invalid("invalid chat.history params: at /inputRunIds: must NOT have fewer than 1 items") }
        if keys.count > ChatHistoryParams.maximumInputRunIds {
            return invalid("invalid chat.history params: at /inputRunIds: must NOT have more than \(ChatHistoryParams.maximumInputRunIds) items")
        }
        if keys.contains(where: { $0.isEmpty || $0.count > 256 }) {
            return invalid("invalid chat.history params: at /inputRunIds: each must be 1 to 256 characters")
        }
        if Set(keys).count != keys.count { return invalid("invalid chat.history params: at /inputRunIds: must NOT have duplicate items") }
        return nil
    }

    /// The refusal of params with a field the method's closed schema does not name, as the
    /// gateway's validator words it; nil when every field is known.
    static func unknownFieldError(_ params: JSONValue?, method: String, allowed: Set<String>) -> GatewayErrorShape? {
        guard case .object(let object)? = params, let extra = object.keys.sorted().first(where: { !allowed.contains($0) }) else { return nil }
        return GatewayErrorShape(
            code: "INVALID_REQUEST", message: "invalid \(method) params: at root: unexpected property '\(extra)'",
            details: .object(["additionalProperty": .string(extra)]))
    }
}
