import Foundation
import OpenClawWire
import ProtocolHandler
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// protod's decisions on an OpenClaw connection, event by event, with time passed in.
@Suite struct OpenClawDeliveryTests {
    typealias Machine = DeliveryStateMachine
    typealias Action = Machine.Action

    static let t0 = DeliveryStateMachineTests.t0
    static func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }
    static func milliseconds(_ seconds: Double) -> Int { Int((at(seconds).timeIntervalSince1970 * 1000).rounded()) }

    /// A machine, and the requests it wrote on each connection.
    struct Driver {
        var machine: Machine
        var now = 0.0
        var nextSequence = 1
        var connections: [Int: String] = [:]
        /// Requests written, by connection name: (id, method, params).
        var requests: [String: [(id: String, method: String, params: JSONValue?)]] = [:]
        var log: [Action] = []
        var eventSequence: [String: Int] = [:]
        let codec = OpenClawCodec()

        init(settings: Machine.Settings = Machine.Settings(probeAfter: 2, probeDeadline: 2, streamInterval: 0)) {
            machine = Machine(settings: settings, now: OpenClawDeliveryTests.t0)
        }

        @discardableResult
        mutating func handle(_ event: Machine.Event, at seconds: Double? = nil) -> [Action] {
            if let seconds { now = seconds }
            let actions = machine.handle(event, now: OpenClawDeliveryTests.at(now))
            if case .connectionUp(let epoch, let id, _) = event { connections[epoch] = id }
            for case .write(let frame) in actions {
                guard case .request(let id, let method, let params)? = try? codec.decode(frame.text) else { continue }
                requests[connections[frame.epoch ?? 0] ?? "?", default: []].append((id, method, params))
            }
            log += actions
            return actions
        }

        @discardableResult
        mutating func send(_ id: String, content: String? = nil) -> [Action] {
            let request = SendMessageCommand.Request(id: MessageID(id), content: content ?? "text of \(id)")
            guard case .commit = machine.admit(request, now: OpenClawDeliveryTests.at(now)) else { return [] }
            var message = DeliveryStateMachineTests.outboxMessage(id, sequence: nextSequence, createdAt: now)
            message.content = request.content
            // As protod commits it: in the session chosen when it was sent.
            message.session = machine.chosenSession
            nextSequence += 1
            return handle(.accepted(message, fallbackFrom: nil))
        }

        /// Opens an OpenClaw connection; `uptime` is how long the gateway has been running.
        /// `release`: the `server.version` it names, if any.
        mutating func connect(
            _ name: String, epoch: Int, protocolVersion: Int = 4, uptime: Double = 1000, release: String? = nil, methods: [String]? = nil,
            at seconds: Double? = nil
        ) {
            if let seconds { now = seconds }
            var gateway = GatewayInfo(
                dialect: .openclaw, protocolVersion: protocolVersion, uptimeMilliseconds: Int(uptime * 1000), tickIntervalMilliseconds: 30000,
                mainSessionKey: "agent:main:main", clockOffsetMilliseconds: 0)
            if release != nil || methods != nil { gateway.generation = GatewayGeneration(protocol: protocolVersion, release: release, methods: methods) }
            handle(.connectionUp(epoch: epoch, id: name, gateway: gateway))
            handle(.wirePath(heard: true))
        }

        /// The gateway's response to a request.
        @discardableResult
        mutating func respond(
            _ id: String, ok: Bool = true, _ payload: JSONValue? = nil, error: GatewayErrorShape? = nil, at seconds: Double? = nil
        ) -> [Action] {
            handle(.openClawFrame(.response(id: id, ok: ok, payload: payload, error: error)), at: seconds)
        }

        /// An event on connection `name`, numbered in order unless `sequence` says otherwise.
        @discardableResult
        mutating func event(_ name: String, _ payload: JSONValue?, on connection: String, sequence: Int? = nil, at seconds: Double? = nil) -> [Action] {
            let next = sequence ?? (eventSequence[connection] ?? 0) + 1
            eventSequence[connection] = next
            return handle(.openClawFrame(.event(name: name, payload: payload, seq: next)), at: seconds)
        }

        mutating func chat(_ payload: ChatEventPayload, on connection: String, sequence: Int? = nil, at seconds: Double? = nil) {
            event("chat", try? JSONValue(encoding: payload), on: connection, sequence: sequence, at: seconds)
        }

        /// An `agent` event of run `run` in the main session.
        mutating func agent(_ run: String, stream: String, _ data: [String: JSONValue], on connection: String, session: String = "agent:main:main") {
            let payload = AgentEventPayload(runId: run, seq: nil, stream: stream, ts: nil, data: .object(data), sessionKey: session)
            event("agent", try? JSONValue(encoding: payload), on: connection)
        }

        func updates(of id: String) -> [DeliveryUpdate] {
            log.compactMap { if case .publishDelivery(let update) = $0, update.id.value == id { update } else { nil } }
        }

        /// Answers the last history lookup on `connection` with `messages`.
        mutating func history(_ messages: [ChatTranscriptMessage], on connection: String, at seconds: Double? = nil) {
            guard let lookup = requests[connection]?.last(where: { $0.method == "chat.history" }) else {
                Issue.record("no history lookup on \(connection)")
                return
            }
            respond(lookup.id, try? JSONValue(encoding: ChatHistoryResult(sessionKey: "agent:main:main", sessionId: "s", messages: messages)), at: seconds)
        }

        func sent(on connection: String) -> [String] {
            (requests[connection] ?? []).filter { $0.method == "chat.send" }.compactMap { $0.params?["idempotencyKey"]?.stringValue }
        }

        func lookups(on connection: String) -> Int { (requests[connection] ?? []).count { $0.method == "chat.history" } }

        func deliveries(of id: String) -> [DeliveryStatus] {
            log.compactMap { if case .publishDelivery(let update) = $0, update.id.value == id { update.status } else { nil } }
        }

        func entries(where predicate: (TranscriptEntry) -> Bool = { _ in true }) -> [TranscriptEntry] {
            log.compactMap { if case .publishEntry(let entry) = $0, predicate(entry) { entry } else { nil } }
        }

        var botStates: [BotState] { log.compactMap { if case .retainBotState(let state) = $0 { state.state } else { nil } } }
    }

    /// The history of a session that had an exchange before: the gateway writes a user entry
    /// there when its run starts (a new session's first only with its reply).
    static var earlier: [ChatTranscriptMessage] { [user("earlier", at: -20), assistant("earlier reply", at: -19)] }

    static func user(_ text: String, at seconds: Double) -> ChatTranscriptMessage {
        ChatTranscriptMessage(role: "user", text: text, timestamp: milliseconds(seconds))
    }

    static func assistant(_ text: String, at seconds: Double) -> ChatTranscriptMessage {
        ChatTranscriptMessage(role: "assistant", text: text, timestamp: milliseconds(seconds))
    }

    static let started = try? JSONValue(encoding: ChatSendResult(runId: nil, status: "started"))

    static func delta(_ run: String, text: String, increment: String? = nil, replace: Bool? = nil, session: String = "agent:main:main") -> ChatEventPayload {
        ChatEventPayload(
            runId: run, sessionKey: session, seq: nil, state: .delta, message: ChatTranscriptMessage(role: "assistant", text: text, timestamp: nil),
            deltaText: increment, replace: replace)
    }

    static func final(_ run: String, text: String, session: String = "agent:main:main") -> ChatEventPayload {
        ChatEventPayload(
            runId: run, sessionKey: session, seq: nil, state: .final, message: ChatTranscriptMessage(role: "assistant", text: text, timestamp: nil))
    }

    @Test func nothingIsWrittenBeforeTheHistoryLookupThenChatSendCarriesTheMessageIDAsItsKey() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        #expect(driver.lookups(on: "c1") == 1)
        driver.send("m1")
        #expect(driver.sent(on: "c1").isEmpty, "written before the lookup was answered")
        driver.history([], on: "c1")
        #expect(driver.sent(on: "c1") == ["m1"])
        let request = try #require(driver.requests["c1"]?.first { $0.method == "chat.send" })
        #expect(request.params?["sessionKey"]?.stringValue == "agent:main:main")
        #expect(request.params?["message"]?.stringValue == "text of m1")
        #expect(driver.deliveries(of: "m1") == [.queued, .sent])
        driver.respond(request.id, Self.started)
        // `started` says the gateway has it; in a new session (its history empty) the 2026.4
        // gateway writes the first user entry only with the reply: its run says accepted, its
        // end delivered.
        #expect(driver.deliveries(of: "m1").last == .sent)
        #expect(driver.botStates.last == .thinking)
        driver.agent("m1", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        driver.chat(Self.delta("m1", text: "Hel", increment: "Hel"), on: "c1")
        #expect(driver.deliveries(of: "m1").last == .accepted && driver.machine.pendingCount == 1)
        #expect(driver.updates(of: "m1").count { $0.status == .accepted } == 1, "said once")
        #expect(driver.updates(of: "m1").last?.detail == "accepted: the gateway is running it; a new session keeps its first message only once the reply ends")
        driver.chat(Self.final("m1", text: "Hello"), on: "c1")
        #expect(driver.deliveries(of: "m1").last == .delivered && driver.machine.pendingCount == 0)
    }

    /// In a session that had an exchange before, the gateway writes the user entry as its run
    /// starts: the run's first event says delivered.
    @Test func inASessionWithHistoryTheRunStartingSaysDelivered() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history(Self.earlier, on: "c1")
        driver.send("m1")
        driver.respond("send:m1", Self.started)
        driver.agent("m1", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        #expect(driver.deliveries(of: "m1").last == .delivered && driver.machine.pendingCount == 0)
        #expect(!driver.deliveries(of: "m1").contains(.accepted))
        // The next message in a session that was new: its first run ended, so it has history now.
        var fresh = Driver()
        fresh.connect("c1", epoch: 1)
        fresh.history([], on: "c1")
        fresh.send("m1")
        fresh.respond("send:m1", Self.started)
        fresh.chat(Self.final("m1", text: "Hello"), on: "c1")
        fresh.send("m2")
        fresh.respond("send:m2", Self.started)
        fresh.agent("m2", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        #expect(fresh.deliveries(of: "m2").last == .delivered)
    }

    @Test(arguments: [3, 4]) func deltasMakeTheReplyAndTheFinalIsWholeAndNamesItsMessage(protocolVersion: Int) throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, protocolVersion: protocolVersion)
        driver.history([], on: "c1")
        driver.send("m1")
        driver.respond("send:m1", Self.started)
        driver.chat(Self.delta("m1", text: "Hel", increment: "Hel"), on: "c1")
        driver.chat(Self.delta("m1", text: "Hello", increment: "lo"), on: "c1")
        driver.chat(Self.delta("m1", text: "Hello wor", increment: " wor"), on: "c1")
        let streamed = driver.log.compactMap { if case .publishStream(let progress) = $0 { progress } else { nil } }.followedTexts
        #expect(streamed == ["Hel", "Hello", "Hello wor"])
        if protocolVersion == 4 {
            driver.chat(Self.delta("m1", text: "Goodbye", increment: "Good", replace: true), on: "c1")
            let last = driver.log.compactMap { if case .publishStream(let progress) = $0 { progress } else { nil } }.followedTexts.last
            #expect(last == "Good", "replace starts the reply again from this delta")
        }
        driver.chat(Self.final("m1", text: "Hello world"), on: "c1")
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.content == "Hello world" && reply.status == .received && reply.inReplyTo == MessageID("m1") && reply.attribution == .gateway)
        #expect(driver.botStates.last == .idle)
    }

    @Test func aMessageWhoseFateIsUnknownIsLookedUpFoundAndNotWrittenAgain() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1")
        #expect(driver.sent(on: "c1") == ["m1"])
        // The connection drops before the answer.
        driver.handle(.connectionDown, at: 1)
        driver.connect("c2", epoch: 2, at: 3)
        #expect(driver.sent(on: "c2").isEmpty)
        driver.history([Self.user("text of m1", at: 0.2), Self.assistant("You said: text of m1", at: 0.5)], on: "c2")
        #expect(driver.sent(on: "c2").isEmpty, "written again though the gateway has it")
        #expect(driver.deliveries(of: "m1").last == .delivered)
        let reply = try #require(driver.entries { $0.id.value == "m1:reply" }.last)
        #expect(reply.content == "You said: text of m1" && reply.inReplyTo == MessageID("m1"))
        // The user's own message is not published again under another id.
        #expect(driver.entries { $0.sender == .user && $0.id.value != "m1" }.isEmpty)
    }

    @Test func aMessageTheGatewayDoesNotHaveIsWrittenAgainWithTheSameKey() {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1")
        driver.send("m2")
        driver.handle(.connectionDown, at: 1)
        driver.connect("c2", epoch: 2, uptime: 0.5, at: 3)
        // The gateway restarted and had only m1.
        driver.history([Self.user("text of m1", at: 0.1)], on: "c2")
        #expect(driver.sent(on: "c2") == ["m2"])
        #expect(driver.deliveries(of: "m1").last == .delivered)
        #expect(driver.deliveries(of: "m2").last == .sent, "a message written again is still sent, never failed")
    }

    @Test func theSameTextSentBeforeIsNotTakenForTheMessageWhoseFateIsUnknown() {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1", content: "ok")
        driver.respond("send:m1", Self.started, at: 0.1)
        driver.chat(Self.final("m1", text: "fine"), on: "c1")
        driver.now = 0.3
        driver.send("m2", content: "ok")
        #expect(driver.sent(on: "c1") == ["m1", "m2"])
        driver.handle(.connectionDown, at: 10)
        driver.connect("c2", epoch: 2, at: 12)
        driver.history([Self.user("ok", at: 0.05), Self.assistant("fine", at: 0.2)], on: "c2")
        #expect(driver.sent(on: "c2") == ["m2"], "the earlier \"ok\" is m1's, not m2's")
    }

    @Test func aGapInsideAReplyKeepsItsTextAndTheReplyEndsOnceAndWhole() throws {
        var driver = Self.runStarted()
        driver.chat(Self.delta("m1", text: "one", increment: "one"), on: "c1")
        // Event 3 comes after 1: 2 is missing. It is m1's own delta: m1 has not ended.
        driver.chat(Self.delta("m1", text: "one two three", increment: " three"), on: "c1", sequence: 3)
        #expect(driver.lookups(on: "c1") == 1, "history looked up for a gap the arriving run's own event shows")
        #expect(driver.log.contains { if case .diagnose(let event) = $0 { event.kind == .sequenceGap } else { false } })
        let streamed = driver.log.compactMap { if case .publishStream(let progress) = $0 { progress } else { nil } }.followedTexts
        #expect(streamed.last == "one two three", "resynchronised from the delta's whole text, not \"one three\": \(streamed)")
        driver.chat(Self.final("m1", text: "one two three four"), on: "c1")
        let replies = driver.entries { $0.id.value == "m1:reply" }
        #expect(replies.map(\.content) == ["one two three four"], "the reply once: \(replies.map(\.content))")
    }

    /// A gap another event shows while a reply of Tether's is under way may hold that reply's
    /// end: the history is looked up, and the reply's text so far is kept.
    @Test func aGapWhileAReplyIsUnderWayLooksUpTheHistoryAndKeepsTheText() throws {
        var driver = Self.runStarted()
        driver.chat(Self.delta("m1", text: "one", increment: "one"), on: "c1")
        driver.event("tick", .object([:]), on: "c1", sequence: 5)
        #expect(driver.lookups(on: "c1") == 2)
        driver.history([Self.user("text of m1", at: 0), Self.assistant("one two", at: 0.5)], on: "c1")
        let replies = driver.entries { $0.id.value == "m1:reply" }
        #expect(replies.map(\.content) == ["one two"], "\(replies.map(\.content))")
        #expect(driver.botStates.last == .idle)
    }

    @Test func aReplyOpenWhenTheGatewayRestartedIsIncompleteAndOneStillRunningContinues() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1")
        driver.respond("send:m1", Self.started)
        driver.chat(Self.delta("m1", text: "partial", increment: "partial"), on: "c1")
        driver.handle(.connectionDown, at: 5)
        // Same gateway (up for 1000 s): the run goes on and its final comes on the new connection.
        driver.connect("c2", epoch: 2, uptime: 1000, at: 6)
        driver.history([Self.user("text of m1", at: 0)], on: "c2")
        #expect(driver.entries { $0.id.value == "m1:reply" }.isEmpty)
        driver.chat(Self.final("m1", text: "partial and the rest"), on: "c2")
        #expect(driver.entries { $0.id.value == "m1:reply" }.map(\.status) == [.received])

        driver.send("m2")
        driver.respond("send:m2", Self.started)
        driver.chat(Self.delta("m2", text: "cut", increment: "cut"), on: "c2")
        driver.handle(.connectionDown, at: 10)
        // A gateway up for 1 s started after the run: the run died with the old one.
        driver.connect("c3", epoch: 3, uptime: 1, at: 12)
        driver.history([Self.user("text of m1", at: 0), Self.assistant("partial and the rest", at: 7), Self.user("text of m2", at: 8)], on: "c3")
        let cut = try #require(driver.entries { $0.id.value == "m2:reply" }.last)
        #expect(cut.status == .incomplete && cut.content == "cut" && cut.detail?.contains("restarted") == true)
        #expect(driver.botStates.last == .idle)
        #expect(driver.entries { $0.id.value == "m1:reply" }.count == 1, "the reply already whole is not published again")
    }

    @Test func aNewSessionsFirstMessageTheRestartedGatewayNeverStoredIsWrittenAgainAndItsReplyAwaited() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1")
        driver.respond("send:m1", Self.started)
        driver.agent("m1", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        driver.chat(Self.delta("m1", text: "cut", increment: "cut"), on: "c1")
        // Never said delivered: the gateway keeps a new session's first message only with its reply.
        #expect(driver.deliveries(of: "m1").last == .accepted && driver.machine.pendingCount == 1)
        driver.handle(.connectionDown, at: 5)
        // The gateway restarted (up for 1 s): a brand-new session's first message is stored only
        // with its reply, so its history is empty.
        driver.connect("c2", epoch: 2, uptime: 1, at: 6)
        driver.history([], on: "c2")
        #expect(driver.entries { $0.id.value == "m1:reply" }.isEmpty, "the reply was ended although the message is to be run again")
        #expect(driver.sent(on: "c2") == ["m1"], "the lost message was not written again with its key")
        #expect(!driver.deliveries(of: "m1").contains(.delivered))
        driver.respond("send:m1", Self.started)
        driver.chat(Self.final("m1", text: "the whole reply"), on: "c2")
        #expect(driver.entries { $0.id.value == "m1:reply" }.map(\.content) == ["the whole reply"])
        #expect(driver.machine.pendingCount == 0)

        // A message the restarted gateway's history holds is not written again: its reply is cut.
        driver.send("m2")
        driver.respond("send:m2", Self.started)
        driver.chat(Self.delta("m2", text: "half", increment: "half"), on: "c2")
        driver.handle(.connectionDown, at: 10)
        driver.connect("c3", epoch: 3, uptime: 1, at: 12)
        driver.history(
            [Self.user("text of m1", at: 6.5), Self.assistant("the whole reply", at: 7), Self.user("text of m2", at: 8)], on: "c3")
        #expect(driver.sent(on: "c3").isEmpty)
        #expect(driver.entries { $0.id.value == "m2:reply" }.last?.status == .incomplete)
    }

    @Test func aRefusalFailsInWordsAndAbortsAndErrorsAreIncompleteInWords() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history([], on: "c1")
        driver.send("m1")
        driver.respond("send:m1", ok: false, error: GatewayErrorShape(code: "INVALID_REQUEST", message: "send blocked by session policy"))
        #expect(driver.deliveries(of: "m1").last == .failed)
        #expect(
            driver.log.contains {
                if case .publishDelivery(let update) = $0 { update.detail?.contains("send blocked by session policy") == true } else { false }
            })

        driver.send("m2")
        driver.respond("send:m2", Self.started)
        driver.chat(ChatEventPayload(runId: "m2", sessionKey: "agent:main:main", seq: 5, state: .aborted, stopReason: "rpc"), on: "c1")
        let aborted = try #require(driver.entries { $0.id.value == "m2:reply" }.last)
        #expect(aborted.status == .incomplete && aborted.detail == "the reply was stopped (chat.abort)")

        driver.send("m3")
        driver.respond("send:m3", Self.started)
        driver.chat(ChatEventPayload(runId: "m3", sessionKey: "agent:main:main", seq: 2, state: .error, errorMessage: "model overloaded"), on: "c1")
        let failed = try #require(driver.entries { $0.id.value == "m3:reply" }.last)
        #expect(failed.status == .incomplete && failed.detail == "the gateway reported an error: model overloaded")
        #expect(driver.deliveries(of: "m3").last == .delivered, "a run that failed still had its message")
    }

    @Test func otherSessionsAreIgnoredAndOtherClientsRunsComeFromTheHistoryOnce() {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history([], on: "c1")
        driver.chat(Self.final("x1", text: "elsewhere", session: "agent:main:other"), on: "c1")
        #expect(driver.entries().isEmpty && driver.lookups(on: "c1") == 1)
        // A run another client started in this session: its end brings a lookup.
        driver.chat(Self.delta("phone-1", text: "Hi from"), on: "c1")
        driver.chat(Self.final("phone-1", text: "Hi from the phone's run"), on: "c1")
        #expect(driver.lookups(on: "c1") == 2)
        let history = [Self.user("sent from the phone", at: 1), Self.assistant("Hi from the phone's run", at: 2)]
        driver.history(history, on: "c1")
        let entries = driver.entries()
        #expect(entries.count == 2)
        #expect(entries.first?.sender == .user && entries.first?.status == .delivered && entries.first?.content == "sent from the phone")
        #expect(entries.first?.author == HistoryMerge.anotherClient, "an entry none of Tether's, without a label, is not \"you\"")
        #expect(entries.last?.inReplyTo == nil && entries.last?.id.value.hasPrefix("oc:") == true, "another client's reply claims nothing")
        // The same history again adds nothing.
        driver.chat(Self.final("phone-2", text: "x"), on: "c1")
        driver.history(history, on: "c1")
        #expect(driver.entries().count == 2, "published again: \(driver.entries().map(\.id))")
    }

    /// The gateway runs one message at a time in a session and keeps what comes meanwhile in
    /// memory: Tether keeps it in its outbox instead, and writes it when the reply in progress ends.
    @Test func aMessageWaitsForTheReplyInProgressAndGetsARunOfItsOwn() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history([], on: "c1")
        for index in 1...3 { driver.send("m\(index)") }
        #expect(driver.sent(on: "c1") == ["m1"])
        let waiting = try #require(driver.updates(of: "m2").last)
        #expect(waiting.status == .queued && waiting.detail?.hasPrefix("waiting for the reply in progress") == true, "\(waiting)")
        #expect(driver.updates(of: "m2").count { $0.detail != nil } == 1, "said once")
        driver.respond("send:m1", Self.started)
        #expect(driver.sent(on: "c1") == ["m1"], "m1's run goes on")
        driver.chat(Self.delta("m1", text: "one"), on: "c1")
        #expect(driver.sent(on: "c1") == ["m1"])
        driver.chat(Self.final("m1", text: "one two"), on: "c1")
        #expect(driver.sent(on: "c1") == ["m1", "m2"])
        driver.respond("send:m2", Self.started)
        driver.chat(Self.final("m2", text: "three"), on: "c1")
        #expect(driver.sent(on: "c1") == ["m1", "m2", "m3"])
        #expect(driver.entries { $0.id.value.hasSuffix(":reply") }.map(\.inReplyTo?.value) == ["m1", "m2"])
    }

    @Test func anotherClientsRunHoldsTetherBackUntilItEnds() {
        var driver = Driver()
        driver.connect("c1", epoch: 1)
        driver.history([], on: "c1")
        driver.agent("phone-1", stream: "lifecycle", ["phase": .string("start")], on: "c1")
        driver.send("m1")
        #expect(driver.sent(on: "c1").isEmpty, "written while another client's run goes on")
        driver.chat(Self.delta("phone-1", text: "Hi"), on: "c1")
        #expect(driver.sent(on: "c1").isEmpty)
        driver.chat(Self.final("phone-1", text: "Hi there"), on: "c1")
        #expect(driver.sent(on: "c1") == ["m1"])
    }

    @Test func anotherClientsRunThatFallsSilentHoldsNothingBackForEver() {
        var driver = Driver(settings: Machine.Settings(probeAfter: 2, probeDeadline: 2, replyStallDeadline: 10, streamInterval: 0))
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.chat(Self.delta("phone-1", text: "Hi"), on: "c1")
        driver.send("m1")
        driver.handle(.tick, at: 9)
        #expect(driver.sent(on: "c1").isEmpty)
        driver.handle(.tick, at: 10.5)
        #expect(driver.sent(on: "c1") == ["m1"])
    }

    @Test func aSilentConnectionIsProbedWithAHealthRequestAndReplaced() {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1")
        driver.handle(.tick, at: 2)
        #expect((driver.requests["c1"] ?? []).contains { $0.method == "health" })
        driver.handle(.tick, at: 4)
        #expect(driver.log.contains { if case .reconnect = $0 { true } else { false } })
        #expect(driver.deliveries(of: "m1").last == .sent)
    }

    @Test func aHistoryAnswerThatNeverComesIsAskedForAgainSmaller() throws {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        // The gateway answers the probe (any frame counts) but the large history never arrives.
        driver.handle(.tick, at: 2)
        let probe = try #require(driver.requests["c1"]?.last { $0.method == "health" })
        driver.respond(probe.id, .object(["ok": .bool(true)]), at: 2.5)
        driver.handle(.tick, at: 4)
        let limits = (driver.requests["c1"] ?? []).filter { $0.method == "chat.history" }.compactMap { $0.params?["limit"]?.intValue }
        #expect(limits == [100, 25])
        #expect(driver.machine.nextDeadline != nil)
    }
}

