import Foundation
import Logging
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

/// The whole set from compose/default.yaml, in a private run directory and port, in each
/// dialect: the seed dialect, and OpenClaw's against the development gateway speaking it.
@Suite(.serialized) struct WholeSetTests {
    static let dialects = ["seed", "openclaw"]

    /// The bot's name as the transcript shows it: the seed gateway names its bot; an OpenClaw
    /// gateway's chat events do not.
    static func botName(_ dialect: String) -> String { dialect == "seed" ? "Opta" : "Bot" }

    @Test(arguments: dialects) func sendHelloThroughTheWholeSet(dialect: String) async throws {
        let set = try await ComposedSet(environment: ["TETHER_DIALECT": dialect])
        defer { set.stop() }

        let tap = try ChildProcess(
            Programs.path("tether-tap"), ["--run-dir", set.run.path, "--json", "wire.", "conv."], outputDirectory: set.run.path, name: "tap")
        defer { tap.stop() }
        // The tap is listening once a message published now reaches it.
        let client = try BusClient(source: "e2e-test", runDirectory: set.run.runDirectory, logger: Logger(label: "e2e"))
        let tapReady = await eventually {
            try? client.publish(["ready": true], on: Topic("conv.test-ready"))
            return tap.standardOutput.contains("conv.test-ready")
        }
        #expect(tapReady, "the tap did not start: \(tap.standardError)")

        let started = ContinuousClock.now
        let send = try set.tether(["send", "hello"])
        print("tether send hello took \(started.duration(to: .now))")
        #expect(send.status == 0, "tether send failed: \(send.standardError)")
        #expect(send.standardOutput == "You said: hello\n")

        // The gateway's record holds the message exactly once.
        let record = set.gatewayRecord().filter { $0["content"] as? String == "hello" }
        #expect(record.count == 1)
        let id = try #require(record.first?["id"] as? String)

        // The transcript holds the message as delivered and the assembled reply to it.
        let transcript = try await client.request(TranscriptCommand.self, .init(limit: 10)).entries
        let sent = try #require(transcript.first { $0.id.value == id })
        #expect(sent.sender == .user)
        #expect(sent.status == .delivered)
        let reply = try #require(transcript.first { $0.inReplyTo?.value == id })
        #expect(reply.sender == .bot(name: Self.botName(dialect)))
        #expect(reply.content == "You said: hello")
        #expect(reply.status == .received)
        await client.close()

        // The tap shows the exchange: the frame written to the gateway, then the message
        // and its queued mark (protod writes the frame first); the gateway's frames back, the
        // delivered mark after them; the reply streamed, then assembled. Each pair is ordered
        // by cause or by one publisher; protod's publications and connd's are not ordered
        // with each other.
        let shown = await eventually {
            tap.standardOutput.split(separator: "\n").contains { $0.contains("\"conv.message\"") && $0.contains("inReplyTo") }
        }
        #expect(shown, "the tap did not show the reply: \(tap.standardOutput)")
        let lines = tap.standardOutput.split(separator: "\n").compactMap { line -> (topic: String, line: Substring)? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let topic = object["topic"] as? String else {
                return nil
            }
            return (topic, line)
        }
        func first(_ topic: String, containing words: String = "", after start: Int? = nil) -> Int? {
            lines.indices.first { index in
                index > (start ?? -1) && lines[index].topic == topic && (words.isEmpty || lines[index].line.contains(words))
            }
        }
        let written = first("wire.out", containing: "hello")
        let order: [(String, Int?)] = [
            ("the frame on wire.out", written), ("the message on conv.message", first("conv.message")),
            ("queued on conv.delivery", first("conv.delivery", containing: "queued")),
        ]
        let afterAck: [(String, Int?)] = [
            ("a frame back on wire.in", written.flatMap { first("wire.in", after: $0) }),
            ("delivered on conv.delivery", first("conv.delivery", containing: "delivered")),
        ]
        let replied: [(String, Int?)] = [
            ("the reply on conv.stream", first("conv.stream")), ("the reply on conv.message", first("conv.message", containing: "inReplyTo")),
        ]
        for sequence in [order, afterAck, replied] {
            let indices = sequence.compactMap { $0.1 }
            #expect(
                indices.count == sequence.count && indices == indices.sorted(),
                "the tap showed \(lines.map { $0.topic }), not \(sequence.map { $0.0 }) in this order")
        }

        let status = try set.tether(["status"])
        #expect(status.standardOutput.contains("connection: Connected"))
        #expect(status.standardOutput.contains("outbox: 0 pending"))

