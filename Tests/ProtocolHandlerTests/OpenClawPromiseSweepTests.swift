import Foundation
import OpenClawWire
import ProtocolHandler
import Testing
import TetherSchema
import TetherWire

/// Every event in every situation on an OpenClaw connection, as the real gateway can produce
/// them (a busy session's empty final, follow-up turns, model failures, gaps, restarts): the
/// promises hold whatever comes.
@Suite struct OpenClawPromiseSweepTests {
    typealias Driver = OpenClawDeliveryTests.Driver
    typealias T = OpenClawDeliveryTests

    static let settings = DeliveryStateMachine.Settings(probeAfter: 2, probeDeadline: 2, replyStallDeadline: 30, streamInterval: 0.05)

    static func ready() -> Driver {
        var driver = Driver(settings: settings)
        driver.connect("c1", epoch: 1, protocolVersion: 3, at: 0)
        driver.history([], on: "c1", at: 0.1)
        return driver
    }

    static func lifecycle(_ phase: String, _ run: String) -> @Sendable (inout Driver) -> Void {
        { $0.agent(run, stream: "lifecycle", ["phase": .string(phase)], on: "c1") }
    }

    static let situations: [String: @Sendable (inout Driver) -> Void] = [
        "history lookup under way, one queued": {
            $0 = Driver(settings: settings); $0.connect("c1", epoch: 1, protocolVersion: 3, at: 0); $0.send("a")
        },
        "idle": { $0 = ready() },
        "one written, unanswered": {
            $0 = ready(); $0.send("a")
        },
        "a reply streaming, one behind it": {
            $0 = ready(); $0.send("a"); $0.respond("send:a", T.started); $0.chat(T.delta("a", text: "x"), on: "c1"); $0.send("b")
        },
        "one answered started, no sign of its run yet": {
            $0 = ready(); $0.send("a"); $0.respond("send:a", T.started)
        },
        "one in the gateway's queue": {
            $0 = ready(); $0.send("a"); $0.respond("send:a", T.started); $0.chat(T.emptyFinal("a"), on: "c1")
        },
        "another client's run, one held back": {
            $0 = ready(); lifecycle("start", "phone")(&$0); $0.send("a")
        },
        "the model failing": {
            $0 = ready(); $0.send("a"); $0.respond("send:a", T.started)
            $0.agent("a", stream: "lifecycle", ["phase": .string("error"), "error": .string("500")], on: "c1")
        },
        "bus path down, one written": {
            $0 = ready(); $0.send("a"); $0.handle(.wirePath(heard: false))
        },
        "probing a quiet connection": {
            $0 = ready(); $0.send("a"); $0.handle(.tick, at: 5)
        },
        "bus path down, one in the gateway's queue": {
            $0 = ready(); $0.send("a"); $0.respond("send:a", T.started); $0.chat(T.emptyFinal("a"), on: "c1"); $0.handle(.wirePath(heard: false))
        },
        "one in the gateway's queue, its session quiet since": {
            $0 = ready(); $0.send("a"); $0.respond("send:a", T.started); $0.chat(T.emptyFinal("a"), on: "c1"); $0.handle(.tick, at: 40)
        },
        "one in the gateway's queue, a new connection looking the history up": {
            $0 = ready(); $0.send("a"); $0.respond("send:a", T.started); $0.chat(T.emptyFinal("a"), on: "c1")
            $0.connect("c2", epoch: 2, protocolVersion: 3, uptime: 1000 + $0.now)
        },
        "written on a connection that ended, a new one looking the history up": {
            $0 = ready(); $0.send("a"); $0.connect("c2", epoch: 2, protocolVersion: 3, uptime: 1000 + $0.now)
        },
    ]

