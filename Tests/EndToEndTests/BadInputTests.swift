import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// Text from outside never drives the user's terminal, and input that is not text is refused
/// in words, not rewritten.
@Suite(.serialized) struct BadInputTests {
    /// What the development bot echoes back: an escape sequence that would turn the terminal
    /// red, a bell, a carriage return that would overwrite the line, a bidirectional override.
    static let hostile = "red \u{1B}[31mALERT\u{1B}[0m bell\u{07} cr\r over \u{202E}txet"
    /// The same as a terminal must show it.
    static let shown = "red ^[[31mALERT^[[0m bell^G cr^M over <U+202E>txet"

    @Test func escapeSequencesFromTheGatewayAreShownNotObeyed() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let send = try set.tether(["send", Self.hostile])
        #expect(send.status == 0, "\(send.standardError)")
        #expect(send.standardOutput == "You said: \(Self.shown)\n", "\(send.standardOutput)")
        #expect(!send.standardOutput.contains("\u{1B}") && !send.standardOutput.contains("\u{07}") && !send.standardOutput.contains("\r"))

        let watch = try ChildProcess(Programs.path("tether"), ["watch", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "watch")
        let watched = await eventually { watch.standardOutput.contains("Opta: You said: \(Self.shown)") }
        watch.stop()
        #expect(watched, "\(watch.standardOutput)")
        #expect(!watch.standardOutput.contains("\u{1B}"))

        let input = set.run.path + "/plain-input"
        try "\(Self.hostile) again\n".write(toFile: input, atomically: true, encoding: .utf8)
        let plain = try ChildProcess(
            Programs.path("tether"), ["--plain", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "plain", standardInput: input)
        #expect(try plain.waitForExit(timeout: .seconds(40)) == 0)
        #expect(plain.standardOutput.contains("You said: \(Self.shown) again"), "\(plain.standardOutput)")
        #expect(!plain.standardOutput.contains("\u{1B}"))

        let tap = try ChildProcess(Programs.path("tether-tap"), ["--run-dir", set.run.path, "conv.message"], outputDirectory: set.run.path, name: "tap")
        try await Task.sleep(for: .milliseconds(500))
        #expect(try set.tether(["send", "tap", Self.hostile]).status == 0)
        let tapped = await eventually { tap.standardOutput.contains("tap red") }
        tap.stop()
        #expect(tapped, "\(tap.standardOutput)")
        // The tap's own colours aside (it is not a terminal here, so it writes none), no escape from a body.
        #expect(!tap.standardOutput.contains("\u{1B}"), "\(tap.standardOutput)")
        #expect(!tap.standardOutput.contains("\u{202E}"))

        guard Tmux.available else { return }
        let ui = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 120, rows: 20, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        // The bot's reply is Markdown, where a carriage return ends a line: it joins the next as a space.
        let screen = try await ui.waitFor("Opta: You said: \(Self.shown.replacingOccurrences(of: "^M", with: ""))")
        #expect(screen.contains("You: \(Self.shown)"), "\(screen)")
    }

    @Test func invalidUTF8AndBlankMessagesAreRefusedInWords() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        // The shell hands the bytes over as they are: 0xFF is never UTF-8.
        let invalid = try ChildProcess(
            "/bin/sh", ["-c", #"exec "$0" send --run-dir "$1" "$(printf 'caf\351')""#, Programs.path("tether"), set.run.path],
            outputDirectory: set.run.path, name: "invalid")
        #expect(try invalid.waitForExit(timeout: .seconds(20)) != 0)
        #expect(invalid.standardError.contains("not valid UTF-8"), "\(invalid.standardError)")
        let blank = try set.tether(["send", "\n  \n"])
        #expect(blank.status != 0)
        #expect(blank.standardError.contains("the message is empty"), "\(blank.standardError)")

        let input = set.run.path + "/plain-input"
        _ = FileManager.default.createFile(atPath: input, contents: Data([0x63, 0x61, 0x66, 0xE9, 0x0A]) + Data("after it\n".utf8))
        let plain = try ChildProcess(
            Programs.path("tether"), ["--plain", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "plain", standardInput: input)
        #expect(try plain.waitForExit(timeout: .seconds(40)) == 0)
        #expect(plain.standardOutput.contains("Not sent: the line is not valid UTF-8 text."), "\(plain.standardOutput)")
        #expect(plain.standardOutput.contains("You said: after it"), "the next line still goes: \(plain.standardOutput)")
        let received = set.gatewayRecord().compactMap { $0["content"] as? String }
        #expect(received == ["after it"], "the gateway received \(received)")
    }
}

/// A message the sender was told is queued is never dropped in silence.
@Suite(.serialized) struct QueuePromiseTests {
    @Test func beyondTheLimitMessagesAreRefusedAtSendTimeAndTheAcceptedAreAllDeliveredOnce() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let bus = try BusClient(source: "promise-test", runDirectory: set.run.runDirectory, logger: Logger(label: "promise-test"))
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        #expect(try set.tether(["suspend"]).status == 0)
        var accepted: [MessageID] = []
        var refused: [String] = []
        for index in 1...160 {
            let id = MessageID.random()
            do {
                _ = try await bus.request(SendMessageCommand.self, .init(id: id, content: String(format: "held %03d", index)))
                accepted.append(id)
            } catch {
                refused.append("\(error)")
            }
        }
        #expect(accepted.count == 100 && refused.count == 60, "\(accepted.count) accepted, \(refused.count) refused")
        #expect(refused.allSatisfy { $0.contains("the outbox is full") }, "\(refused.first ?? "")")
        // A person sending one more is told at once, with its own exit code.
        let more = try set.tether(["send", "--timeout", "5", "one", "more"])
        #expect(more.status == 5, "exit \(more.status): \(more.standardError)")
        #expect(more.standardError.contains("refused, nothing was queued: the outbox is full"), "\(more.standardError)")
        #expect(try set.tether(["resume"]).status == 0)
        let all = await eventually(timeout: .seconds(60)) {
            Set(await deliveries.entries.filter { $0.value.status == .delivered }.map(\.value.id)).isSuperset(of: accepted)
        }
        #expect(all, "not every accepted message was delivered")
        let ended = await deliveries.entries.filter { [.failed, .expired, .cancelled].contains($0.value.status) }
        #expect(ended.isEmpty, "an accepted message ended undelivered: \(ended.prefix(3).map { "\($0.value.id) \($0.value.detail ?? "")" })")
        let counts = set.receipts()
        #expect(
            counts.count == 100 && counts.values.allSatisfy { $0 == 1 }, "\(counts.count) received, repeats: \(counts.filter { $0.value > 1 }.keys.sorted())")
        print(
            "160 sent while suspended: 100 accepted and delivered once each, 60 refused at send time; tether send exit \(more.status.map(String.init) ?? "?")")
        await bus.close()
    }
}

