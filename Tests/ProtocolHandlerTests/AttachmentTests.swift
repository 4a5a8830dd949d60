import Foundation
import OpenClawWire
import Testing
import TetherBus
import TetherSchema
import TetherTesting
import TetherWire

@testable import ProtocolHandler

/// Images sent with a message: what counts as one, the limits, the words of each refusal, and
/// protod's decisions (kept in the outbox, written with every `chat.send` of the message,
/// refused on a seed gateway).
@Suite struct AttachmentTests {
    static let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]) + Data(repeating: 7, count: 100)
    static let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data(repeating: 1, count: 50)
    static let gif = Data("GIF89a".utf8) + Data(repeating: 2, count: 20)
    static let webp = Data("RIFF".utf8) + Data([0x10, 0, 0, 0]) + Data("WEBPVP8 ".utf8) + Data(repeating: 3, count: 20)

    @Test func theTypeIsToldByTheBytesNotTheName() throws {
        #expect(ImageAttachments.sniff(Self.png) == "image/png")
        #expect(ImageAttachments.sniff(Self.jpeg) == "image/jpeg")
        #expect(ImageAttachments.sniff(Self.gif) == "image/gif")
        #expect(ImageAttachments.sniff(Self.webp) == "image/webp")
        #expect(ImageAttachments.sniff(Data("%PDF-1.7".utf8)) == nil)
        #expect(ImageAttachments.sniff(Data("RIFF\u{10}\0\0\0WAVEfmt ".utf8)) == nil, "a RIFF file that is not WebP")
        #expect(ImageAttachments.sniff(Data([0x89, 0x50])) == nil, "too short to tell")
        // A PNG named .txt is a PNG; text named .png is not an image.
        let named = try ImageAttachments.attachment(named: "notes.txt", bytes: Self.png).get()
        #expect(named.mimeType == "image/png" && named.name == "notes.txt" && Data(base64Encoded: named.content) == Self.png)
        guard case .failure(let refusal) = ImageAttachments.attachment(named: "photo.png", bytes: Data("hello, world".utf8)) else {
            Issue.record("text passed for an image")
            return
        }
        #expect(
            refusal.description
                == "photo.png is not an image Tether can send: only PNG, JPEG, GIF and WebP are, told by the file's bytes, not its name (the gateway would drop anything else without a word)"
        )
    }

    @Test func anImageOfFiveMillionBytesIsTakenAndOneByteMoreIsRefusedInWords() throws {
        let largest = Self.png + Data(repeating: 0, count: ImageAttachments.maximumBytes - Self.png.count)
        #expect(try ImageAttachments.attachment(named: "big.png", bytes: largest).get().note.bytes == 5_000_000)
        guard case .failure(let refusal) = ImageAttachments.attachment(named: "big.png", bytes: largest + Data([0])) else {
            Issue.record("an image over the limit passed")
            return
        }
        #expect(refusal.description == "big.png is 5,000,001 bytes; the gateway takes images of at most 5,000,000 bytes")
        #expect(ImageAttachments.attachment(named: "empty.png", bytes: Data()).failureWords == "empty.png is empty: there is no image to send")
    }

    @Test func aFileIsRefusedInWordsWhenMissingADirectoryOrTooLargeBeforeItIsRead() throws {
        let run = try TestRunDirectory()
        #expect(ImageAttachments.attachment(at: run.path + "/none.png").failureWords == "cannot attach \(run.path)/none.png: there is no such file")
        #expect(ImageAttachments.attachment(at: run.path).failureWords == "cannot attach \(run.path): it is a directory")
        let large = run.path + "/six.jpg"
        #expect(FileManager.default.createFile(atPath: large, contents: Self.jpeg + Data(repeating: 0, count: 6_000_000 - Self.jpeg.count)))
        #expect(ImageAttachments.attachment(at: large).failureWords == "six.jpg is 6,000,000 bytes; the gateway takes images of at most 5,000,000 bytes")
        let small = run.path + "/cat.gif"
        #expect(FileManager.default.createFile(atPath: small, contents: Self.gif))
        let attachment = try ImageAttachments.attachment(at: small).get()
        #expect(attachment.note == AttachmentNote(name: "cat.gif", mimeType: "image/gif", bytes: Self.gif.count))
        #expect(attachment.note.words == "cat.gif (image/gif, 26 bytes)")
    }

    @Test func whatCrossesTheBusIsStrictBase64OfTheTypeItSaysAndFitsTheBus() throws {
        let image = try ImageAttachments.attachment(named: "a.png", bytes: Self.png).get()
        #expect(ImageAttachments.refusal(for: [image], text: "look") == nil)
        #expect(ImageAttachments.refusal(for: [], text: String(repeating: "x", count: 600_000)) == nil, "a long text without images is not theirs to refuse")
        var wrapped = image
        wrapped.content.insert("\n", at: wrapped.content.index(wrapped.content.startIndex, offsetBy: 8))
        #expect(
            ImageAttachments.refusal(for: [wrapped], text: "")?.description == "a.png: its content is not base64 (standard alphabet, padded, no line breaks)")
        var mislabelled = image
        mislabelled.mimeType = "image/gif"
        #expect(ImageAttachments.refusal(for: [mislabelled], text: "")?.description == "a.png is said to be image/gif, but its bytes are image/png")
        let text = try ImageAttachments.attachment(named: "b.png", bytes: Self.png).get()
        var notAnImage = text
        notAnImage.content = Data("plain text".utf8).base64EncodedString()
        #expect(ImageAttachments.refusal(for: [notAnImage], text: "")?.description.hasPrefix("b.png is not an image Tether can send") == true)
        // Only the first 12 bytes are decoded: the type of a file shorter than that, the size of one past the limit.
        let header = Attachment(name: "h.gif", mimeType: "image/gif", content: Data("GIF89a".utf8).base64EncodedString())
        #expect(ImageAttachments.refusal(for: [header], text: "") == nil)
        let huge = Attachment(name: "d.png", mimeType: "image/png", content: (Self.png + Data(count: 5_000_001 - Self.png.count)).base64EncodedString())
        #expect(ImageAttachments.refusal(for: [huge], text: "")?.description == "d.png is 5,000,001 bytes; the gateway takes images of at most 5,000,000 bytes")
        // Five images of 4,800,000 bytes are each within the gateway's limit, not together within what one bus message carries.
        let large = try ImageAttachments.attachment(named: "c.png", bytes: Self.png + Data(repeating: 9, count: 4_800_000 - Self.png.count)).get()
        #expect(ImageAttachments.refusal(for: Array(repeating: large, count: 5), text: "") == nil)
        #expect(
            ImageAttachments.refusal(for: Array(repeating: large, count: 6), text: "")?.description
                == "the images are 28,800,000 bytes; with this text, Tether's bus carries at most 25,116,672 bytes of images with one message (the gateway itself would take up to 5,000,000 bytes an image): send a smaller image"
        )
        #expect(ImageAttachments.isStrictBase64("QUJD") && !ImageAttachments.isStrictBase64("QUJ") && !ImageAttachments.isStrictBase64("QU-_"))
        #expect(!ImageAttachments.isStrictBase64("Q==="), "three padding characters")
        #expect(ImageAttachments.decodedSize(ofBase64: "QUJDRA==") == 4 && (12_345).grouped == "12,345")
        #expect(ImageAttachments.summary([image.note]) == "1 image (image/png, \(Self.png.count) bytes)")
    }

    @Test func theBusRoomForImagesIsWhatASendCommandAndItsFrameCarryLessTheEnvelopeAndTwiceTheText() {
        // 32 MiB, less 64 KiB for the envelope: 33,488,896 bytes of base64, 25,116,672 decoded.
        #expect(ImageAttachments.busRoom(forText: "") == 33_554_432 - 65_536)
        #expect(ImageAttachments.busRoom(forText: "look") == 33_488_896 - 8)
        #expect(ImageAttachments.busRoom(forText: "é") == 33_488_896 - 4, "bytes of UTF-8, not characters")
        // Three images of 5,000,000 bytes fit one bus message and OpenClaw's maxPayload; the
        // bus would carry five (33,333,340 bytes of base64), the gateway reads only three.
        let base64 = 6_666_668
        #expect(Data(repeating: 0, count: 5_000_000).base64EncodedString().utf8.count == base64)
        #expect(5 * base64 <= ImageAttachments.busRoom(forText: "") && 6 * base64 > ImageAttachments.busRoom(forText: ""))
        #expect(3 * base64 < 26_214_400 && 4 * base64 > 26_214_400)
        // A send carrying megabytes waits longer for protod's answer than one of text.
        let photo = Attachment(name: "p.png", mimeType: "image/png", content: String(repeating: "A", count: base64))
        #expect(SendMessageCommand.attemptTimeout(for: .init(id: MessageID("t"), content: "hi")) == .milliseconds(2500))
        #expect(
            SendMessageCommand.attemptTimeout(for: .init(id: MessageID("f"), content: "", attachments: Array(repeating: photo, count: 4)))
                == .milliseconds(8500))
    }

    @Test func aMessagesTextIsLimitedByWhatItsConvMessageCarriesNotByItsImages() {
        #expect(SendMessageCommand.maximumTextBytes == 983_040)
        #expect(SendMessageCommand.textRefusal(String(repeating: "x", count: 983_038)) == nil)
        #expect(
            SendMessageCommand.textRefusal(String(repeating: "x", count: 983_039))
                == "the text is 983,039 bytes; a message's text is at most 983,038 bytes: shorten it or send it in parts")
        // Written as JSON, a control character takes six bytes.
        #expect(
            SendMessageCommand.textRefusal(String(repeating: "\u{1}", count: 200_000))
                == "the text is 200,000 bytes (1,200,000 with its escapes); a message's text is at most 983,038 bytes: shorten it or send it in parts")
        #expect(SendMessageCommand.textRefusal(String(repeating: "\u{1}", count: 160_000)) == nil)
        var driver = OpenClawDeliveryTests.Driver()
        driver.connect("c1", epoch: 1)
        guard
            case .refuse(let refusal, _) = driver.machine.admit(
                SendMessageCommand.Request(id: MessageID("long"), content: String(repeating: "x", count: 2 << 20)), now: OpenClawDeliveryTests.at(0))
        else {
            Issue.record("a 2 MiB text was queued")
            return
        }
        #expect(refusal.code == .tooLarge && refusal.description.hasPrefix("the text is 2,097,152 bytes; a message's text is at most"))
    }

    // MARK: protod

    @Test func anImageIsWrittenWithEveryChatSendOfItsMessageUnderTheSameKeyAndTheEntryNamesIt() throws {
        var driver = OpenClawDeliveryTests.Driver()
        driver.connect("c1", epoch: 1)
        driver.history([], on: "c1")
        let image = try ImageAttachments.attachment(named: "cat.png", bytes: Self.png).get()
        let request = SendMessageCommand.Request(id: MessageID("m1"), content: "what is this?", attachments: [image])
        guard case .commit = driver.machine.admit(request, now: OpenClawDeliveryTests.at(0)) else {
            Issue.record("refused")
            return
        }
        var message = DeliveryStateMachineTests.outboxMessage("m1", sequence: 1)
        message.content = request.content
        message.attachments = [image]
        driver.handle(.accepted(message, fallbackFrom: nil))
        #expect(driver.entries { $0.id.value == "m1" }.first?.attachments == [AttachmentNote(name: "cat.png", mimeType: "image/png", bytes: Self.png.count)])
        let expected = JSONValue.array([
            .object([
                "type": .string("image"), "mimeType": .string("image/png"), "fileName": .string("cat.png"),
                "content": .string(Self.png.base64EncodedString()),
            ])
        ])
        #expect(driver.requests["c1"]?.last { $0.method == "chat.send" }?.params?["attachments"] == expected)
        // The connection drops before the answer: on the next one, the same key, the same image.
        driver.handle(.connectionDown, at: 1)
        driver.connect("c2", epoch: 2, at: 2)
        driver.history([], on: "c2")
        let again = try #require(driver.requests["c2"]?.last { $0.method == "chat.send" })
        #expect(again.params?["idempotencyKey"] == .string("m1") && again.params?["attachments"] == expected)
    }

    @Test(arguments: [true, false])
    func aMessageTheRestartedGatewayLostGoesAgainOnlyWithItsImagesReadBackFromTheOutbox(readBack: Bool) throws {
        typealias Deliveries = OpenClawDeliveryTests
        var driver = Deliveries.Driver()
        driver.connect("c1", epoch: 1, at: 0)
        driver.history(Deliveries.earlier, on: "c1")
        let image = try ImageAttachments.attachment(named: "cat.png", bytes: Self.png).get()
        var message = DeliveryStateMachineTests.outboxMessage("m1", sequence: 1)
        message.attachments = [image]
        driver.handle(.accepted(message, fallbackFrom: nil))
        driver.respond("send:m1", Deliveries.started)
        driver.chat(Deliveries.delta("m1", text: "cut", increment: "cut"), on: "c1")
        #expect(driver.deliveries(of: "m1").last == .delivered && driver.machine.pendingCount == 0)
        driver.handle(.connectionDown, at: 5)
        // A gateway restarted and its history lacks the message whose run had started: it is written again.
        driver.connect("c2", epoch: 2, uptime: 1, at: 6)
        driver.history(Deliveries.earlier, on: "c2")
        #expect(driver.log.contains(.persistRequeued(id: "m1")))
        #expect(driver.sent(on: "c2").isEmpty, "written again before its image was read back")
        driver.handle(.imagesRead(id: "m1", readBack ? [image] : []), at: 7)
        if readBack {
            let again = try #require(driver.requests["c2"]?.last { $0.method == "chat.send" })
            #expect(again.params?["idempotencyKey"] == .string("m1"))
            guard case .array(let items)? = again.params?["attachments"] else {
                Issue.record("written again without its image: \(String(describing: again.params))")
                return
            }
            #expect(items.first?["content"] == .string(image.content))
        } else {
            #expect(driver.sent(on: "c2").isEmpty)
            #expect(driver.deliveries(of: "m1").last == .failed)
            #expect(
                driver.updates(of: "m1").last?.detail
                    == "the gateway lost this message, and its images could not be read back from the outbox: it was not written again")
        }
    }

    @Test func imagesAreRefusedInWordsOnASeedGatewayAndWhenTheyWouldNotFitTheGatewaysFrame() throws {
        var seed = DeliveryStateMachineTests.Driver()
        seed.connect("s1", epoch: 1)
        let image = try ImageAttachments.attachment(named: "cat.png", bytes: Self.png).get()
        let request = SendMessageCommand.Request(id: MessageID("m1"), content: "look", attachments: [image])
        guard case .refuse(let refusal, _) = seed.machine.admit(request, now: DeliveryStateMachineTests.at(0)) else {
            Issue.record("a seed gateway took an image")
            return
        }
        #expect(refusal.code == .attachmentRefused)
        #expect(
            refusal.description == "images are not available with this gateway: it speaks the seeds' JSON, which carries text only; the message was not queued")
        // The same without the image goes.
        #expect(seed.machine.admit(SendMessageCommand.Request(id: MessageID("m2"), content: "look"), now: DeliveryStateMachineTests.at(0)).isCommit)

        var small = OpenClawDeliveryTests.Driver()
        let gateway = GatewayInfo(
            dialect: .openclaw, protocolVersion: 4, maximumPayload: 1000, mainSessionKey: "agent:main:main", clockOffsetMilliseconds: 0)
        small.handle(.connectionUp(epoch: 1, id: "c1", gateway: gateway))
        let large = try ImageAttachments.attachment(named: "cat.png", bytes: Self.png + Data(repeating: 1, count: 600)).get()
        guard
            case .refuse(let tooLarge, _) = small.machine.admit(
                SendMessageCommand.Request(id: MessageID("m3"), content: "hi", attachments: [large]), now: OpenClawDeliveryTests.at(0))
        else {
            Issue.record("a frame over the gateway's maxPayload was taken")
            return
        }
        #expect(tooLarge.code == .tooLarge)
        // 2 bytes of text, 952 of base64, 96 + 7 + 9 for the attachment's fields, 512 for the frame's.
        #expect(
            tooLarge.description
                == "the message's frame would be about 1,578 bytes with its images in base64; the gateway reads frames of at most 1,000 bytes: send a smaller image"
        )
        // OpenClaw's own maxPayload takes three images of 5,000,000 bytes in one frame, not four.
        var openClaw = OpenClawDeliveryTests.Driver()
        openClaw.handle(
            .connectionUp(
                epoch: 1, id: "c1",
                gateway: GatewayInfo(
                    dialect: .openclaw, protocolVersion: 4, maximumPayload: 26_214_400, mainSessionKey: "agent:main:main", clockOffsetMilliseconds: 0)))
        let photo = try ImageAttachments.attachment(named: "p.png", bytes: Self.png + Data(repeating: 5, count: 5_000_000 - Self.png.count)).get()
        let three = SendMessageCommand.Request(id: MessageID("m6"), content: "three", attachments: Array(repeating: photo, count: 3))
        #expect(openClaw.machine.admit(three, now: OpenClawDeliveryTests.at(0)).isCommit)
        let four = SendMessageCommand.Request(id: MessageID("m7"), content: "four", attachments: Array(repeating: photo, count: 4))
        guard case .refuse(let tooMany, _) = openClaw.machine.admit(four, now: OpenClawDeliveryTests.at(0)) else {
            Issue.record("four images of 5,000,000 bytes were taken for a 25 MiB frame")
            return
        }
        // 4 × 6,666,668 of base64, 4 × (96 + 5 + 9) for the attachments' fields, 4 of text, 512 for the frame's.
        #expect(
            tooMany.description
                == "the message's frame would be about 26,667,628 bytes with its images in base64; the gateway reads frames of at most 26,214,400 bytes: send fewer or smaller images"
        )
        // An empty text goes with an image, not without.
        #expect(
            small.machine.admit(SendMessageCommand.Request(id: MessageID("m4"), content: "", attachments: [image]), now: OpenClawDeliveryTests.at(0)).isCommit)
        #expect(!small.machine.admit(SendMessageCommand.Request(id: MessageID("m5"), content: " "), now: OpenClawDeliveryTests.at(0)).isCommit)
    }

    @Test func imagesAcceptedBeforeAnyGatewayWasHeardFailInWordsOnASeedGatewayInsteadOfGoingWithout() throws {
        var driver = DeliveryStateMachineTests.Driver()
        let image = try ImageAttachments.attachment(named: "cat.png", bytes: Self.png).get()
        let request = SendMessageCommand.Request(id: MessageID("m1"), content: "look", attachments: [image])
        #expect(driver.machine.admit(request, now: DeliveryStateMachineTests.at(0)).isCommit, "the gateway may speak OpenClaw: kept")
        var message = DeliveryStateMachineTests.outboxMessage("m1", sequence: 1)
        message.attachments = [image]
        driver.handle(.accepted(message, fallbackFrom: nil))
        driver.connect("s1", epoch: 1, at: 1)
        let failed = driver.deliveries(of: "m1").last
        #expect(failed?.status == .failed)
        #expect(
            failed?.detail
                == "not sent: images are not available with this gateway: it speaks the seeds' JSON, which carries text only; send the text again without them")
        let wentWithout = driver.log.contains { action in
            if case .write(let frame) = action { frame.text.contains("look") } else { false }
        }
        #expect(!wentWithout, "the text went without its image")
    }

    @Test func aUserTurnWithItsImageAsHistoryShowsItIsTethersMessageNotAnotherEntry() throws {
        // As OpenClaw's chat.history returns it: the image's data omitted, its saved copy's path beside.
        let json = """
            {"role": "user", "timestamp": \(OpenClawDeliveryTests.milliseconds(1)), "senderLabel": "\(OpenClawProtocol.ownSenderLabel)",
             "content": [{"type": "text", "text": "what is this?"}, {"type": "image", "mimeType": "image/png", "omitted": true, "bytes": 152}],
             "MediaPath": "/home/gw/.openclaw/media/inbound/1.png", "MediaPaths": ["/home/gw/.openclaw/media/inbound/1.png"],
             "MediaType": "image/png", "MediaTypes": ["image/png"], "__openclaw": {"id": "e1", "seq": 1}}
            """
        let turn = try JSONDecoder().decode(ChatTranscriptMessage.self, from: Data(json.utf8))
        let merge = HistoryMergeTests.merge(
            [turn, HistoryMergeTests.assistant("You said: what is this?\nYou sent 1 image (image/png, 112 bytes)", at: 2)],
            sent: [HistoryMerge.Sent(id: MessageID("m1"), text: "what is this?", createdAt: HistoryMergeTests.at(0.5), attachments: [])])
        #expect(merge.found == [MessageID("m1")])
        #expect(!merge.entries.contains { $0.sender == .user }, "the turn was shown as another message: \(merge.entries)")
    }

    @Test func aUserTurnWhoseImagesTheGatewayOffloadedIsStillTethersMessage() throws {
        // Over 2,000,000 bytes, OpenClaw saves an image to its media store and appends a line for it to the text.
        #expect(HistoryMerge.same("a phone photo\n[media attached: media://inbound/6f1c2d]", "a phone photo"))
        #expect(HistoryMerge.same("two\n[media attached: media://inbound/a1]\n[media attached: media://inbound/b2]", "two"))
        #expect(HistoryMerge.same("\n[media attached: media://inbound/a1]", ""), "images alone")
        #expect(!HistoryMerge.same("a phone photo\n[media attached: media://inbound/]", "a phone photo"), "no id")
        #expect(!HistoryMerge.same("a phone photo\n[media attached: /tmp/x.png]", "a phone photo"), "not the gateway's store")
        #expect(!HistoryMerge.same("another photo\n[media attached: media://inbound/a1]", "a phone photo"))
        let json = """
            {"role": "user", "timestamp": \(OpenClawDeliveryTests.milliseconds(1)), "senderLabel": "\(OpenClawProtocol.ownSenderLabel)",
             "content": [{"type": "text", "text": "a phone photo\\n[media attached: media://inbound/6f1c2d]"}],
             "MediaPath": "/home/gw/.openclaw/media/inbound/6f1c2d.png", "__openclaw": {"id": "e1", "seq": 1}}
            """
        let turn = try JSONDecoder().decode(ChatTranscriptMessage.self, from: Data(json.utf8))
        let merge = HistoryMergeTests.merge(
            [turn], sent: [HistoryMerge.Sent(id: MessageID("m1"), text: "a phone photo", createdAt: HistoryMergeTests.at(0.5), attachments: [])])
        #expect(merge.found == [MessageID("m1")])
        #expect(!merge.entries.contains { $0.sender == .user }, "the turn was shown as another message: \(merge.entries)")
    }

    @Test func theOutboxKeepsTheImagesWithTheirMessageAcrossAReopen() async throws {
        let run = try TestRunDirectory()
        let path = run.path + "/outbox.sqlite"
        let image = try ImageAttachments.attachment(named: "cat.webp", bytes: Self.webp).get()
        do {
            let outbox = try Outbox(path: path)
            let (message, inserted) = try await outbox.enqueue(id: MessageID("a"), content: "see", attachments: [image])
            #expect(inserted && message.attachments == [image])
            _ = try await outbox.enqueue(id: MessageID("b"), content: "no image")
        }
        let reopened = try Outbox(path: path)
        let pending = try await reopened.pending()
        #expect(pending.map(\.attachments) == [[image], nil])
        // A damaged file's messages are read back with their images.
        #expect(Outbox.salvage(from: path).first?.attachments == [image])
    }
}

extension Result where Failure == AttachmentRefusal {
    /// The refusal's words; nil when it succeeded.
    fileprivate var failureWords: String? {
        if case .failure(let refusal) = self { refusal.description } else { nil }
    }
}

extension DeliveryStateMachine.Admission {
    fileprivate var isCommit: Bool {
        if case .commit = self { true } else { false }
    }
}
