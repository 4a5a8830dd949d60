import Foundation
import Logging
import OpenClawWire
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// The whole set in the OpenClaw dialect, against the development gateway speaking it
/// (`tether-gateway --dialect openclaw`): real processes, WebSockets, SQLite files.
@Suite(.serialized) struct OpenClawTests {
    static func client(_ set: ComposedSet) throws -> BusClient {
        try BusClient(source: "openclaw-test", runDirectory: set.run.runDirectory, logger: Logger(label: "openclaw-test"))
    }

    @Test(arguments: [("3", 3), ("4", 4), ("3-4", 4)])
    func theHandshakeUsesTheProtocolTheGatewayChoseAndChatWorks(protocols: String, expected: Int) async throws {
        let set = try await ComposedSet.openClaw(protocols: protocols)
        defer { set.stop() }
        let bus = try Self.client(set)
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let connected = try await states.waitFor { $0.phase == .connected }.value
        #expect(connected.gateway?.dialect == .openclaw && connected.gateway?.protocolVersion == expected, "\(String(describing: connected.gateway))")
        #expect(connected.gateway?.mainSessionKey == "agent:main:main" && connected.gateway?.deviceID?.count == 64)
        let send = try set.tether(["send", "hello", "over", "protocol", protocols])
        #expect(send.status == 0, "\(send.standardError)")
        #expect(send.standardOutput == "You said: hello over protocol \(protocols)\n", "\(send.standardOutput)")
        #expect(set.openClawTranscript().map(\.text) == ["hello over protocol \(protocols)", "You said: hello over protocol \(protocols)"])
        await bus.close()
    }