extension QueuePromiseTests {
    @Test func dropOldestIsAChoiceEverySenderIsToldOfAndEveryDropIsAnnounced() async throws {
        let set = try await ComposedSet(environment: ["TETHER_OUTBOX_WHEN_FULL": "drop-oldest"])
        defer { set.stop() }
        let bus = try BusClient(source: "drop-oldest-test", runDirectory: set.run.runDirectory, logger: Logger(label: "drop-oldest-test"))
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        #expect(try set.tether(["suspend"]).status == 0)
        var ids: [MessageID] = []
        var warned = 0
        for index in 1...160 {
            let id = MessageID.random()
            let reply = try await bus.request(SendMessageCommand.self, .init(id: id, content: String(format: "kept or dropped %03d", index)))
            #expect(reply.accepted)
            if reply.warning?.contains("drop-oldest") == true { warned += 1 }
            ids.append(id)
        }
        #expect(warned == 160, "every sender is told its message may be dropped: \(warned)")
        let person = try set.tether(["send", "--timeout", "1", "one", "more"])
        #expect(person.standardError.contains("warning: the outbox keeps only the newest 100 messages waiting (drop-oldest)"), "\(person.standardError)")
        let dropped = Array(ids.prefix(61))
        let kept = Array(ids.dropFirst(61))
        let announced = await eventually(timeout: .seconds(10)) {
            let failed = await deliveries.entries.filter { $0.value.status == .failed && $0.value.detail?.hasPrefix("dropped unsent") == true }.map(\.value.id)
            return Set(failed) == Set(dropped)
        }
        #expect(announced, "each of the 61 oldest is announced as dropped, and no other")
        #expect(try set.tether(["resume"]).status == 0)
        let delivered = await eventually(timeout: .seconds(60)) {
            Set(await deliveries.entries.filter { $0.value.status == .delivered }.map(\.value.id)).isSuperset(of: kept)
        }
        #expect(delivered, "the 99 newest and the person's message are delivered")
        let counts = set.receipts()
        #expect(
            counts.count == 100 && counts.values.allSatisfy { $0 == 1 }, "\(counts.count) received, repeats: \(counts.filter { $0.value > 1 }.keys.sorted())")
        #expect(!counts.keys.contains("kept or dropped 001"), "a dropped message never reaches the gateway")
        let status = try set.tether(["status"]).standardOutput
        #expect(
            status.contains("left undelivered since tether-protod started: 61 failed; the latest failed: dropped unsent: the outbox keeps the newest 100"),
            "\(status)")
        print("drop-oldest: 161 sent while suspended, each warned; 61 oldest dropped and announced, 100 delivered once")
        await bus.close()
    }
}