        set.stop()
        #expect(set.supervisor.status != nil, "the supervisor is still running after down")
        for program in set.state()?.programs ?? [] {
            if let pid = program.pid {
                #expect(kill(pid, 0) != 0, "\(program.name) (pid \(pid)) is still running after down")
            }
        }
    }

    @Test(arguments: dialects) func programKilledWithSigkillIsRestartedAndTheSetCarriesOn(dialect: String) async throws {
        let set = try await ComposedSet(environment: ["TETHER_DIALECT": dialect])
        defer { set.stop() }
        let restarted = try await set.killAndAwaitRestart("protod")
        #expect(restarted, "protod was not restarted")
        #expect(set.state()?.programs.first { $0.name == "protod" }?.restarts == 1)
        let ps = try ChildProcess(Programs.path("tether-compose"), ["ps", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "ps")
        try ps.waitForExit(timeout: .seconds(10))
        let protodLine = ps.standardOutput.split(separator: "\n").first { $0.hasPrefix("protod") } ?? ""
        #expect(protodLine.contains("SIGKILL"), "ps does not show how protod ended: \(ps.standardOutput)")

        let send = try set.tether(["send", "still", "there?"])
        #expect(send.status == 0, "tether send failed after the restart: \(send.standardError)")
        #expect(send.standardOutput == "You said: still there?\n")
    }

    @Test(arguments: dialects) func messageSentWhileTheGatewayIsDownArrivesOnceAfterTheReconnect(dialect: String) async throws {
        let set = try await ComposedSet(environment: ["TETHER_DIALECT": dialect])
        defer { set.stop() }
        let gateway = try #require(set.state()?.programs.first { $0.name == "gateway" }?.pid)
        kill(gateway, SIGKILL)
        let send = try set.tether(["send", "--timeout", "30", "across", "the", "outage"], timeout: .seconds(40))
        #expect(send.status == 0, "tether send failed: \(send.standardError)")
        #expect(send.standardOutput == "You said: across the outage\n")
        let record = set.gatewayRecord().filter { $0["content"] as? String == "across the outage" }
        #expect(record.count == 1, "the gateway received the message \(record.count) times")
        let connectionNumbers = Set(record.compactMap { $0["connection"] as? Int })
        #expect(connectionNumbers == [1], "it came on the restarted gateway's first connection")
    }

    @Test(arguments: dialects) func suspendAndResumeFromTheCommandLine(dialect: String) async throws {
        let set = try await ComposedSet(environment: ["TETHER_DIALECT": dialect])
        defer { set.stop() }
        let suspend = try set.tether(["suspend"])
        #expect(suspend.status == 0, "\(suspend.standardError)")
        #expect(suspend.standardOutput.contains("Disconnected (app suspended)"))
        let status = try set.tether(["status"])
        #expect(status.standardOutput.contains("connection: Disconnected (app suspended)"))
        let again = try set.tether(["suspend"])
        #expect(again.status == 1)
        #expect(again.standardError.contains("does not apply now"))
        let resume = try set.tether(["resume"])
        #expect(resume.status == 0, "\(resume.standardError)")
        let send = try set.tether(["send", "after", "resume"])
        #expect(send.standardOutput == "You said: after resume\n")
    }

    @Test(arguments: dialects) func malformedFramesFromTheGatewayAreDroppedAndTheChatGoesOn(dialect: String) async throws {
        let set = try await ComposedSet(environment: ["TETHER_DIALECT": dialect])
        defer { set.stop() }
        try await set.faults(#"{"sendMalformedFrames": true}"#)

        let send = try set.tether(["send", "through", "the", "noise"])
        #expect(send.status == 0, "\(send.standardError)")
        #expect(send.standardOutput == "You said: through the noise\n")
        let log = (try? String(contentsOfFile: set.run.path + "/compose/logs/protod.log", encoding: .utf8)) ?? ""
        #expect(log.contains("dropped a malformed frame from the gateway"))
    }

    @Test(arguments: dialects) func watchStartsWithTheStoredTranscript(dialect: String) async throws {
        let set = try await ComposedSet(environment: ["TETHER_DIALECT": dialect])
        defer { set.stop() }
        #expect(try set.tether(["send", "first"]).status == 0)
        let watch = try ChildProcess(Programs.path("tether"), ["watch", "--run-dir", set.run.path], outputDirectory: set.run.path, name: "watch")
        let shown = await eventually { watch.standardOutput.contains("\(Self.botName(dialect)): You said: first") }
        #expect(shown, "watch did not print the stored transcript: \(watch.standardOutput) \(watch.standardError)")
        #expect(watch.standardOutput.contains("you: first [delivered]"))
        #expect(try set.tether(["send", "second"]).status == 0)
        let live = await eventually { watch.standardOutput.contains("\(Self.botName(dialect)): You said: second") }
        #expect(live, "watch did not print the live exchange: \(watch.standardOutput)")
        watch.stop()
    }

    @Test func sendWithoutASetSaysSo() throws {
        let run = try TestRunDirectory()
        let send = try ChildProcess(Programs.path("tether"), ["send", "--run-dir", run.path, "hello"], outputDirectory: run.path)
        let status = try send.waitForExit(timeout: .seconds(20))
        #expect(status == 4)
        #expect(send.standardError.contains("is tether-bus running?"))
    }
}