    @Test func aDeviceThatNeedsPairingConnectsByItselfOnceApproved() async throws {
        let set = try await ComposedSet.openClaw(faults: #"{"requirePairing": true}"#, environment: ["TETHER_PAIRING_CHECK": "1"])
        defer { set.stop() }
        let bus = try Self.client(set)
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let waiting = try await states.waitFor { $0.failure == .pairingRequired }.value
        let words = waiting.lastError ?? ""
        #expect(words.contains("openclaw devices approve "), "\(words)")
        #expect(waiting.words.hasPrefix("Waiting for approval: ") && waiting.words.contains("connects once it is approved"), "\(waiting.words)")
        let request = try #require(words.range(of: "request ").map { words[$0.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" } })
        // Only the gateway's side is touched: nothing more is typed into Tether.
        let approval = try set.approve(String(request))
        #expect(approval.status == 0, "\(approval.standardError)")
        let approvedAt = ContinuousClock.now
        let connected = try await states.waitFor(timeout: .seconds(15), since: approvedAt) { $0.phase == .connected }
        print("pairing: connected \(approvedAt.duration(to: connected.receivedAt)) after the approval")
        let send = try set.tether(["send", "paired"])
        #expect(send.status == 0 && send.standardOutput == "You said: paired\n", "\(send.standardError)")
        await bus.close()
    }

    @Test func aWrongTokenAndAProtocolMismatchFailInWords() async throws {
        let rejecting = try await ComposedSet.openClaw(faults: #"{"rejectToken": true}"#)
        defer { rejecting.stop() }
        let bus = try Self.client(rejecting)
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let rejected = try await states.waitFor { $0.phase == .failed }.value
        #expect(rejected.failure == .credentialRejected, "\(rejected.words)")
        #expect(rejected.lastError?.contains("gateway token mismatch") == true, "\(String(describing: rejected.lastError))")
        let status = try rejecting.tether(["status"])
        #expect(status.standardOutput.contains("rejected the token"), "\(status.standardOutput)")
        await bus.close()
        rejecting.stop()

        let newer = try await ComposedSet.openClaw(protocols: "5")
        defer { newer.stop() }
        let newerBus = try Self.client(newer)
        let newerStates = try await BusRecorder<ConnectionStatus>(bus: newerBus, topic: .connectionState)
        let mismatch = try await newerStates.waitFor { $0.phase == .failed }.value
        #expect(mismatch.failure == .protocolMismatch, "\(mismatch.words)")
        #expect(mismatch.lastError?.contains("speaks protocol 5") == true, "\(String(describing: mismatch.lastError))")
        // It does not go on reconnecting: one attempt, then a person's move.
        try await Task.sleep(for: .seconds(3))
        // Counted by attempt: a retained state replayed to the new subscriber is the same attempt.
        let connecting = await newerStates.entries.filter { $0.value.phase == .connecting }
        #expect(
            Set(connecting.map { "\($0.value.epoch) \($0.value.attempt)" }).count <= 1,
            "connecting more than once: \(connecting.map { "epoch \($0.value.epoch) attempt \($0.value.attempt) from \($0.header.source) #\($0.header.sequence)" })"
        )
        await newerBus.close()
    }

    @Test func theDeviceKeyAndDeviceTokenStayInTheirFiles() async throws {
        let set = try await ComposedSet.openClaw()
        defer { set.stop() }
        let recording = set.run.path + "/everything.jsonl"
        let tap = try ChildProcess(Programs.path("tether-tap"), ["--run-dir", set.run.path, "--record", recording], outputDirectory: set.run.path)
        let listening = await eventually { ((try? String(contentsOfFile: recording, encoding: .utf8)) ?? "").contains("conn.state") }
        #expect(listening)
        #expect(try set.tether(["send", "keep", "it", "secret"]).status == 0)
        #expect(try set.tether(["reconnect"]).status == 0)
        #expect(try set.tether(["send", "after", "reconnecting"]).status == 0)
        #expect(try set.tether(["status", "--json"]).status == 0)
        try await Task.sleep(for: .milliseconds(1500))
        tap.stop()

        let config = set.run.path + "/config/tether"
        let files = try FileManager.default.contentsOfDirectory(atPath: config).sorted()
        #expect(files.count == 2 && files.contains("openclaw-device.key") && files.contains { $0.hasSuffix(".device-token") }, "\(files)")
        var secrets: [(String, Data)] = []
        for file in files {
            let path = config + "/" + file
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(file) has mode \(String(mode, radix: 8))")
            let secret = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(secret.count >= 32)
            secrets.append((file, Data(secret.utf8)))
        }
        let directoryMode = try #require(try FileManager.default.attributesOfItem(atPath: config)[.posixPermissions] as? Int)
        #expect(directoryMode == 0o700)
        // Every file of the run directory but the configuration directory and the gateway's own
        // store of what it issued: logs, databases, the bus recording, captured output.
        var scanned = 0
        let enumerator = FileManager.default.enumerator(atPath: set.run.path)
        while let relative = enumerator?.nextObject() as? String {
            let path = set.run.path + "/" + relative
            var isDirectory: ObjCBool = false
            guard !relative.hasPrefix("config"), relative != "gateway-state/devices.json",
                FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                let data = FileManager.default.contents(atPath: path)
            else { continue }
            scanned += 1
            for (file, secret) in secrets { #expect(data.range(of: secret) == nil, "\(file)'s secret is in \(relative)") }
        }
        #expect(scanned >= 15, "only \(scanned) files scanned")
        print("device key and device token absent from \(scanned) files of the run directory")
    }

    @Test func aThousandMessagesThroughKillsDropsAndGatewayRestartsAreEachInTheHistoryOnceInOrder() async throws {
        // Each answer to chat.send comes 200 ms after its run started: at any moment up to a
        // window of messages are in the gateway's transcript and not yet acknowledged.
        let set = try await ComposedSet.openClaw(
            faults: #"{"acknowledgementDelayMilliseconds": 200}"#,
            environment: ["TETHER_CHUNK_DELAY": "1", "TETHER_OUTBOX_LIMIT": "2000", "TETHER_RECONNECT_PRESET": "aggressive"])
        defer { set.stop() }
        let bus = try Self.client(set)
        let deliveries = try await BusRecorder<DeliveryUpdate>(bus: bus, topic: .conversationDelivery)
        let states = try await BusRecorder<ConnectionStatus>(bus: bus, topic: .connectionState)
        let diagnostics = try await BusRecorder<DiagnosticEvent>(bus: bus, topic: .diagnostic)
        _ = try await states.waitFor { $0.phase == .connected }
        let contents = (1...1000).map { String(format: "message %04d", $0) }
        let started = ContinuousClock.now
        // Sent while the faults happen.
        let sending = Task {
            // How long each answer took: printed, so that a slow protod shows before it fails.
            var waits: [Duration] = []
            defer {
                let sorted = waits.sorted()
                if let slowest = sorted.last {
                    print("send answered in \(sorted[sorted.count / 2]) p50, \(sorted[sorted.count * 99 / 100]) p99, \(slowest) at most (\(waits.count) sends)")
                }
            }
            for content in contents {
                let asked = ContinuousClock.now
                _ = try await bus.request(SendMessageCommand.self, .init(id: .random(), content: content))
                waits.append(asked.duration(to: .now))
            }
        }
        func delivered() async -> Int { await Set(deliveries.entries.filter { $0.value.status == .delivered }.map(\.value.id)).count }
        var faults: [String] = []
        for (threshold, fault) in [(150, "kill connd"), (350, "drop the connection"), (550, "restart the gateway"), (800, "restart the gateway")] {
            let reached = await eventually(timeout: .seconds(120)) { await delivered() >= threshold }
            let count = await delivered()
            #expect(reached, "only \(count) delivered before \(fault)")
            switch fault {
            case "kill connd": #expect(try await set.killAndAwaitRestart("connd"))
            case "drop the connection": #expect(try set.tether(["reconnect"]).status == 0)
            default: #expect(try await set.killAndAwaitRestart("gateway"))
            }
            faults.append("\(fault) at \(count)")
        }
        try await sending.value
        let all = await eventually(timeout: .seconds(180)) { await delivered() >= 1000 }
        let total = await delivered()
        #expect(all, "\(total) of 1000 delivered")
        try await Task.sleep(for: .seconds(2))
        // A restart in the middle of a run makes the gateway write the next message merged with
        // the orphaned one (listed before it on its own): that entry stands for the new message.
        let history = set.openClawTranscript().filter { $0.role == "user" }.compactMap { OpenClawProtocol.rewriteParts(of: $0.text).last }
        var counts: [String: Int] = [:]
        for text in history { counts[text, default: 0] += 1 }
        print("1000 messages through \(faults.joined(separator: ", ")): \(history.count) in the gateway's history in \(started.duration(to: .now))")
        #expect(counts.filter { $0.value > 1 }.isEmpty, "twice: \(counts.filter { $0.value > 1 }.keys.sorted().prefix(10))")
        #expect(Set(history) == Set(contents), "missing: \(Set(contents).subtracting(history).sorted().prefix(10))")
        let firstOutOfOrder = zip(history, contents).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstOutOfOrder == nil && history.count == contents.count, "out of order from \(firstOutOfOrder ?? history.count)")
        // One message is written at a time (each waits for the reply before it), so a fault
        // leaves at most one whose fate the history decides; none is ever in it twice (above).
        let lookups = await diagnostics.entries.filter { $0.value.kind == .historyChecked }.map(\.value)
        print("history lookups after the faults: \(lookups.compactMap(\.detail))")
        let failed = await deliveries.entries.filter { [.failed, .expired, .cancelled].contains($0.value.status) }
        #expect(failed.isEmpty, "\(failed.prefix(3).map { "\($0.value.id) \($0.value.detail ?? "")" })")
        await bus.close()
    }

    @Test func droppedDeltasAGapAndAReconnectMidReplyLeaveEachReplyOnceAndWhole() async throws {
        let set = try await ComposedSet.openClaw(faults: #"{"dropDeltaFraction": 0.3}"#, environment: ["TETHER_CHUNK_DELAY": "15"])
        defer { set.stop() }
        let bus = try Self.client(set)
        let stream = try await BusRecorder<StreamProgress>(bus: bus, topic: .conversationStream)
        let words = (1...200).map { "w\($0)" }
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "--run-dir", set.run.path] + words, outputDirectory: set.run.path, name: "send")
        _ = try await stream.waitFor { $0.length > 100 }
        try await set.faults(#"{"skipSequence": true}"#)
        _ = try await stream.waitFor { $0.length > 400 }
        #expect(try set.tether(["reconnect"]).status == 0)
        let status = try send.waitForExit(timeout: .seconds(60))
        #expect(status == 0, "tether send: \(send.standardError)")
        #expect(send.standardOutput == "You said: " + words.joined(separator: " ") + "\n", "\(send.standardOutput.prefix(200))")
        try await Task.sleep(for: .seconds(1))
        let transcript = try await bus.request(TranscriptCommand.self, .init(limit: 50)).entries
        let replies = transcript.filter { $0.sender != .user }
        #expect(replies.count == 1, "\(replies.map { "\($0.id) \($0.status) \($0.content.prefix(30))" })")
        #expect(replies.first?.status == .received && replies.first?.content == "You said: " + words.joined(separator: " "))
        await bus.close()
    }

    @Test func theSessionIsChosenShownAndListedAndAReplyCanBeStopped() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_SESSION": "agent:main:work", "TETHER_CHUNK_DELAY": "40"])
        defer { set.stop() }
        let bus = try Self.client(set)
        let stream = try await BusRecorder<StreamProgress>(bus: bus, topic: .conversationStream)
        let status = try set.tether(["status"])
        #expect(status.standardOutput.contains("session: agent:main:work"), "\(status.standardOutput)")
        #expect(status.standardOutput.contains("gateway: OpenClaw protocol 4 (2026.5.12 or later)"), "\(status.standardOutput)")
        #expect(status.standardOutput.contains("steering not offered; run status and failure kinds shown"), "\(status.standardOutput)")
        let words = (1...100).map { "w\($0)" }
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "30", "--run-dir", set.run.path] + words, outputDirectory: set.run.path, name: "send")
        _ = try await stream.waitFor { $0.length > 30 }
        let abort = try set.tether(["abort"])
        #expect(abort.status == 0 && abort.standardOutput.hasPrefix("stopped the reply to "), "\(abort.standardOutput) \(abort.standardError)")
        #expect(try send.waitForExit(timeout: .seconds(30)) == 3)
        #expect(send.standardError.contains("the reply was stopped (chat.abort)"), "\(send.standardError)")
        #expect(send.standardOutput.hasPrefix("You said: w1 w2"), "as far as it came: \(send.standardOutput)")
        #expect(try set.tether(["abort"]).standardOutput == "no reply was running\n")
        let work = set.openClawTranscript(session: "agent:main:work")
        #expect(work.first { $0.role == "user" }?.text == words.joined(separator: " "))
        // As the real gateway: the stopped run's text, once as its own entry before the user's, once as the model's.
        #expect(work.map(\.role) == ["assistant", "user", "assistant"] && work.first?.text.hasPrefix("You said: w1") == true, "\(work)")
        #expect(set.openClawTranscript().isEmpty, "sent to the main session instead")
        let sessions = try set.tether(["sessions"])
        #expect(sessions.status == 0 && sessions.standardOutput.contains("* agent:main:work"), "\(sessions.standardOutput) \(sessions.standardError)")
        #expect(sessions.standardOutput.contains("  agent:main:main"), "\(sessions.standardOutput)")

        // The history read again (each reconnect): the stopped reply stays one entry, incomplete.
        for _ in 0..<2 { #expect(try await set.killAndAwaitRestart("connd")) }
        try await Task.sleep(for: .seconds(2))
        let transcript = try await bus.request(TranscriptCommand.self, .init(limit: 50)).entries
        let replies = transcript.filter { $0.sender != .user }
        #expect(replies.count == 1, "\(replies.map { "\($0.status) \($0.content.prefix(30))" })")
        #expect(replies.first?.status == .incomplete && replies.first?.detail == "the reply was stopped (chat.abort)", "\(replies)")
        #expect(transcript.count { $0.sender == .user } == 1, "\(transcript.map { "\($0.sender) \($0.content.prefix(30))" })")
        await bus.close()
    }
}