/// Every bus message a program drops is counted by kind and shown by `tether status --json`.
@Suite(.serialized) struct DroppedMessageTests {
    @Test func everyDroppedMessageIsCountedByKind() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let bus = try BusClient(source: "drop-test", runDirectory: set.run.runDirectory, logger: Logger(label: "drop-test"))
        // The snapshot store follows conv.*, connd follows frontend.presence: wait until both hear this publisher.
        _ = try await bus.subscribe(to: ["conv."], confirm: true)
        try await Task.sleep(for: .milliseconds(500))
        let encoder = BusSchema.makeEncoder()
        let header = Array(try encoder.encode(BusHeader(source: "drop-test", sequence: 1)))
        let futureHeader = Array(try encoder.encode(BusHeader(schema: BusSchema.version + 1, source: "drop-test", sequence: 2)))
        let sent: [[[UInt8]]] = [
            [Array("conv.message".utf8)],
            [Array("conv.message".utf8), Array("not a header".utf8), Array("{}".utf8)],
            [Array("conv.message".utf8), header, [UInt8](repeating: 0x20, count: BusSchema.maximumBodySize + 1)],
            [Array("conv.message".utf8), futureHeader, Array("{}".utf8)],
            [Array("conv.message".utf8), header, Array(#"{"id": 7}"#.utf8)],
            [Array("conv.delivery".utf8), header, Array(#"["not", "an", "update"]"#.utf8)],
            [Array("frontend.presence".utf8), header, Array(#"{"frontEnd": 1}"#.utf8)],
        ]
        for frames in sent { try bus.publishRaw(frames) }

        var snapd: [String: Int] = [:]
        var connd: [String: Int] = [:]
        let counted = await eventually(timeout: .seconds(10)) {
            guard let status = try? set.tether(["status", "--json"]),
                let report = try? JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: Any],
                let programs = report["programs"] as? [[String: Any]]
            else { return false }
            func kinds(_ name: String) -> [String: Int] {
                programs.first { $0["program"] as? String == name }?["droppedByKind"] as? [String: Int] ?? [:]
            }
            (snapd, connd) = (kinds("tether-snapd"), kinds("tether-connd"))
            return snapd["undecodable conv.delivery"] != nil && connd["undecodable frontend.presence"] != nil
        }
        #expect(counted, "snapd \(snapd), connd \(connd)")
        #expect(snapd["malformed"] == 2, "\(snapd)")
        #expect(snapd["oversized"] == 1, "\(snapd)")
        #expect(snapd["unknownSchema"] == 1, "\(snapd)")
        #expect(snapd["undecodable conv.message"] == 1, "\(snapd)")
        #expect(snapd["undecodable conv.delivery"] == 1, "\(snapd)")
        #expect(connd["undecodable frontend.presence"] == 1, "\(connd)")
        let words = try set.tether(["status"]).standardOutput
        #expect(
            words.contains("tether-snapd dropped: malformed 2, oversized 1, undecodable conv.delivery 1, undecodable conv.message 1, unknownSchema 1"),
            "\(words)")
        await bus.close()
    }
}

/// The set frozen (SIGSTOP) while people send: nobody is told something untrue.
@Suite(.serialized) struct FrozenSetTests {
    @Test func sendersOfAFrozenSetAreToldOnlyWhatIsKnown() async throws {
        // The gateway has each message at once and acknowledges it 1.5 s later: the set freezes in between.
        let set = try await ComposedSet(environment: ["TETHER_GATEWAY_FAULTS": #"{"acknowledgementDelayMilliseconds": 1500}"#])
        defer { set.stop() }
        let programs = ["bus", "netmon", "connd", "protod", "snapd"]
        var senders: [(text: String, process: ChildProcess)] = []
        for index in 1...3 {
            let text = "frozen \(index)"
            senders.append(
                (
                    text,
                    try ChildProcess(Programs.path("tether"), ["send", "--timeout", "4", text, "--run-dir", set.run.path], outputDirectory: set.outputs.path)
                ))
        }
        let received = await eventually(timeout: .seconds(5), every: .milliseconds(20)) {
            Set(set.gatewayRecord().compactMap { $0["content"] as? String }).isSuperset(of: senders.map(\.text))
        }
        #expect(received, "the gateway did not get the messages before the freeze")
        let pids = programs.compactMap { set.pid(of: $0) }
        #expect(pids.count == programs.count)
        for pid in pids { kill(pid, SIGSTOP) }
        try await Task.sleep(for: .seconds(8))
        for pid in pids { kill(pid, SIGCONT) }
        var words: [String: String] = [:]
        for sender in senders {
            _ = try sender.process.waitForExit(timeout: .seconds(20))
            words[sender.text] = "exit \(sender.process.status ?? -1): \(sender.process.standardOutput)\(sender.process.standardError)"
        }
        let arrived = await eventually(timeout: .seconds(30)) {
            Set(set.gatewayRecord().compactMap { $0["content"] as? String }).isSuperset(of: senders.map(\.text))
        }
        #expect(arrived, "every message reaches the gateway once the set thaws")
        let contents = set.gatewayRecord().compactMap { $0["content"] as? String }
        #expect(Set(contents).count == contents.count, "sent twice: \(contents)")
        for sender in senders {
            let said = words[sender.text] ?? ""
            // The gateway has every one of them: a sender may not be told its message is merely queued
            // unless protod said so at the end; "not confirmed" and "may have" are true words.
            let honest =
                said.hasPrefix("exit 0")
                || said.contains("not confirmed within 4.0 s, and tether-protod did not answer when asked")
                || said.contains("may have reached the gateway")
                || said.contains("delivered, but no whole reply")
            #expect(honest, "\(sender.text): \(said)")
        }
        print(
            "frozen 8 s with 3 senders (4 s timeouts): "
                + senders.map { "\($0.text): \(words[$0.text] ?? "")".replacingOccurrences(of: "\n", with: " ") }.joined(separator: " | "))
    }

    /// protod paused while a message is sent: the send command goes unanswered, so the sender is
    /// told the message may be queued, not that it was not sent nor that the set is down. A
    /// paused protod never completes the socket's handshake, so here the attempts stay with the
    /// sender and are dropped when it exits; when protod stops after taking the command (the
    /// test above), it is queued. Either way the gateway never has it twice.
    @Test func aSendProtodDoesNotAnswerIsNotCalledUnsent() async throws {
        let set = try await ComposedSet()
        defer { set.stop() }
        let protod = try #require(set.pid(of: "protod"))
        kill(protod, SIGSTOP)
        let sender = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "3", "paused protod", "--run-dir", set.run.path], outputDirectory: set.outputs.path)
        let status = try sender.waitForExit(timeout: .seconds(20))
        kill(protod, SIGCONT)
        #expect(status == 1, "\(sender.standardError)")
        #expect(
            sender.standardError.contains(
                "not confirmed within 3.0 s: tether-protod did not answer: if it is only slow or paused, the message may be queued"),
            "\(sender.standardError)")
        // protod takes commands in order: once a later send is answered, whatever reached it was handled.
        #expect(try set.tether(["send", "after"]).status == 0)
        let copies = set.gatewayRecord().filter { $0["content"] as? String == "paused protod" }.count
        #expect(copies <= 1, "the gateway has it \(copies) times")
        print("a send to a paused protod: \(sender.standardError.trimmingCharacters(in: .newlines)); the gateway has it \(copies) time(s)")
    }
}
