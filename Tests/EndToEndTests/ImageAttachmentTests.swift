import Foundation
import Logging
import NIOWebSocket
import OpenClawWire
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

/// Images sent with a message through the real programs: `tether send --attach`, protod's
/// outbox, connd, the development gateway in the OpenClaw dialect (which takes them as
/// OpenClaw's gateway does, and whose bot says what it received).
@Suite(.serialized) struct ImageAttachmentTests {
    /// Bytes that begin as a PNG does, `count` long.
    static func png(_ count: Int) -> Data {
        var bytes = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        bytes.append(Data((0..<(count - bytes.count)).map { UInt8(truncatingIfNeeded: $0 &* 31) }))
        return bytes
    }

    static func write(_ data: Data, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: data) else { throw TestFailure("cannot write \(path)") }
    }

    @Test func anImageIsSentOnceAcrossAConndKillAndTheTranscriptNamesItOnce() async throws {
        // The gateway answers chat.send 2 s after the run started: connd dies with the image in flight.
        let set = try await ComposedSet.openClaw(faults: #"{"acknowledgementDelayMilliseconds": 2000}"#, environment: ["TETHER_CHUNK_DELAY": "5"])
        defer { set.stop() }
        let image = set.run.path + "/cat.png"
        try Self.write(Self.png(12_345), to: image)
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "60", "--attach", image, "what is this?", "--run-dir", set.run.path],
            outputDirectory: set.outputs.path, name: "send")
        defer { send.stop() }
        let received = await eventually(timeout: .seconds(20)) { set.gatewayRecord().contains { $0["content"] as? String == "what is this?" } }
        #expect(received, "the gateway never received it")
        #expect(try await set.killAndAwaitRestart("connd"))
        #expect(try send.waitForExit(timeout: .seconds(60)) == 0, "\(send.standardError)")
        #expect(send.standardOutput == "You said: what is this?\nYou sent 1 image (image/png, 12,345 bytes)\n", "\(send.standardOutput)")
        let records = set.gatewayRecord().filter { $0["content"] as? String == "what is this?" }
        #expect(records.count == 1, "the gateway started \(records.count) runs for it")
        #expect(records.first?["images"] as? [String] == ["image/png 12345"], "\(records)")
        print("image: received by the gateway \(records.count) time(s) across a SIGKILL of connd: \(records.first?["images"] ?? "none")")

        // The history is read again after each reconnect: the message stays one entry, with its image.
        #expect(try await set.killAndAwaitRestart("connd"))
        let bus = try BusClient(source: "attachment-test", runDirectory: set.run.runDirectory, logger: Logger(label: "attachment-test"))
        defer { Task { await bus.close() } }
        let settled = await eventually(timeout: .seconds(15)) {
            let entries = (try? await bus.request(TranscriptCommand.self, .init(limit: 50)).entries) ?? []
            return entries.count == 2 && entries.allSatisfy { $0.status == .delivered || $0.status == .received }
        }
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 50)).entries
        #expect(settled, "\(entries.map { "\($0.sender) \($0.status) \($0.content.prefix(40))" })")
        let users = entries.filter { $0.sender == .user }
        #expect(users.count == 1 && users.first?.attachments == [AttachmentNote(name: "cat.png", mimeType: "image/png", bytes: 12_345)], "\(users)")
        #expect(set.openClawTranscript().filter { $0.role == "user" }.map(\.text) == ["what is this?"])

        // What a watcher prints: the words, and in JSON the notes.
        let watch = try ChildProcess(
            Programs.path("tether"), ["watch", "--history", "5", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "watch")
        defer { watch.stop() }
        let json = try ChildProcess(
            Programs.path("tether"), ["watch", "--json", "--history", "5", "--run-dir", set.run.path], outputDirectory: set.outputs.path, name: "watch-json")
        defer { json.stop() }
        #expect(
            await eventually(timeout: .seconds(10)) {
                watch.standardOutput.contains("you: what is this? [image: cat.png (image/png, 12,345 bytes)] [delivered]")
            },
            "\(watch.standardOutput)")
        #expect(
            await eventually(timeout: .seconds(10)) {
                json.standardOutput.contains(#""attachments":[{"bytes":12345,"mimeType":"image/png","name":"cat.png"}]"#)
            }, "\(json.standardOutput)")
    }

    /// Bytes that begin as a JPEG does, `count` long.
    static func jpeg(_ count: Int) -> Data {
        var bytes = Data([0xFF, 0xD8, 0xFF, 0xE0])
        bytes.append(Data((0..<(count - bytes.count)).map { UInt8(truncatingIfNeeded: $0 &* 17) }))
        return bytes
    }

    /// Sends `text` with the images at `paths` in the background, and returns once the
    /// gateway has received it (its run started), with how long that took.
    static func sendUntilReceived(_ set: ComposedSet, _ text: String, attaching paths: [String], name: String) async throws -> (ChildProcess, Duration) {
        let started = ContinuousClock.now
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "120"] + paths.flatMap { ["--attach", $0] } + [text, "--run-dir", set.run.path],
            outputDirectory: set.outputs.path, name: name)
        let received = await eventually(timeout: .seconds(60)) { set.gatewayRecord().contains { $0["content"] as? String == text } }
        #expect(received, "the gateway never received \(text): \(send.standardError)")
        return (send, ContinuousClock.now - started)
    }

    @Test func imagesOfTwoAndFiveMillionBytesAreEachSentOnceAcrossAConndKillWhileTheyAreSent() async throws {
        // The gateway answers chat.send 2 s after the run started: connd dies with the image in flight.
        let set = try await ComposedSet.openClaw(faults: #"{"acknowledgementDelayMilliseconds": 2000}"#, environment: ["TETHER_CHUNK_DELAY": "5"])
        defer { set.stop() }
        for (size, text) in [(2_000_000, "a phone photo"), (5_000_000, "the largest photo")] {
            let image = set.run.path + "/photo-\(size).png"
            try Self.write(Self.png(size), to: image)
            let (send, took) = try await Self.sendUntilReceived(set, text, attaching: [image], name: "send-\(size)")
            defer { send.stop() }
            #expect(try await set.killAndAwaitRestart("connd"))
            #expect(try send.waitForExit(timeout: .seconds(90)) == 0, "\(send.standardError)")
            // Over 2,000,000 bytes the gateway saves the image to its media store and names it in the text.
            let said = size > 2_000_000 ? "You said: \(text)\n[media attached: media://inbound/" : "You said: \(text)\nYou sent"
            #expect(send.standardOutput.hasPrefix(said), "\(send.standardOutput)")
            #expect(send.standardOutput.hasSuffix("\nYou sent 1 image (image/png, \(size.grouped) bytes)\n"), "\(send.standardOutput)")
            let records = set.gatewayRecord().filter { $0["content"] as? String == text }
            #expect(records.count == 1, "the gateway started \(records.count) runs for it")
            #expect(records.first?["images"] as? [String] == ["image/png \(size)"], "\(records)")
            print("image: \(size) bytes received by the gateway in \(took), \(records.count) time(s) across a SIGKILL of connd")
        }
        let users = set.openClawTranscript().filter { $0.role == "user" }.map(\.text)
        #expect(
            users.count == 2 && users.first == "a phone photo" && users.last?.hasPrefix("the largest photo\n[media attached: media://inbound/") == true,
            "\(users)")
        // What Tether shows: each message once, delivered, with its image, though the gateway's history names the large one differently.
        let bus = try BusClient(source: "attachment-test", runDirectory: set.run.runDirectory, logger: Logger(label: "attachment-test"))
        defer { Task { await bus.close() } }
        #expect(try await set.killAndAwaitRestart("connd"))
        let settled = await eventually(timeout: .seconds(20)) {
            let entries = (try? await bus.request(TranscriptCommand.self, .init(limit: 50)).entries) ?? []
            return entries.count == 4 && entries.allSatisfy { $0.status == .delivered || $0.status == .received }
        }
        let entries = try await bus.request(TranscriptCommand.self, .init(limit: 50)).entries
        #expect(settled, "\(entries.map { "\($0.sender) \($0.status) \($0.content.prefix(60))" })")
        #expect(
            entries.filter { $0.sender == .user }.map { $0.attachments?.map(\.bytes) ?? [] } == [[2_000_000], [5_000_000]],
            "\(entries.map { "\($0.sender) \($0.status) \($0.content.prefix(60))" })")
    }

    @Test func aFiveMillionByteImageQueuedWhileTheGatewayIsAwaySurvivesAProtodRestartAndGoesOnce() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        // No connection for a while: the message waits in the outbox with its image.
        try await set.faults(#"{"refuseConnections": true}"#)
        #expect(try await set.killAndAwaitRestart("connd"))
        let image = set.run.path + "/photo.jpg"
        try Self.write(Self.jpeg(5_000_000), to: image)
        let send = try ChildProcess(
            Programs.path("tether"), ["send", "--timeout", "120", "--attach", image, "kept in the outbox", "--run-dir", set.run.path],
            outputDirectory: set.outputs.path, name: "send")
        defer { send.stop() }
        let bus = try BusClient(source: "attachment-test", runDirectory: set.run.runDirectory, logger: Logger(label: "attachment-test"))
        defer { Task { await bus.close() } }
        let queued = await eventually(timeout: .seconds(20)) {
            ((try? await bus.request(TranscriptCommand.self, .init(limit: 10)).entries) ?? []).contains { $0.content == "kept in the outbox" }
        }
        #expect(queued, "\(send.standardError)")
        #expect(try await set.killAndAwaitRestart("protod"))
        let started = ContinuousClock.now
        try await set.faults(#"{"refuseConnections": false}"#)
        _ = try await bus.request(ConnectionCommand.self, .init(action: .reconnect, reason: "the gateway takes connections again"))
        let received = await eventually(timeout: .seconds(60)) { set.gatewayRecord().contains { $0["content"] as? String == "kept in the outbox" } }
        #expect(received, "the restarted protod never wrote it")
        let delivered = await eventually(timeout: .seconds(30)) {
            ((try? await bus.request(TranscriptCommand.self, .init(limit: 10)).entries) ?? []).contains {
                $0.content == "kept in the outbox" && $0.status == .delivered
            }
        }
        #expect(delivered)
        let records = set.gatewayRecord().filter { $0["content"] as? String == "kept in the outbox" }
        #expect(records.count == 1 && records.first?["images"] as? [String] == ["image/jpeg 5000000"], "\(records)")
        print(
            "image: 5,000,000 bytes kept across a protod restart, received \(records.count) time(s), delivered \(ContinuousClock.now - started) after the gateway came back"
        )
    }

    @Test func twoFiveMillionByteImagesGoInOneMessageAndASetOverTheGatewaysMaxPayloadIsRefusedInWords() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        let first = set.run.path + "/first.png"
        let second = set.run.path + "/second.jpg"
        try Self.write(Self.png(5_000_000), to: first)
        try Self.write(Self.jpeg(5_000_000), to: second)
        let started = ContinuousClock.now
        let send = try set.tether(["send", "--timeout", "90", "--attach", first, "--attach", second, "two photos"], timeout: .seconds(100))
        #expect(send.status == 0, "\(send.standardError)")
        // Each over 2,000,000 bytes: saved to the gateway's media store, and named in the text the bot answers.
        #expect(send.standardOutput.hasPrefix("You said: two photos\n[media attached: media://inbound/"), "\(send.standardOutput)")
        #expect(
            send.standardOutput.hasSuffix("]\nYou sent 2 images (image/png, 5,000,000 bytes; image/jpeg, 5,000,000 bytes)\n"), "\(send.standardOutput)")
        let records = set.gatewayRecord().filter { $0["content"] as? String == "two photos" }
        #expect(records.count == 1 && records.first?["images"] as? [String] == ["image/png 5000000", "image/jpeg 5000000"], "\(records)")
        print("images: two of 5,000,000 bytes in one message delivered in \(ContinuousClock.now - started) under maxPayload 26,214,400")

        // Four are more than OpenClaw's 25 MiB frame holds in base64: protod refuses them, nothing is queued.
        let more = [first, second, first, second]
        let refused = try set.tether(["send"] + more.flatMap { ["--attach", $0] } + ["four photos"], timeout: .seconds(60))
        #expect(refused.status == 5)
        // 4 × 6,666,668 bytes of base64, 2 × 114 and 2 × 116 for the attachments' fields, 11 of text, 512 for the frame's.
        #expect(
            refused.standardError.contains(
                "the message's frame would be about 26,667,655 bytes with its images in base64; the gateway reads frames of at most 26,214,400 bytes: send fewer or smaller images"
            ),
            "\(refused.standardError)")
        #expect(!set.gatewayRecord().contains { $0["content"] as? String == "four photos" })
        set.stop()

        // A gateway that reads less (--max-payload): two photos are refused in its words.
        let small = try await ComposedSet.openClaw(environment: ["TETHER_GATEWAY_MAX_PAYLOAD": "8000000"])
        defer { small.stop() }
        let one = small.run.path + "/one.png"
        let two = small.run.path + "/two.png"
        try Self.write(Self.png(5_000_000), to: one)
        try Self.write(Self.png(3_000_000), to: two)
        // One of them fits (and, answered, shows protod knows the gateway's maxPayload).
        #expect(try small.tether(["send", "--timeout", "60", "--attach", one, "one photo"], timeout: .seconds(70)).status == 0)
        let tooMany = try small.tether(["send", "--attach", one, "--attach", two, "two photos"], timeout: .seconds(60))
        #expect(tooMany.status == 5)
        #expect(
            tooMany.standardError.contains(
                "the message's frame would be about 10,667,414 bytes with its images in base64; the gateway reads frames of at most 8,000,000 bytes: send fewer or smaller images"
            ),
            "\(tooMany.standardError)")
        #expect(small.gatewayRecord().compactMap { $0["content"] as? String } == ["one photo"])

        // Sent anyway, a frame over maxPayload closes the connection with 1009, as OpenClaw's gateway does.
        let images = [one, two].map {
            ChatAttachment(mimeType: "image/png", fileName: nil, content: (try? Data(contentsOf: URL(fileURLWithPath: $0)))?.base64EncodedString())
        }
        let frame = OpenClawCodec().request(
            id: "large", method: "chat.send",
            params: ChatSendParams(sessionKey: "agent:main:main", message: "too large", idempotencyKey: "large", attachments: images))
        let closed = try await OtherOpenClawClient.closeAfterWriting(frame, port: small.port, token: try small.gatewayToken)
        #expect(closed == .messageTooLarge, "\(String(describing: closed))")
        #expect(!small.gatewayRecord().contains { $0["content"] as? String == "too large" })
        print("a frame of \(frame.utf8.count.grouped) bytes over --max-payload 8,000,000: closed with \(String(describing: closed))")
    }

    @Test func aSixMegabyteImageANonImageAMissingFileAndASeedGatewayAreRefusedInWordsAndNothingIsQueued() async throws {
        let set = try await ComposedSet.openClaw()
        defer { set.stop() }
        let large = set.run.path + "/large.png"
        try Self.write(Self.png(6_000_000), to: large)
        let text = set.run.path + "/notes.png"
        try Self.write(Data("not a picture at all".utf8), to: text)

        let cases: [(String, String)] = [
            (large, "tether: large.png is 6,000,000 bytes; the gateway takes images of at most 5,000,000 bytes; nothing was sent\n"),
            (
                text,
                "tether: notes.png is not an image Tether can send: only PNG, JPEG, GIF and WebP are, told by the file's bytes, not its name (the gateway would drop anything else without a word); nothing was sent\n"
            ),
            (set.run.path + "/none.png", "tether: cannot attach \(set.run.path)/none.png: there is no such file; nothing was sent\n"),
        ]
        for (file, words) in cases {
            let send = try set.tether(["send", "--attach", file, "look"])
            #expect(send.status == 5, "\(file): exit \(String(describing: send.status))")
            #expect(send.standardError == words, "\(send.standardError)")
        }
        #expect(set.gatewayRecord().isEmpty, "the gateway received \(set.gatewayRecord())")

        // protod says the same to a front end that did not check: a non-image is refused before it is queued.
        let bus = try BusClient(source: "attachment-test", runDirectory: set.run.runDirectory, logger: Logger(label: "attachment-test"))
        defer { Task { await bus.close() } }
        let sneaked = Attachment(name: "notes.png", mimeType: "image/png", content: Data("not a picture at all".utf8).base64EncodedString())
        do {
            _ = try await bus.request(SendMessageCommand.self, .init(id: .random(), content: "look", attachments: [sneaked]))
            Issue.record("protod queued a text file as an image")
        } catch {
            #expect(error.refusal?.hasPrefix("notes.png is not an image Tether can send") == true, "\(error)")
        }
        set.stop()

        let seed = try await ComposedSet()
        defer { seed.stop() }
        let image = seed.run.path + "/cat.png"
        try Self.write(Self.png(1000), to: image)
        #expect(try seed.tether(["send", "plain", "text"]).status == 0)
        let refused = try seed.tether(["send", "--attach", image, "look"])
        #expect(refused.status == 5)
        #expect(
            refused.standardError.contains("images are not available with this gateway: it speaks the seeds' JSON, which carries text only"),
            "\(refused.standardError)")
        #expect(seed.receipts()["look"] == nil)
    }

    @Test(.enabled(if: Tmux.available, "tmux is needed to drive the terminal UI"))
    func slashAttachInTheTerminalUISendsTheImageWithTheNextMessageOnly() async throws {
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        let image = set.run.path + "/cat.png"
        try Self.write(Self.png(4321), to: image)
        let notes = set.run.path + "/notes.png"
        try Self.write(Data("only words".utf8), to: notes)
        let ui = try Tmux(
            [Programs.path("tether"), "--run-dir", set.run.path], columns: 160, rows: 20, directory: set.run.path, environment: ["LANG": "C.UTF-8"])
        _ = try await ui.waitFor("No messages yet")
        try ui.type("/attach \(notes)")
        try ui.press("Enter")
        _ = try await ui.waitFor("not attached: notes.png is not an image Tether can send")
        try ui.type("/attach \(image)")
        try ui.press("Enter")
        let attached = try await ui.waitFor("Attached: cat.png (image/png, 4,321 bytes) (/detach removes)")
        print("terminal UI with an image attached:\n\(attached)")
        try ui.type("what is this?")
        try ui.press("Enter")
        let answered = try await ui.waitFor("You: what is this? [image: cat.png (image/png, 4,321 bytes)]", "You sent 1 image (image/png, 4,321 bytes)")
        #expect(!answered.contains("Attached: "), "the image stayed attached after it was sent:\n\(answered)")
        try ui.type("and this?")
        try ui.press("Enter")
        _ = try await ui.waitFor("You said: and this?")
        let records = set.gatewayRecord()
        #expect(records.map { $0["images"] as? [String] ?? [] } == [["image/png 4321"], []], "\(records)")
    }

    @Test func theDevelopmentGatewayTakesAttachmentsAsOpenClawsDoes() async throws {
        // By default OpenClaw's own maxPayload, 25 MiB: an image over 5 MB reaches the attachment check.
        let set = try await ComposedSet.openClaw(environment: ["TETHER_CHUNK_DELAY": "0"])
        defer { set.stop() }
        let other = try await OtherOpenClawClient(port: set.port, token: try set.gatewayToken)
        defer { other.stop() }
        let png = Self.png(3000)
        func answer(_ attachments: [ChatAttachment], _ text: String = "hi") async -> (ok: Bool, error: String?)? {
            let id = other.send(text, attachments: attachments)
            _ = await eventually(timeout: .seconds(10)) { other.response(to: id) != nil }
            return other.response(to: id)
        }
        let wrapped = png.base64EncodedString(options: .lineLength76Characters)
        #expect(
            await answer([ChatAttachment(mimeType: "image/png", fileName: "a.png", content: wrapped)])?.error
                == "Error: attachment a.png: invalid base64 content")
        let big = Self.png(6_000_000).base64EncodedString()
        #expect(
            await answer([ChatAttachment(mimeType: "image/png", fileName: nil, content: big)])?.error
                == "Error: attachment image: exceeds size limit (6000000 > 5000000 bytes)")
        #expect(await answer([], "")?.error == "message or attachment required")
        // A PDF is dropped without a word: the run starts, and the bot received no image.
        let pdf = Data("%PDF-1.7\n".utf8 + Array(repeating: UInt8(ascii: "x"), count: 300)).base64EncodedString()
        #expect(await answer([ChatAttachment(mimeType: "image/png", fileName: "doc.pdf", content: pdf)], "only a pdf")?.ok == true)
        // A data: URL is taken, the type told by the bytes.
        #expect(
            await answer([ChatAttachment(mimeType: "image/gif", fileName: "p.png", content: "data:image/png;base64," + png.base64EncodedString())], "one png")?
                .ok == true)
        let replies = await eventually(timeout: .seconds(10)) { set.openClawTranscript().filter { $0.role == "assistant" }.count == 2 }
        #expect(replies)
        #expect(
            set.openClawTranscript().filter { $0.role == "assistant" }.map(\.text) == [
                "You said: only a pdf", "You said: one png\nYou sent 1 image (image/png, 3,000 bytes)",
            ], "\(set.openClawTranscript())")
    }
}