extension OpenClawDeliveryTests {
    @Test func aMessageLargerThanTheGatewaysFramesIsRefusedAtSendTimeOrFailedUnwritten() {
        var driver = Driver()
        // Queued before any connection: the gateway's limit is not known yet.
        driver.send("big-early", content: String(repeating: "x", count: 2000))
        let gateway = GatewayInfo(dialect: .openclaw, protocolVersion: 4, maximumPayload: 1024, mainSessionKey: "agent:main:main")
        driver.handle(.connectionUp(epoch: 1, id: "c1", gateway: gateway))
        driver.handle(.wirePath(heard: true))
        driver.history([], on: "c1")
        #expect(driver.deliveries(of: "big-early").last == .failed)
        #expect(driver.sent(on: "c1").isEmpty)
        let refused = driver.machine.admit(
            SendMessageCommand.Request(id: MessageID("big"), content: String(repeating: "y", count: 2000)), now: OpenClawDeliveryTests.at(1))
        guard case .refuse(let refusal, _) = refused else {
            Issue.record("admitted: \(refused)")
            return
        }
        #expect(refusal.code == .tooLarge)
        #expect(refusal.description.contains("at most 1024 bytes"), "\(refusal)")
    }

    @Test func aLookupIsWidenedOnceAndThenWhatIsStillUnsureIsWrittenAgainWithItsKey() {
        var driver = Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history([], on: "c1")
        driver.send("m1")
        driver.handle(.connectionDown, at: 1)
        driver.connect("c2", epoch: 2, at: 200)
        // A full window of newer messages, starting after m1 was written: m1 may be older.
        let newer = (0..<100).map { OpenClawDeliveryTests.user("other \($0)", at: 100 + Double($0) / 10) }
        driver.history(newer, on: "c2")
        let limits = (driver.requests["c2"] ?? []).filter { $0.method == "chat.history" }.compactMap { $0.params?["limit"]?.intValue }
        #expect(limits == [100, 1000])
        #expect(driver.sent(on: "c2").isEmpty)
        // The gateway's whole history is no older: m1 is not there, and it is written again.
        driver.history(newer, on: "c2")
        #expect(driver.sent(on: "c2") == ["m1"])
        #expect((driver.requests["c2"] ?? []).count { $0.method == "chat.history" } == 2, "widened only once")
    }
}

