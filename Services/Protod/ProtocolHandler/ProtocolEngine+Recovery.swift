import Foundation
import Logging
import TetherBus
import TetherSchema
import TetherStorage
import TetherWire

extension ProtocolEngine {
    /// What protod starts from when its conversation journal was found damaged and made anew:
    /// the transcript as tether-snapd keeps it, newest entries first asked for, so that what
    /// protod published before (and the gateway's history holds) is known and not added twice.
    /// After an outbox found damaged too, the messages the transcript shows were never
    /// confirmed go back into the outbox under their own ids, or are said lost when they cannot
    /// be sent whole. Empty when snapd does not answer in time: protod then starts as it can.
    func transcriptAfterJournalLoss(deadline: Duration = .seconds(15)) async -> [TranscriptEntry] {
        let end = ContinuousClock.now.advanced(by: deadline)
        var entries: [TranscriptEntry] = []
        var before: Int?
        while entries.count < DeliveryStateMachine.knownLimit,
            let page = await askSnapd(
                until: end, TranscriptCommand.self,
                .init(limit: TranscriptCommand.pageLimit, before: before))
        {
            entries = page.entries + entries
            guard let next = page.nextBefore else { break }
            before = next
        }
        if entries.isEmpty {
            logger.warning("the conversation journal was made anew and tether-snapd's transcript could not be read: what protod published before is not known")
        } else {
            logger.notice(
                "the conversation journal was made anew: protod knows the transcript from tether-snapd", metadata: ["snapd.entries": "\(entries.count)"])
        }
        return entries
    }

    /// After an outbox found damaged: takes back what `transcript` shows was never confirmed
    /// and the outbox lacks, counts it into `recovery` (the messages lost among them too) and
    /// says anew on `storage` what the outbox got back.
    func recover(from transcript: [TranscriptEntry], into recovery: inout OutboxRecoveryOutcome) async throws {
        let plan = OutboxRecovery.plan(known: transcript, held: try await outbox.ids(), source: "the transcript", retry: settings.defaultRetry)
        let added = Set(try await outbox.restore(plan.messages).map(\.id))
        guard !added.isEmpty else { return }
        recovery.add(plan, added: added, from: "the transcript")
        storage.reword(file: recovery.replaced.file, as: recovery.words)
    }

    /// The statuses `transcript` has behind the outbox (the changes that said them were in the
    /// journal lost), to be said again.
    func statusesBehind(in transcript: [TranscriptEntry]) async throws -> [DeliveryUpdate] {
        var updates: [DeliveryUpdate] = []
        for entry in transcript where entry.sender == .user && !entry.status.isFinal {
            guard let message = try await outbox.message(id: entry.id.value), message.status.rank > entry.status.rank else { continue }
            let detail =
                message.status.isFinal && message.status != .delivered
                ? "\(message.status.rawValue), as the outbox keeps it: what was said then was in a journal found damaged since" : nil
            updates.append(DeliveryUpdate(id: entry.id, status: message.status, detail: detail))
        }
        return updates
    }

    /// The replies a protod before this one was receiving, each with what tether-snapd kept of
    /// it: the reply as far as it came, should the gateway not send it again. At once when
    /// there are none; as they were when snapd does not answer in time.
    func keptReplies(_ saved: [SavedStream], deadline: Duration = .seconds(5)) async -> [SavedStream] {
        guard !saved.isEmpty else { return [] }
        if let reply = await askSnapd(until: ContinuousClock.now.advanced(by: deadline), SnapshotCommand.self, .init(frontEnd: "tether-protod", limit: 1)) {
            let kept = Dictionary(reply.streaming.compactMap { progress in progress.content.map { (progress.id, $0) } }) { first, _ in first }
            return saved.map { stream in
                var stream = stream
                stream.content = kept[stream.id]
                return stream
            }
        }
        logger.warning("tether-snapd did not say how far the replies streaming before came", metadata: ["protod.streams": "\(saved.count)"])
        return saved
    }

    /// Asks tether-snapd, which may be starting beside protod, again until `end`; nil when it
    /// never answered.
    private func askSnapd<Command: BusCommand>(
        until end: ContinuousClock.Instant, _ command: Command.Type, _ request: Command.Request
    ) async
        -> Command.Reply?
    {
        while ContinuousClock.now < end {
            if let reply = try? await bus.request(command, request, timeout: .seconds(2)) { return reply }
            try? await Task.sleep(for: .milliseconds(250))
        }
        return nil
    }
}