    static let events: [String: @Sendable (inout Driver) -> Void] = [
        "send": { $0.send("new") },
        "cancel all": { $0.handle(.cancel(nil)) },
        "connection down": { $0.handle(.connectionDown) },
        "new connection, same gateway": { $0.connect("c2", epoch: 2, protocolVersion: 3, uptime: 1000 + $0.now) },
        "new connection, restarted gateway": { $0.connect("c2", epoch: 2, protocolVersion: 3, uptime: 0.5) },
        "bus path lost": { $0.handle(.wirePath(heard: false)) },
        "bus path back": { $0.handle(.wirePath(heard: true)) },
        "started": { $0.respond("send:a", T.started) },
        "in flight": { $0.respond("send:a", try? JSONValue(encoding: ChatSendResult(runId: "a", status: "in_flight"))) },
        "cached ok": { $0.respond("send:a", try? JSONValue(encoding: ChatSendResult(runId: "a", status: "ok"))) },
        "refused": { $0.respond("send:a", ok: false, error: GatewayErrorShape(code: "INVALID_REQUEST", message: "send blocked by session policy")) },
        "empty final": { $0.chat(T.emptyFinal("a"), on: "c1") },
        "run starts": lifecycle("start", "a"),
        "delta": { $0.chat(T.delta("a", text: "x y"), on: "c1") },
        "final": { $0.chat(T.final("a", text: "x y z"), on: "c1") },
        "aborted": { $0.chat(ChatEventPayload(runId: "a", sessionKey: "agent:main:main", seq: nil, state: .aborted, stopReason: "rpc"), on: "c1") },
        "model error": { $0.agent("a", stream: "lifecycle", ["phase": .string("error"), "error": .string("500")], on: "c1") },
        "another client's run ends": { $0.chat(T.final("phone", text: "done"), on: "c1") },
        "a follow-up turn runs a": {
            lifecycle("start", "gw-1")(&$0); $0.chat(T.final("gw-1", text: "You said: text of a"), on: "c1")
        },
        "a gap": { $0.event("tick", .object([:]), on: "c1", sequence: 500) },
        "a chat event that does not decode": { $0.event("chat", .object(["runId": .number(7), "state": .string("sideways")]), on: "c1") },
        "an answer to a request never made": { $0.respond("history:99", nil) },
        "history holds a": {
            if $0.requests.values.flatMap({ $0 }).contains(where: { $0.method == "chat.history" }) {
                $0.history([T.user("text of a", at: 0.15), T.assistant("You said: text of a", at: 0.2)], on: $0.connections.values.max() ?? "c1")
            }
        },
        "history names a dropped at the cap": {
            let summary =
                "[Queued messages while agent was busy]\n\n[Queue overflow] Dropped 1 messages due to cap.\nSummary:\n- [Thu 2026-11-26 08:14 UTC] text of a"
            if $0.requests.values.flatMap({ $0 }).contains(where: { $0.method == "chat.history" }) {
                $0.history([T.user(summary, at: 0.3), T.assistant("ok", at: 0.4)], on: $0.connections.values.max() ?? "c1")
            }
        },
        "tick soon": { $0.handle(.tick, at: $0.now + 1) },
        "tick later": { $0.handle(.tick, at: $0.now + 5) },
        "tick after the stall deadline": { $0.handle(.tick, at: $0.now + 40) },
        "tick after the expiry": { $0.handle(.tick, at: $0.now + 4000) },
    ]

    static let pairs: [(String, String)] = situations.keys.sorted().flatMap { situation in events.keys.sorted().map { (situation, $0) } }

    /// Whatever the situation and the event (and a tick at whatever deadline it leaves): every
    /// frame written decodes; a message is written at most once on a connection; delivered only
    /// once its run showed or the gateway's
    /// transcript held it (or a cached answer said its run ended); failed only when refused or
    /// named dropped; no reply is an empty text said received; nothing is left due after a tick.
    @Test(arguments: pairs)
    func promisesHold(situation: String, event: String) throws {
        var driver = Driver(settings: Self.settings)
        let arrange = try #require(Self.situations[situation])
        let act = try #require(Self.events[event])
        arrange(&driver)
        act(&driver)
        driver.handle(.tick, at: driver.now + 0.5)
        if let next = driver.machine.nextDeadline { driver.handle(.tick, at: max(driver.now, next.timeIntervalSince(OpenClawDeliveryTests.t0))) }
        let deadline = driver.machine.nextDeadline
        #expect(deadline.map { $0 > OpenClawDeliveryTests.at(driver.now) } ?? true, "a tick left \(String(describing: deadline)) due")

        let codec = OpenClawCodec()
        for case .write(let frame) in driver.log {
            guard case .request? = try? codec.decode(frame.text) else {
                Issue.record("a frame that does not decode as a request: \(frame.text)")
                continue
            }
        }
        for (connection, requests) in driver.requests {
            // Writes of a message; `ask:` requests repeat the key of a run under way, whose
            // failure was heard on this connection, to learn whether it goes on: no copy.
            let keys = requests.filter { $0.method == "chat.send" && $0.id.hasPrefix("send:") }.compactMap { $0.params?["idempotencyKey"]?.stringValue }
            #expect(Set(keys).count == keys.count, "written twice on \(connection): \(keys)")
        }
        let ranRun =
            event == "run starts" || event == "delta" || event == "final" || event == "aborted" || event == "model error"
            || event == "cached ok" || event.hasPrefix("history holds") || event == "a follow-up turn runs a"
            || situation == "a reply streaming, one behind it" || situation == "the model failing"
        let written = Set(driver.requests.values.flatMap { $0 }.filter { $0.method == "chat.send" }.compactMap { $0.params?["idempotencyKey"]?.stringValue })
        for case .publishDelivery(let update) in driver.log {
            if update.status == .delivered, update.id.value == "a" {
                #expect(ranRun, "a said delivered with no sign it was stored")
            }
            if update.status == .failed || update.status == .expired {
                // Only a message never written expires.
                let allowed =
                    event == "refused" || event == "history names a dropped at the cap" || (update.status == .expired && !written.contains(update.id.value))
                #expect(allowed, "\(update.id) said \(update.status): \(update.detail ?? "")")
            }
        }
        for case .publishEntry(let entry) in driver.log where entry.sender != .user && entry.status == .received {
            #expect(!entry.content.isEmpty, "an empty reply said received: \(entry.id)")
        }
    }
}
