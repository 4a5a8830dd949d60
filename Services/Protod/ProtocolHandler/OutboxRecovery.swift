public import Foundation
public import TetherSchema
public import TetherStorage
import TetherWire

/// What a new outbox takes in when the old one was found damaged: the messages another
/// store still holds that the gateway never confirmed, put back under their own ids (so the
/// gateway's idempotency still holds when one is written again), and, message by message,
/// those that cannot be sent again, kept in the outbox as `lost`.
///
/// A decision only: the caller reads the stores and writes the outbox.
public struct OutboxRecovery: Sendable, Equatable {
    /// The messages to put into the outbox, oldest first: those to send again (queued, sent
    /// or accepted, as the other store last knew them) and those lost.
    public var messages: [OutboxMessage]
    /// How the messages that cannot be sent again end, in words.
    public var lost: [DeliveryUpdate]

    /// The messages that will be sent again.
    public var toSend: [OutboxMessage] { messages.filter { $0.status != .lost } }

    /// Decides what comes back from `known`, the entries of another store (the conversation
    /// journal, the transcript), as that store last knew them.
    ///
    /// - Parameters:
    ///   - held: ids the new outbox holds already (read back from the damaged file, or
    ///     recovered before): the outbox knows them better, and they are left as they are.
    ///   - source: the store the entries come from, for the words (`the conversation journal`).
    ///   - retry: the retry policy of a message put back (the store does not keep the one it had).
    public static func plan(known: [TranscriptEntry], held: Set<String>, source: String, retry: RetryPolicy) -> OutboxRecovery {
        var recovery = OutboxRecovery(messages: [], lost: [])
        var seen = held
        for entry in known.sorted(by: { $0.timestamp < $1.timestamp })
        where entry.isTethers && entry.tool == nil && [.queued, .sent, .accepted].contains(entry.status) {
            guard seen.insert(entry.id.value).inserted else { continue }
            let written = entry.status != .queued
            var message = OutboxMessage(
                id: entry.id.value, sequence: 0, content: entry.content, createdAt: entry.timestamp, status: entry.status, attempts: written ? 1 : 0,
                lastSentAt: nil, sentEpoch: nil, sentConnection: nil, strategy: DeliveryStrategy.queued.rawValue, kind: nil,
                retryAttempts: retry.attempts, retryDelayMilliseconds: retry.delayMilliseconds, retryTimeoutMilliseconds: retry.timeoutMilliseconds,
                timeouts: 0, session: entry.session)
            if let images = entry.attachments, !images.isEmpty {
                // Only the outbox kept the images' bytes: the text alone is not what was sent.
                message.status = .lost
                let what = images.count == 1 ? "its image was" : "its \(images.count) images were"
                let detail =
                    "lost with the damaged outbox: \(what) kept there alone, so \(source) cannot give it back whole; "
                    + (written ? "it was sent before, and the gateway may have it" : "it was never sent: send it again")
                recovery.lost.append(DeliveryUpdate(id: entry.id, status: .lost, detail: detail))
            }
            recovery.messages.append(message)
        }
        return recovery
    }

    /// The messages read back from the damaged file and those recovered from other stores,
    /// in the order they were made (the damaged file's own order where times are equal).
    public static func merged(_ salvaged: [OutboxMessage], _ recovered: [OutboxMessage]) -> [OutboxMessage] {
        let ordered = salvaged.map { (0, $0) } + recovered.map { (1, $0) }
        return ordered.sorted { left, right in
            left.1.createdAt != right.1.createdAt
                ? left.1.createdAt < right.1.createdAt
                : (left.0, left.1.sequence) < (right.0, right.1.sequence)
        }.map(\.1)
    }

    /// What a damaged outbox gave back, in words: `3 messages read back from it; the
    /// conversation journal held 2 more never confirmed, put back under their own ids; 5 to
    /// be sent; 1 lost with it, marked lost; any that neither held are lost`.
    public static func words(salvaged: Int, recovered: Int, lost: Int, toSend: Int, source: String) -> String {
        var parts = [salvaged == 0 ? "no message could be read from it" : "\(count(salvaged)) read back from it"]
        if recovered > 0 {
            parts.append(
                "\(source) held \(count(recovered, salvaged > 0 ? "more " : "")) never confirmed, put back under \(recovered == 1 ? "its own id" : "their own ids")"
            )
        } else {
            parts.append("\(source) held no other message waiting")
        }
        if lost > 0 {
            parts.append("\(lost) of them cannot be sent again (images kept in the outbox alone) and \(lost == 1 ? "is" : "are") marked lost")
        }
        parts.append("\(count(toSend)) to be sent")
        parts.append("any that neither held are lost")
        return parts.joined(separator: "; ")
    }

    private static func count(_ number: Int, _ qualifier: String = "") -> String {
        "\(number) \(qualifier)message\(number == 1 ? "" : "s")"
    }
}

/// What a damaged outbox got back, as far as it is known: counted for the words, with the
/// messages to be said lost.
public struct OutboxRecoveryOutcome: Sendable, Equatable {
    /// The file set aside.
    public var replaced: ReplacedDatabase
    /// Messages read back from the damaged file.
    public var salvaged: Int
    /// Messages another store held that the outbox took back (those lost among them).
    public var recovered: Int
    /// The stores they came from, for the words (`the conversation journal`).
    public var source: String
    /// Messages that will be sent.
    public var toSend: Int
    /// Messages that cannot be sent again, as they are to be said.
    public var lost: [DeliveryUpdate]

    public init(replaced: ReplacedDatabase, salvaged: Int, recovered: Int, source: String, toSend: Int, lost: [DeliveryUpdate]) {
        self.replaced = replaced
        self.salvaged = salvaged
        self.recovered = recovered
        self.source = source
        self.toSend = toSend
        self.lost = lost
    }

    /// What is said of the outbox on `storage`.
    public var words: String {
        StoredDatabase.damageWords(
            what: "the outbox", path: replaced.file, problem: replaced.problem, movedTo: replaced.movedTo ?? "?",
            recovered: OutboxRecovery.words(salvaged: salvaged, recovered: recovered, lost: lost.count, toSend: toSend, source: source))
    }

    /// Counts in what a later recovery (from the transcript) took back.
    public mutating func add(_ recovery: OutboxRecovery, added: Set<String>, from source: String) {
        let lostNow = recovery.lost.filter { added.contains($0.id.value) }
        recovered += added.count
        toSend += added.count - lostNow.count
        lost += lostNow
        self.source = recovered == added.count ? source : "\(self.source) and \(source)"
    }
}

/// The stores protod found damaged at start, set aside and made anew.
public struct DamagedStores: Sendable {
    /// The outbox was: what it got back, and what is to be said lost; nil when it was sound.
    public var outbox: OutboxRecoveryOutcome?
    /// The conversation journal was: protod asks tether-snapd's transcript what it published
    /// before (and, with the outbox damaged too, what was never confirmed).
    public var journal: Bool

    public init(outbox: OutboxRecoveryOutcome? = nil, journal: Bool = false) {
        self.outbox = outbox
        self.journal = journal
    }
}
