import Foundation
import ProtocolHandler
import Testing
import TetherSchema
import TetherTesting
import TetherWire

/// What a new outbox takes back from another store after the old one was found damaged.
@Suite struct OutboxRecoveryTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    static func entry(
        _ id: String, _ status: DeliveryStatus, at seconds: Double, sender: Sender = .user, author: String? = nil, images: Int = 0,
        session: String? = nil
    ) -> TranscriptEntry {
        TranscriptEntry(
            id: MessageID(id), sender: sender, content: "text of \(id)", timestamp: t0.addingTimeInterval(seconds), status: status, author: author,
            session: session, attachments: images == 0 ? nil : (1...images).map { AttachmentNote(name: "cat\($0).png", mimeType: "image/png", bytes: 100) })
    }

    @Test func theUsersUnconfirmedMessagesComeBackUnderTheirOwnIdsInTheOrderTheyWereMade() {
        let known = [
            Self.entry("m3", .sent, at: 3, session: "agent:main:main"),
            Self.entry("m1", .queued, at: 1),
            Self.entry("m2", .accepted, at: 2),
            Self.entry("done", .delivered, at: 0),
            Self.entry("refused", .failed, at: 0.5),
            Self.entry("reply", .received, at: 1.5, sender: .bot(name: "Opta")),
            Self.entry("theirs", .queued, at: 2.5, author: "openclaw-tui"),
            Self.entry("held", .queued, at: 2.7),
        ]
        let plan = OutboxRecovery.plan(known: known, held: ["held"], source: "the journal", retry: .default)
        #expect(plan.messages.map(\.id) == ["m1", "m2", "m3"])
        #expect(plan.messages.map(\.status) == [.queued, .accepted, .sent], "each keeps the mark it had: one written is looked up or sent with its id")
        #expect(plan.messages.map(\.attempts) == [0, 1, 1])
        #expect(plan.messages.map(\.content) == ["text of m1", "text of m2", "text of m3"])
        #expect(plan.messages.last?.session == "agent:main:main")
        #expect(plan.messages.first?.createdAt == Self.t0.addingTimeInterval(1))
        #expect(plan.lost.isEmpty)
        #expect(plan.toSend.count == 3)
    }

    @Test func aMessageWhoseImagesWereInTheOutboxAloneIsLostInWordsThatSayWhetherItWasSent() {
        let known = [Self.entry("never", .queued, at: 1, images: 1), Self.entry("written", .sent, at: 2, images: 2), Self.entry("plain", .queued, at: 3)]
        let plan = OutboxRecovery.plan(known: known, held: [], source: "the conversation journal", retry: .default)
        #expect(plan.messages.map(\.id) == ["never", "written", "plain"])
        #expect(plan.messages.map(\.status) == [.lost, .lost, .queued], "a lost one is kept in the outbox, so the same id is never sent without its images")
        #expect(plan.toSend.map(\.id) == ["plain"])
        #expect(plan.lost.map(\.id) == [MessageID("never"), MessageID("written")])
        #expect(plan.lost.allSatisfy { $0.status == .lost })
        #expect(
            plan.lost[0].detail
                == "lost with the damaged outbox: its image was kept there alone, so the conversation journal cannot give it back whole; it was never sent: send it again"
        )
        #expect(
            plan.lost[1].detail
                == "lost with the damaged outbox: its 2 images were kept there alone, so the conversation journal cannot give it back whole; it was sent before, and the gateway may have it"
        )
    }

    @Test func theSameIdTwiceComesBackOnce() {
        let plan = OutboxRecovery.plan(known: [Self.entry("m1", .queued, at: 1), Self.entry("m1", .sent, at: 1)], held: [], source: "s", retry: .default)
        #expect(plan.messages.map(\.id) == ["m1"])
    }

    @Test func readBackAndRecoveredMessagesAreMergedInTheOrderTheyWereMade() {
        func message(_ id: String, sequence: Int, at seconds: Double) -> OutboxMessage {
            OutboxMessage(
                id: id, sequence: sequence, content: id, createdAt: Self.t0.addingTimeInterval(seconds), status: .queued, attempts: 0, lastSentAt: nil,
                sentEpoch: nil, sentConnection: nil, strategy: "queued", kind: nil, retryAttempts: 3, retryDelayMilliseconds: 200,
                retryTimeoutMilliseconds: 10_000, timeouts: 0)
        }
        let merged = OutboxRecovery.merged(
            [message("a", sequence: 4, at: 1), message("c", sequence: 6, at: 3)], [message("b", sequence: 0, at: 2), message("d", sequence: 0, at: 3)])
        #expect(merged.map(\.id) == ["a", "b", "c", "d"])
    }

    @Test func theWordsSayWhatCameFromWhereAndWhatWasLost() {
        #expect(
            OutboxRecovery.words(salvaged: 0, recovered: 5, lost: 0, toSend: 5, source: "the conversation journal")
                == "no message could be read from it; the conversation journal held 5 messages never confirmed, put back under their own ids; 5 messages to be sent; any that neither held are lost"
        )
        #expect(
            OutboxRecovery.words(salvaged: 2, recovered: 1, lost: 1, toSend: 2, source: "the conversation journal")
                == "2 messages read back from it; the conversation journal held 1 more message never confirmed, put back under its own id; 1 of them cannot be sent again (images kept in the outbox alone) and is marked lost; 2 messages to be sent; any that neither held are lost"
        )
        #expect(
            OutboxRecovery.words(salvaged: 3, recovered: 0, lost: 0, toSend: 3, source: "the conversation journal")
                == "3 messages read back from it; the conversation journal held no other message waiting; 3 messages to be sent; any that neither held are lost"
        )
    }

    @Test func theMachineSaysEachLostMessageAndTheHealthIsNoLongerHealthy() {
        var machine = DeliveryStateMachine(settings: .init(), now: Self.t0)
        _ = machine.handle(.started(pending: [], session: .init(sessionID: nil, lastSequence: 0)), now: Self.t0)
        let lost = DeliveryUpdate(id: MessageID("x"), status: .lost, detail: "lost with the damaged outbox: …")
        let actions = machine.handle(.outboxWasDamaged(lost: [lost]), now: Self.t0)
        #expect(actions.contains(.publishDelivery(lost)))
        #expect(actions.contains(.retainSummary(OutboxSummary(pending: 0, undelivered: ["lost": 1], lastUndelivered: lost))))
        #expect(machine.healthState == .degraded)
        let reports = actions.compactMap { if case .retainHealth(let report) = $0 { report } else { nil } }
        #expect(reports.last?.state == .degraded)
        #expect(reports.count == 1, "said once, as it changed")
    }

    @Test func aDamagedOutboxThatLostNothingKnownIsDegradedUntilDeliveriesSucceed() {
        var machine = DeliveryStateMachine(settings: .init(), now: Self.t0)
        _ = machine.handle(.started(pending: [], session: .init(sessionID: nil, lastSequence: 0)), now: Self.t0)
        _ = machine.handle(.outboxWasDamaged(lost: []), now: Self.t0)
        #expect(machine.healthState == .degraded, "what the damage took is not known")
    }

    @Test func whatTheTranscriptGivesBackLaterIsCountedIntoTheWords() {
        let replaced = ReplacedDatabase(file: "/s/protod.sqlite", movedTo: "/s/protod.sqlite.damaged-1", problem: "the file is empty", words: "", at: Self.t0)
        var outcome = OutboxRecoveryOutcome(replaced: replaced, salvaged: 0, recovered: 0, source: "the conversation journal", toSend: 0, lost: [])
        let plan = OutboxRecovery.plan(
            known: [Self.entry("b1", .queued, at: 1), Self.entry("b2", .queued, at: 2), Self.entry("img", .queued, at: 3, images: 1)], held: [],
            source: "the transcript", retry: .default)
        outcome.add(plan, added: ["b1", "b2", "img"], from: "the transcript")
        #expect(
            outcome.words
                == "the outbox (/s/protod.sqlite) was damaged (the file is empty): it was set aside as /s/protod.sqlite.damaged-1 and a new one started; "
                + "no message could be read from it; the transcript held 3 messages never confirmed, put back under their own ids; "
                + "1 of them cannot be sent again (images kept in the outbox alone) and is marked lost; 2 messages to be sent; any that neither held are lost")
        #expect(outcome.lost.map(\.id) == [MessageID("img")])
    }
}