extension OpenClawDeliveryTests {
    /// Whatever the gateway answers or not, a tick at the machine's deadline moves it on: no
    /// deadline is left in the past (a timer firing at once, over and over).
    @Test(arguments: ["nothing answered", "ticks but no history", "history then silence", "a reply growing then quiet"])
    func noDeadlineIsLeftDueAfterATick(scenario: String) {
        var driver = Driver(settings: Machine.Settings(probeAfter: 2, probeDeadline: 2, streamInterval: 0.05))
        driver.connect("c1", epoch: 1, at: 0)
        driver.send("m1")
        switch scenario {
        case "ticks but no history":
            for second in stride(from: 0.5, through: 6, by: 0.5) { driver.event("tick", .object([:]), on: "c1", at: second) }
        case "history then silence":
            driver.history([], on: "c1", at: 0.5)
        case "a reply growing then quiet":
            driver.history([], on: "c1", at: 0.1)
            driver.respond("send:m1", Self.started, at: 0.2)
            driver.chat(Self.delta("m1", text: "a", increment: "a"), on: "c1")
            driver.now = 0.21
            driver.chat(Self.delta("m1", text: "ab", increment: "b"), on: "c1")
        default:
            break
        }
        var ticks = 0
        while let next = driver.machine.nextDeadline, ticks < 100 {
            let seconds = next.timeIntervalSince(OpenClawDeliveryTests.t0)
            guard seconds < 60 else { break }
            driver.handle(.tick, at: max(driver.now, seconds))
            ticks += 1
            if let after = driver.machine.nextDeadline {
                #expect(after > OpenClawDeliveryTests.at(driver.now), "\(scenario): a deadline still due at \(driver.now) s after a tick")
                if after <= OpenClawDeliveryTests.at(driver.now) { return }
            }
        }
        #expect(ticks < 100, "\(scenario): \(ticks) ticks")
    }
}
