import Foundation
import ProtocolHandler
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// protod's decisions, event by event, with time passed in: no clock, no bus, no database.
@Suite struct DeliveryStateMachineTests {
    typealias Machine = DeliveryStateMachine
    typealias Action = Machine.Action

    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)
    static func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }
    static let settings = Machine.Settings(maximumQueued: 3, expiry: 60, probeAfter: 2, probeDeadline: 2, replyStallDeadline: 30, streamInterval: 0.05)

    /// A machine and what it wrote on each connection, for the tests to drive and read.
    struct Driver {
        var machine = Machine(settings: DeliveryStateMachineTests.settings, now: DeliveryStateMachineTests.t0)
        var now = 0.0
        var nextSequence = 1
        var connections: [Int: String] = [:]
        /// Chat messages written, by connection name, in order.
        var written: [String: [String]] = [:]
        var pings = 0
        var resumes = 0
        var log: [Action] = []

        @discardableResult
        mutating func handle(_ event: Machine.Event, at seconds: Double? = nil) -> [Action] {
            if let seconds { now = seconds }
            let actions = machine.handle(event, now: DeliveryStateMachineTests.at(now))
            if case .connectionUp(let epoch, let id, _) = event { connections[epoch] = id }
            for case .write(let frame) in actions {
                switch try? WireCodec().decode(frame.text) {
                case .chatMessage(let envelope)?: written[connections[frame.epoch ?? 0] ?? "?", default: []].append(envelope.payload.id.value)
                case .ping?: pings += 1
                case .sessionResume?: resumes += 1
                case nil: Issue.record("a frame that does not decode: \(frame.text)")
                default: break
                }
            }
            log += actions
            return actions
        }

        /// Sends a message through admission and commit, as protod's service does.
        @discardableResult
        mutating func send(_ id: String, strategy: DeliveryStrategy = .queued, kind: String? = nil) -> [Action] {
            let request = SendMessageCommand.Request(id: MessageID(id), content: "text of \(id)", strategy: strategy, kind: kind)
            guard case .commit(let chosen, let fallbackFrom) = machine.admit(request, now: DeliveryStateMachineTests.at(now)) else { return [] }
            let message = DeliveryStateMachineTests.outboxMessage(id, sequence: nextSequence, strategy: chosen, kind: kind, createdAt: now)
            nextSequence += 1
            return handle(.accepted(message, fallbackFrom: fallbackFrom))
        }

        mutating func connect(_ name: String, epoch: Int, at seconds: Double? = nil) {
            handle(.connectionUp(epoch: epoch, id: name), at: seconds)
            handle(.wirePath(heard: true))
        }

        mutating func frame(_ message: WireMessage, at seconds: Double? = nil) -> [Action] {
            handle(.frame(message), at: seconds)
        }

        mutating func tick(at seconds: Double) -> [Action] {
            handle(.tick, at: seconds)
        }

        func deliveries(of id: String) -> [DeliveryUpdate] {
            log.compactMap { if case .publishDelivery(let update) = $0, update.id.value == id { update } else { nil } }
        }

        func entries(where predicate: (TranscriptEntry) -> Bool) -> [TranscriptEntry] {
            log.compactMap { if case .publishEntry(let entry) = $0, predicate(entry) { entry } else { nil } }
        }

        var reconnects: [String] {
            log.compactMap { if case .reconnect(let reason) = $0 { reason } else { nil } }
        }
    }

    static func outboxMessage(
        _ id: String, sequence: Int, status: DeliveryStatus = .queued, strategy: DeliveryStrategy = .queued, kind: String? = nil,
        createdAt seconds: Double = 0, sentConnection: String? = nil
    ) -> OutboxMessage {
        OutboxMessage(
            id: id, sequence: sequence, content: "text of \(id)", createdAt: at(seconds), status: status, attempts: status == .sent ? 1 : 0,
            lastSentAt: status == .sent ? at(seconds) : nil, sentEpoch: nil, sentConnection: sentConnection, strategy: strategy.rawValue, kind: kind,
            retryAttempts: RetryPolicy.default.attempts, retryDelayMilliseconds: RetryPolicy.default.delayMilliseconds,
            retryTimeoutMilliseconds: RetryPolicy.default.timeoutMilliseconds, timeouts: 0)
    }

    static func ack(_ id: String, _ status: AckStatus = .received, sequence: Int) -> WireMessage {
        .messageAck(WireEnvelope(type: WireMessageType.messageAck.rawValue, sequence: sequence, payload: MessageAck(messageID: MessageID(id), status: status)))
    }

    static func chunk(_ stream: String, _ index: Int, _ text: String, final: Bool = false, replyTo: String? = nil, sequence: Int) -> WireMessage {
        .streamingChunk(
            WireEnvelope(
                type: WireMessageType.streamingChunk.rawValue, sequence: sequence,
                payload: StreamingChunk(messageID: MessageID(stream), chunkIndex: index, content: text, isFinal: final, replyTo: replyTo.map(MessageID.init))))
    }

    static let pong = WireMessage.pong(WireEnvelope(type: WireMessageType.pong.rawValue, sequence: 0, payload: HeartbeatPayload(timestamp: nil)))

    static func resumed(complete: Bool = true, session: String = "s1") -> WireMessage {
        .sessionResumed(
            WireEnvelope(
                type: WireMessageType.sessionResumed.rawValue, sequence: 0,
                payload: SessionResumed(sessionID: session, lastSequence: 0, replayed: 0, complete: complete)))
    }

    static func botState(_ state: BotState, sequence: Int) -> WireMessage {
        .botState(WireEnvelope(type: WireMessageType.botState.rawValue, sequence: sequence, payload: BotStateUpdate(state: state, botName: "Opta")))
    }

    /// A driver connected to a gateway that does (true) or does not (false) answer session.resume.
    static func connected(resuming: Bool) -> Driver {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        if resuming {
            _ = driver.frame(resumed())
        } else {
            _ = driver.tick(at: 2.5)  // no answer within the probe deadline: a seed-only peer
        }
        #expect(driver.machine.resumeSupport == (resuming ? .resumes : .replaysNothing))
        return driver
    }

    // MARK: Writing

    @Test func writesWhatWaitsInOrderOnceConnectedAndHeard() {
        var driver = Driver()
        driver.send("a")
        driver.send("b")
        #expect(driver.written.isEmpty, "nothing is written while disconnected")
        driver.handle(.connectionUp(epoch: 1, id: "c1"))
        #expect(driver.written.isEmpty, "nothing is written before frames reach connd")
        driver.handle(.wirePath(heard: true))
        #expect(driver.resumes == 1, "session.resume goes first")
        #expect(driver.written["c1"] == ["a", "b"])
        #expect(driver.deliveries(of: "a").map(\.status) == [.queued, .sent])
        #expect(driver.log.contains(.persistSent(ids: ["a", "b"], epoch: 1, connection: "c1", at: Self.at(0))))
    }

    @Test func theFrameGoesBeforeWhatIsJournaledAndTheDeliveredMarkBeforeItIsRecorded() {
        var driver = Self.connected(resuming: true)
        let accepted = driver.send("a")
        guard case .write(let frame)? = accepted.first else {
            Issue.record("the first action of a message accepted while connected is not its frame: \(accepted)")
            return
        }
        #expect(frame.text.contains("\"a\""))
        // What follows keeps its order: the entry, then queued, then sent, then the record of the write.
        let said = accepted.compactMap { action -> String? in
            switch action {
            case .publishEntry: "entry"
            case .publishDelivery(let update): update.status.rawValue
            case .persistSent: "persistSent"
            default: nil
            }
        }
        #expect(said == ["entry", "queued", "sent", "persistSent"])

        let acknowledged = driver.frame(Self.ack("a", sequence: 1))
        let delivered = acknowledged.firstIndex(of: .publishDelivery(DeliveryUpdate(id: MessageID("a"), status: .delivered)))
        let recorded = acknowledged.firstIndex(of: .persistDelivered(id: "a"))
        #expect(delivered != nil && recorded != nil && delivered! < recorded!, "\(acknowledged)")
    }

    @Test func aLateAcknowledgementProbesTheConnectionAndNeverWritesTwiceOnIt() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        #expect(driver.written["c1"] == ["a"])
        // The gateway answers every probe but acknowledges only after 60 s.
        var time = 2.5
        while time < 60 {
            time += 0.5
            let actions = driver.tick(at: time)
            if actions.contains(where: { if case .write = $0 { true } else { false } }) { _ = driver.frame(Self.pong) }
        }
        #expect(driver.written["c1"] == ["a"], "written again on the same connection")
        #expect(driver.pings > 5, "the connection was probed \(driver.pings) times")
        #expect(driver.reconnects.isEmpty)
        #expect(driver.deliveries(of: "a").map(\.status) == [.queued, .sent], "a message that reached the gateway was settled: \(driver.deliveries(of: "a"))")
        let overdue = driver.log.filter { if case .diagnose(let event) = $0 { event.kind == .acknowledgementOverdue } else { false } }
        #expect(overdue.count == 1)
        _ = driver.frame(Self.ack("a", sequence: 5), at: 61)
        #expect(driver.deliveries(of: "a").last?.status == .delivered)
        #expect(driver.machine.pendingCount == 0)
    }

    @Test func aSilentGatewayIsReplacedWithinTheProbeTimesAndTheMessageWrittenOnTheNextConnection() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        #expect(driver.tick(at: 3).isEmpty, "nothing due before the acknowledgement is late")
        _ = driver.tick(at: 4.5)
        #expect(driver.pings == 1)
        #expect(driver.reconnects.isEmpty)
        _ = driver.tick(at: 6.5)
        #expect(driver.reconnects.count == 1, "a connection that failed the probe is replaced")
        #expect(driver.reconnects.first?.contains("no ping") == true)
        _ = driver.tick(at: 10)
        #expect(driver.reconnects.count == 1, "asked once")
        driver.handle(.connectionDown, at: 10.2)
        driver.connect("c2", epoch: 2, at: 10.3)
        #expect(driver.written["c2"] == nil, "not before the new connection shows it is alive")
        #expect(driver.pings == 2)
        _ = driver.frame(Self.pong, at: 10.4)
        #expect(driver.written["c1"] == ["a"])
        #expect(driver.written["c2"] == ["a"], "the unacknowledged message goes again on the new connection, with its id")
        #expect(driver.deliveries(of: "a").map(\.status) == [.queued, .sent], "sent is said once")
    }

    /// A frame of megabytes takes seconds to reach the gateway on a loaded machine or a slow
    /// link: the probe behind it is given that time, so that a connection busy reading it is
    /// not replaced (and the frame written again, and again). A gateway that stays silent past
    /// the allowance is still found out.
    @Test func aProbeBehindALargeFrameWaitsForItToArrive() {
        var driver = Self.connected(resuming: false)
        var message = Self.outboxMessage("large", sequence: 1)
        // The seed dialect's frames are at most 1 MiB; OpenClaw's carry images of megabytes.
        message.content = String(repeating: "x", count: 1_000_000)
        driver.handle(.accepted(message, fallbackFrom: nil))
        #expect(driver.written["c1"] == ["large"])
        let allowance = Machine.transferAllowance(bytes: 1_000_000)
        #expect(allowance > 3.5 && allowance < 3.6, "\(allowance)")
        #expect(Machine.transferAllowance(bytes: 13_000_000) > 45, "two phone photos")
        // Written at 2.5 s: with the old deadlines the connection was replaced at 6.5 s.
        let writtenAt = driver.now
        var time = writtenAt
        while time < writtenAt + 2 + allowance + 2 {
            time += 0.25
            _ = driver.tick(at: time)
        }
        #expect(driver.reconnects.isEmpty, "replaced before the frame could have arrived and the probe behind it been answered")
        while time < writtenAt + 2 * (2 + allowance) + 4, driver.reconnects.isEmpty {
            time += 0.25
            _ = driver.tick(at: time)
        }
        #expect(driver.pings >= 1)
        #expect(driver.reconnects.count == 1, "a gateway silent past the allowance is replaced")
        #expect(Machine.transferAllowance(bytes: 60_000) == 0, "small frames get no allowance")
    }

    @Test func aSilentNewConnectionGetsNoCopyOfWhatAnEarlierOneMayHaveDelivered() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        _ = driver.tick(at: 5)
        _ = driver.tick(at: 7.5)
        #expect(driver.reconnects.count == 1)
        // Connection after connection as silent as the first: each is probed, none gets a copy.
        for attempt in 2...4 {
            driver.handle(.connectionDown)
            driver.connect("c\(attempt)", epoch: attempt, at: Double(attempt) * 10)
            _ = driver.tick(at: Double(attempt) * 10 + 2.5)
            #expect(driver.reconnects.count == attempt, "connection \(attempt) was not replaced")
        }
        #expect(driver.written.keys.sorted() == ["c1"], "copies written: \(driver.written)")
        // One that answers gets it, and a message sent meanwhile after it.
        driver.handle(.connectionDown)
        driver.connect("c5", epoch: 5, at: 50)
        driver.send("b")
        #expect(driver.written["c5"] == nil)
        _ = driver.frame(Self.pong, at: 50.1)
        #expect(driver.written["c5"] == ["a", "b"])
    }

    @Test func nextDeadlineSaysWhenToTick() {
        var driver = Self.connected(resuming: false)
        #expect(driver.machine.nextDeadline == nil, "nothing waits: no timer")
        driver.handle(.tick, at: 10)
        driver.send("a")
        #expect(driver.machine.nextDeadline == Self.at(12), "the acknowledgement is late at probeAfter")
        _ = driver.tick(at: 12)
        #expect(driver.machine.nextDeadline == Self.at(14), "the probe's deadline")
    }

    // MARK: Limits and endings

    @Test func theQueueLimitCountsOnlyMessagesNeverWritten() {
        var driver = Self.connected(resuming: false)
        for id in ["a", "b", "c", "d", "e"] { driver.send(id) }
        #expect(driver.written["c1"] == ["a", "b", "c", "d", "e"], "written at once: none counts against the limit")
        driver.handle(.connectionDown)
        for id in ["f", "g", "h"] { driver.send(id) }
        let request = SendMessageCommand.Request(id: MessageID("i"), content: "one too many")
        guard case .refuse(let refusal, let actions) = driver.machine.admit(request, now: Self.at(driver.now)) else {
            Issue.record("a fourth message never written was let in")
            return
        }
        #expect(refusal.code == .outboxFull)
        #expect(refusal.description.contains("outbox is full"))
        #expect(actions.contains { if case .diagnose(let event) = $0 { event.kind == .queueOverflow } else { false } })
        #expect(!driver.log.contains { if case .persistFinal = $0 { true } else { false } }, "nothing was dropped to make room")
        #expect(driver.machine.pendingCount == 8)
        #expect(driver.machine.queuedCount == 3)
    }

    @Test func dropOldestDropsOnlyMessagesNeverWrittenAndSaysSo() {
        var settings = Self.settings
        settings.whenFull = .dropOldest
        var driver = Driver(machine: Machine(settings: settings, now: Self.t0))
        driver.connect("c1", epoch: 1)
        _ = driver.tick(at: 2.5)
        driver.send("written")
        #expect(driver.machine.dropWarning(for: .sent) == nil, "a message already written is never dropped")
        driver.handle(.connectionDown)
        for id in ["a", "b", "c"] { driver.send(id) }
        #expect(driver.machine.queuedCount == 3)
        let warning = driver.machine.dropWarning(for: .queued)
        #expect(warning?.contains("the outbox keeps only the newest 3 messages waiting (drop-oldest)") == true, "\(warning ?? "")")
        let actions = driver.send("d")
        #expect(driver.deliveries(of: "a").last?.status == .failed)
        #expect(driver.deliveries(of: "a").last?.detail?.hasPrefix("dropped unsent: the outbox keeps the newest 3 messages waiting (drop-oldest)") == true)
        #expect(actions.contains { if case .persistFinal(let ids, .failed) = $0 { ids == ["a"] } else { false } }, "the drop is made durable")
        #expect(actions.contains { if case .diagnose(let event) = $0 { event.kind == .queueOverflow && event.messageID?.value == "a" } else { false } })
        #expect(driver.deliveries(of: "written").last?.status == .sent, "the written message is kept whatever the count")
        #expect(driver.machine.queuedCount == 3)
        #expect(driver.machine.pendingCount == 4)
    }

    @Test func refusingIsTheDefaultAndWarnsNobody() {
        var driver = Driver()
        driver.handle(.connectionDown)
        driver.send("a")
        #expect(driver.machine.dropWarning(for: .queued) == nil)
    }

    @Test func onlyMessagesNeverWrittenExpire() {
        var driver = Self.connected(resuming: false)
        driver.send("written")
        driver.handle(.connectionDown, at: 1)
        driver.send("queued")
        _ = driver.tick(at: 70)
        #expect(driver.deliveries(of: "queued").last?.status == .expired)
        #expect(driver.deliveries(of: "queued").last?.detail?.contains("never sent") == true)
        #expect(driver.deliveries(of: "written").last?.status == .sent, "a message that may have reached the gateway does not expire")
        #expect(driver.machine.status(of: "written") == .sent)
    }

    @Test func cancellingASentMessageSaysTheGatewayMayHaveIt() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        driver.handle(.connectionDown)
        driver.send("b")
        driver.handle(.cancel(nil))
        #expect(driver.deliveries(of: "a").last?.status == .cancelled)
        #expect(driver.deliveries(of: "a").last?.detail?.contains("may already have it") == true)
        #expect(driver.deliveries(of: "b").last?.detail == "cancelled")
        #expect(driver.log.contains(.persistFinal(ids: ["a", "b"], status: .cancelled)))
    }

    @Test func aRefusalByTheGatewayIsAFailureInItsWords() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        _ = driver.frame(Self.ack("a", .failed, sequence: 3))
        #expect(driver.deliveries(of: "a").last?.status == .failed)
        #expect(driver.deliveries(of: "a").last?.detail == "the gateway refused the message")
    }

    @Test func immediateWhileDisconnectedFailsOrFallsBack() {
        var driver = Driver()
        driver.send("now", strategy: .immediate)
        #expect(driver.deliveries(of: "now").last?.status == .failed)
        let request = SendMessageCommand.Request(id: MessageID("later"), content: "x", strategy: .immediate, fallback: .queued)
        #expect(driver.machine.admit(request, now: Self.at(0)) == .commit(.queued, fallbackFrom: .immediate))
    }

    @Test func latestOnlyKeepsTheNewestOfItsKind() {
        var driver = Driver()
        driver.send("t1", strategy: .latestOnly, kind: "typing")
        driver.send("t2", strategy: .latestOnly, kind: "typing")
        #expect(driver.deliveries(of: "t1").last?.status == .cancelled)
        driver.connect("c1", epoch: 1)
        #expect(driver.written["c1"] == ["t2"])
    }

    // MARK: The bus path and restarts

    @Test func framesPerhapsLostInTheBusReplaceTheConnectionOfASeedPeer() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        driver.handle(.wirePath(heard: false), at: 3)
        driver.send("b")
        driver.handle(.wirePath(heard: true), at: 4)
        #expect(driver.written["c1"] == ["a"], "nothing written twice on the connection, nothing new while it is doubtful")
        #expect(driver.reconnects.count == 1)
        driver.handle(.connectionDown)
        driver.connect("c2", epoch: 2)
        _ = driver.frame(Self.pong)
        #expect(driver.written["c2"] == ["a", "b"])
    }

    @Test func framesPerhapsLostInTheBusAreWrittenAgainToAGatewayThatDropsRepeats() {
        var driver = Self.connected(resuming: true)
        driver.send("a")
        driver.handle(.wirePath(heard: false), at: 3)
        driver.handle(.wirePath(heard: true), at: 4)
        #expect(driver.reconnects.isEmpty)
        #expect(driver.resumes == 2, "what the gateway sent meanwhile is asked for again")
        #expect(driver.written["c1"] == ["a", "a"])
    }

    @Test func aRestartedProtodDoesNotTrustWhatItsPredecessorWroteOnTheOpenConnection() {
        var driver = Driver()
        driver.handle(
            .started(pending: [Self.outboxMessage("a", sequence: 1, status: .sent, sentConnection: "c1")], session: .init(sessionID: nil, lastSequence: 0)))
        driver.connect("c1", epoch: 1)
        #expect(driver.written.isEmpty, "not until the gateway says whether it drops repeats")
        _ = driver.tick(at: 2.5)
        #expect(driver.reconnects.count == 1, "a seed peer: a new connection, then the message again")
        var resuming = Driver()
        resuming.handle(
            .started(pending: [Self.outboxMessage("a", sequence: 1, status: .sent, sentConnection: "c1")], session: .init(sessionID: "s1", lastSequence: 0)))
        resuming.connect("c1", epoch: 1)
        _ = resuming.frame(Self.resumed())
        #expect(resuming.written["c1"] == ["a"], "a gateway that drops repeats gets it again at once")
        #expect(resuming.reconnects.isEmpty)
    }

    // MARK: Replies

    @Test func aReplyIsAttributedExactlyWhereTheGatewaySaysAndByOrderWhereItDoesNot() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        driver.send("b")
        _ = driver.frame(Self.chunk("r-b", 0, "to b", final: true, replyTo: "b", sequence: 3))
        _ = driver.frame(Self.chunk("r-a", 0, "to a", final: true, sequence: 4))
        let replies = driver.entries { $0.sender != .user }
        #expect(replies.map(\.inReplyTo?.value) == ["b", "a"])
        #expect(replies.map(\.attribution) == [.gateway, .order])
        let streamed = driver.log.compactMap { if case .publishStream(let progress) = $0 { progress } else { nil } }
        #expect(streamed.map(\.inReplyTo?.value) == ["b", "a"])
    }

    @Test func aGatewayThatAcknowledgesAfterTheReplyGetsItsReplyAttributedToTheMessage() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        _ = driver.frame(Self.chunk("r", 0, "You said: ", sequence: 3))
        _ = driver.frame(Self.chunk("r", 1, "a", final: true, sequence: 4))
        _ = driver.frame(Self.ack("a", sequence: 5))
        let reply = driver.entries { $0.id.value == "r" }.last
        #expect(reply?.content == "You said: a")
        #expect(reply?.inReplyTo?.value == "a")
        #expect(driver.deliveries(of: "a").last?.status == .delivered)
    }

    @Test func aReplyInProgressIsCutWhenTheConnectionOfASeedPeerEnds() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        _ = driver.frame(Self.botState(.thinking, sequence: 2))
        _ = driver.frame(Self.chunk("r", 0, "You ", sequence: 3))
        driver.handle(.connectionDown, at: 3)
        let cut = driver.entries { $0.id.value == "r" }.last
        #expect(cut?.status == .incomplete)
        #expect(cut?.content == "You ")
        #expect(cut?.detail?.contains("connection ended") == true)
        #expect(driver.log.contains { if case .retainBotState(let state) = $0 { state.state == .idle } else { false } }, "the bot is no longer said to think")
        // A late chunk of it opens nothing.
        driver.connect("c2", epoch: 2)
        _ = driver.frame(Self.chunk("r", 1, "said", sequence: 4))
        #expect(driver.entries { $0.id.value == "r" }.count == 1)
    }

    @Test func aReplyInProgressWaitsForTheResumeOfAGatewayThatReplays() {
        var driver = Self.connected(resuming: true)
        driver.send("a")
        _ = driver.frame(Self.chunk("r", 0, "You ", sequence: 3))
        driver.handle(.connectionDown, at: 3)
        #expect(driver.entries { $0.id.value == "r" }.isEmpty)
        driver.connect("c2", epoch: 2, at: 4)
        #expect(driver.resumes == 2)
        _ = driver.frame(Self.chunk("r", 1, "said", final: true, sequence: 4))
        #expect(driver.entries { $0.id.value == "r" }.last?.status == .received)
        #expect(driver.entries { $0.id.value == "r" }.last?.content == "You said")
    }

    @Test func aResumeThatLostFramesCutsTheReply() {
        var driver = Self.connected(resuming: true)
        _ = driver.frame(Self.chunk("r", 0, "You ", sequence: 3))
        driver.handle(.connectionDown, at: 3)
        driver.connect("c2", epoch: 2, at: 4)
        _ = driver.frame(Self.resumed(complete: false, session: "s2"))
        #expect(driver.entries { $0.id.value == "r" }.last?.status == .incomplete)
        #expect(driver.entries { $0.id.value == "r" }.last?.detail?.contains("restarted") == true)
    }

    /// Frames dropped on the bus before protod read them (it fell behind a fast stream): a
    /// gateway that resumes is asked for what came after the last frame read, once.
    @Test func aJumpInTheGatewaysSequenceAsksAGatewayThatResumesForTheFramesBetween() {
        var driver = Self.connected(resuming: true)
        _ = driver.frame(Self.chunk("r", 0, "You ", sequence: 3))
        #expect(driver.resumes == 1)
        _ = driver.frame(Self.chunk("r", 4, "it", sequence: 7))
        _ = driver.frame(Self.chunk("r", 6, "so", final: true, sequence: 9))
        #expect(driver.resumes == 2, "asked once until answered")
        let asked = driver.log.compactMap { action -> Int? in
            guard case .write(let frame) = action, case .sessionResume(let envelope)? = try? WireCodec().decode(frame.text) else { return nil }
            return envelope.payload.lastSequence
        }
        #expect(asked.last == 3, "after the last frame read before the jump")
        _ = driver.frame(Self.resumed())
        // The replay: every frame after 3, those read already among them.
        for (index, text) in ["said ", "what ", "you ", "it", " and ", "so"].enumerated() {
            _ = driver.frame(Self.chunk("r", index + 1, text, final: index == 5, sequence: 4 + index))
        }
        #expect(driver.entries { $0.id.value == "r" }.count == 1)
        #expect(driver.entries { $0.id.value == "r" }.last?.content == "You said what you it and so")
    }

    @Test func aGatewayThatNoLongerHoldsTheFramesMissedCutsTheReplyInWordsThatSaySo() {
        var driver = Self.connected(resuming: true)
        _ = driver.frame(Self.chunk("r", 0, "You ", sequence: 3))
        _ = driver.frame(Self.chunk("r", 9, "so", sequence: 12))
        _ = driver.frame(Self.resumed(complete: false, session: "s1"))
        let cut = driver.entries { $0.id.value == "r" }.last
        #expect(cut?.status == .incomplete)
        #expect(cut?.content == "You ")
        #expect(cut?.detail == "the gateway no longer holds the part of the reply that tether-protod missed")
    }

    /// The seeds' JSON alone need not number frames one by one: a jump asks nothing of it.
    @Test func aJumpInTheSequenceOfAGatewayThatDoesNotResumeAsksNothing() {
        var driver = Self.connected(resuming: false)
        _ = driver.frame(Self.chunk("r", 0, "You ", sequence: 3))
        let before = driver.resumes
        _ = driver.frame(Self.chunk("r", 1, "said", final: true, sequence: 10))
        #expect(driver.resumes == before)
        #expect(driver.entries { $0.id.value == "r" }.last?.content == "You said")
    }

    @Test func theRepliesStreamingAreSavedAsTheyBeginAndEnd() {
        var driver = Self.connected(resuming: true)
        let saves = { (driver: Driver) in driver.log.compactMap { if case .saveOpenStreams(let streams) = $0 { streams } else { nil } } }
        _ = driver.frame(Self.chunk("r", 0, "You ", replyTo: "m1", sequence: 3))
        _ = driver.frame(Self.chunk("r", 1, "said ", sequence: 4))
        #expect(saves(driver) == [[SavedStream(id: MessageID("r"), inReplyTo: MessageID("m1"), attribution: .gateway, firstSequence: 3)]], "once, as it began")
        _ = driver.frame(Self.chunk("r", 2, "it", final: true, sequence: 5))
        #expect(saves(driver).last == [], "and again as it ended")
    }

    /// A protod killed mid-reply, and the gateway with it: the reply comes back as incomplete, as far as snapd kept it.
    @Test func aReplyAProtodBeforeWasReceivingIsCutAsFarAsItCameWhenTheGatewayLostIt() {
        var driver = Driver()
        let saved = SavedStream(id: MessageID("r"), inReplyTo: MessageID("m1"), attribution: .gateway, firstSequence: 3, content: "You said so")
        driver.handle(.started(pending: [], session: .init(sessionID: "s1", lastSequence: 2), openStreams: [saved]))
        driver.connect("c1", epoch: 1)
        _ = driver.frame(Self.resumed(complete: false, session: "s2"))
        let cut = driver.entries { $0.id.value == "r" }
        #expect(cut.count == 1)
        #expect(cut.last?.status == .incomplete)
        #expect(cut.last?.content == "You said so")
        #expect(cut.last?.inReplyTo == MessageID("m1"))
        #expect(cut.last?.detail?.contains("restarted") == true)
    }

    @Test func aReplyAProtodBeforeWasReceivingIsCutOnceTheGatewayIsKnownNotToResumeAndANewOneIsNot() {
        var driver = Driver()
        let saved = SavedStream(id: MessageID("old"), inReplyTo: MessageID("m1"), attribution: .order, firstSequence: 3, content: "You sa")
        driver.handle(.started(pending: [], session: .init(sessionID: "s1", lastSequence: 2), openStreams: [saved]))
        driver.connect("c1", epoch: 1)
        _ = driver.frame(Self.chunk("new", 0, "Hello", sequence: 1), at: 1)
        _ = driver.tick(at: 2.5)  // no answer to the resume within the probe deadline: a seed-only peer
        #expect(driver.entries { $0.id.value == "old" }.map(\.status) == [.incomplete])
        #expect(driver.entries { $0.id.value == "old" }.first?.content == "You sa")
        #expect(driver.entries { $0.id.value == "new" }.isEmpty, "a reply streaming on this connection may still come whole")
    }

    @Test func aReplyAProtodBeforeWasReceivingIsFinishedByTheGatewaysReplayAndKeepsWhoItAnswers() {
        var driver = Driver()
        let saved = SavedStream(id: MessageID("r"), inReplyTo: MessageID("m1"), attribution: .order, firstSequence: 3, content: "You ")
        driver.handle(.started(pending: [], session: .init(sessionID: "s1", lastSequence: 2), openStreams: [saved]))
        driver.connect("c1", epoch: 1)
        _ = driver.frame(Self.resumed())
        _ = driver.frame(Self.chunk("r", 0, "You ", sequence: 3))
        _ = driver.frame(Self.chunk("r", 1, "said it", final: true, sequence: 4))
        let entries = driver.entries { $0.id.value == "r" }
        #expect(entries.map(\.status) == [.received])
        #expect(entries.last?.content == "You said it")
        #expect(entries.last?.inReplyTo == MessageID("m1"))
        #expect(entries.last?.attribution == .order)
    }

    @Test func aReplyThatStopsGrowingIsProbedThenIncomplete() {
        var driver = Self.connected(resuming: true)
        _ = driver.frame(Self.chunk("r", 0, "You ", sequence: 3), at: 10)
        _ = driver.tick(at: 12)
        #expect(driver.pings == 1, "a reply that stops is a question about the connection")
        _ = driver.frame(Self.pong, at: 12.5)
        for second in stride(from: 13.0, through: 39.0, by: 1.0) {
            let actions = driver.tick(at: second)
            if actions.contains(where: { if case .write = $0 { true } else { false } }) { _ = driver.frame(Self.pong) }
        }
        #expect(driver.entries { $0.id.value == "r" }.isEmpty, "not cut before the stall deadline")
        _ = driver.tick(at: 40)
        let cut = driver.entries { $0.id.value == "r" }.last
        #expect(cut?.status == .incomplete)
        #expect(cut?.detail?.contains("the reply stopped") == true)
        #expect(driver.reconnects.isEmpty, "the connection answered: it stays")
    }

    @Test func aGrowingReplyIsPublishedAtMostOncePerInterval() {
        var driver = Self.connected(resuming: true)
        for index in 0..<10 { _ = driver.frame(Self.chunk("r", index, "\(index) ", sequence: 3 + index), at: 10 + Double(index) * 0.01) }
        var published = driver.log.compactMap { if case .publishStream(let progress) = $0 { progress } else { nil } }
        #expect(published.count == 2, "the first chunk at once, then one publication an interval")
        #expect(
            abs((driver.machine.nextDeadline ?? .distantPast).timeIntervalSince(Self.at(10.1))) < 0.001, "the next publication is one interval after the last")
        _ = driver.tick(at: 10.11)
        published = driver.log.compactMap { if case .publishStream(let progress) = $0 { progress } else { nil } }
        #expect(published.followedTexts.last == "0 1 2 3 4 5 6 7 8 9 ")
        #expect(published.map(\.chunk).joined() == "0 1 2 3 4 5 6 7 8 9 ", "each publication carries what was added")
    }

    // MARK: Every event in every situation

    /// Situations the machine can be in, each reached by a path of events.
    static let situations: [String: @Sendable (inout Driver) -> Void] = [
        "disconnected, nothing waiting": { _ in },
        "disconnected, one queued": { $0.send("a") },
        "connected to a seed peer, idle": { $0 = connected(resuming: false) },
        "connected to a seed peer, one awaiting its acknowledgement": {
            $0 = connected(resuming: false); $0.send("a")
        },
        "connected to a resuming peer, one awaiting its acknowledgement": {
            $0 = connected(resuming: true); $0.send("a")
        },
        "connected, probing": {
            $0 = connected(resuming: false); $0.send("a"); _ = $0.tick(at: 5)
        },
        "connected to a seed peer, reply streaming": {
            $0 = connected(resuming: false); $0.send("a"); _ = $0.frame(chunk("r", 0, "x ", sequence: 3))
        },
        "connected to a resuming peer, reply streaming": {
            $0 = connected(resuming: true); $0.send("a"); _ = $0.frame(chunk("r", 0, "x ", sequence: 3))
        },
        "bus path down, one written": {
            $0 = connected(resuming: false); $0.send("a"); $0.handle(.wirePath(heard: false))
        },
        "replacing the connection": {
            $0 = connected(resuming: false); $0.send("a"); _ = $0.tick(at: 5); _ = $0.tick(at: 8)
        },
        "written on a connection that ended, a new one not yet heard from": {
            $0 = connected(resuming: false); $0.send("a"); $0.connect("c2", epoch: 2)
        },
        "a restarted protod on the connection it wrote on": {
            $0.handle(
                .started(pending: [outboxMessage("a", sequence: 1, status: .sent, sentConnection: "c1")], session: .init(sessionID: nil, lastSequence: 0)))
            $0.nextSequence = 2
            $0.connect("c1", epoch: 1)
        },
        "a restarted protod, disconnected, one written before": {
            $0.handle(
                .started(pending: [outboxMessage("a", sequence: 1, status: .sent, sentConnection: "c0")], session: .init(sessionID: nil, lastSequence: 0)))
            $0.nextSequence = 2
        },
    ]

    static let events: [String: @Sendable (inout Driver) -> Void] = [
        "send": { $0.send("new") },
        "cancel all": { $0.handle(.cancel(nil)) },
        "connection up again": { $0.handle(.connectionUp(epoch: 1, id: "c1")) },
        "new connection": { $0.connect("c9", epoch: 9) },
        "connection down": { $0.handle(.connectionDown) },
        "bus path lost": { $0.handle(.wirePath(heard: false)) },
        "bus path back": { $0.handle(.wirePath(heard: true)) },
        "acknowledged": { _ = $0.frame(ack("a", sequence: 20)) },
        "refused": { _ = $0.frame(ack("a", .failed, sequence: 20)) },
        "chunk": { _ = $0.frame(chunk("r", 1, "y ", sequence: 21)) },
        "final chunk": { _ = $0.frame(chunk("r", 1, "y", final: true, sequence: 21)) },
        "pong": { _ = $0.frame(pong) },
        "a frame of a type it does not know": { _ = $0.frame(.unknown(type: "gateway.novelty", sequence: 22, data: Data("{}".utf8))) },
        "resumed": { _ = $0.frame(resumed()) },
        "resumed, frames lost": { _ = $0.frame(resumed(complete: false, session: "s9")) },
        "tick soon": { _ = $0.tick(at: $0.now + 1) },
        "tick later": { _ = $0.tick(at: $0.now + 5) },
        "tick after the stall deadline": { _ = $0.tick(at: $0.now + 40) },
        "tick after the expiry": { _ = $0.tick(at: $0.now + 4000) },
    ]

    static let pairs: [(String, String)] = situations.keys.sorted().flatMap { situation in events.keys.sorted().map { (situation, $0) } }

    /// Whatever the situation and the event (and a tick at any deadline it leaves): a message is never written twice on one
    /// connection of a peer that does not drop repeats, a message that may have reached the
    /// gateway is never said to have failed or expired unless the gateway refused it, and
    /// what is written keeps the order it was sent in.
    @Test(arguments: pairs)
    func promisesHold(situation: String, event: String) throws {
        var driver = Driver()
        let arrange = try #require(Self.situations[situation])
        let act = try #require(Self.events[event])
        arrange(&driver)
        act(&driver)
        _ = driver.tick(at: driver.now + 0.5)
        // After a tick nothing is still due: protod never spins on a deadline it will not act on.
        let deadline = driver.machine.nextDeadline
        #expect(deadline.map { $0 > Self.at(driver.now) } ?? true, "a tick left \(String(describing: deadline)) due")
        if driver.machine.resumeSupport != .resumes {
            for (connection, ids) in driver.written {
                #expect(Set(ids).count == ids.count, "written twice on \(connection): \(ids)")
            }
        }
        let everWritten = Set(driver.written.values.flatMap { $0 })
        let refused = event == "refused"
        for case .publishDelivery(let update) in driver.log where everWritten.contains(update.id.value) {
            let untrue = update.status == .expired || (update.status == .failed && !refused)
            #expect(!untrue, "\(update.id) may have reached the gateway but was said to be \(update.status): \(update.detail ?? "")")
        }
        for ids in driver.written.values {
            let order = ids.compactMap { id in ["a", "new"].firstIndex(of: id) }
            #expect(order == order.sorted(), "written out of order: \(ids)")
        }
        let replySettled = driver.log.contains {
            if case .publishEntry(let entry) = $0 { entry.id.value == "r" && entry.status.rank >= DeliveryStatus.incomplete.rank } else { false }
        }
        if event == "tick after the stall deadline", situation.contains("reply streaming") {
            #expect(replySettled, "a reply that stopped is settled in words")
        }
    }
}

extension DeliveryStateMachineTests {
    /// A gateway that knows only the seeds' JSON may never say the bot is idle: a whole reply does.
    @Test func aWholeReplyLeavesTheBotIdleThoughTheGatewayNeverSaysSo() {
        var driver = Self.connected(resuming: false)
        driver.send("a")
        _ = driver.frame(Self.botState(.thinking, sequence: 2))
        _ = driver.frame(Self.chunk("r", 0, "You said: ", sequence: 3))
        _ = driver.frame(Self.chunk("r", 1, "a", final: true, sequence: 4))
        let states = driver.log.compactMap { if case .retainBotState(let state) = $0 { state.state } else { nil } }
        #expect(states.last == .idle, "\(states)")
    }
}
