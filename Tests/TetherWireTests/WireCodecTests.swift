import Foundation
import Testing
import TetherWire

@Suite struct WireCodecTests {
    let codec = WireCodec()

    private func object(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func chatMessageRoundTrip() throws {
        let original = ChatMessage(
            id: MessageID("round-trip"), content: "Test message", sender: .user,
            timestamp: ISO8601.parse("2024-01-30T12:00:00Z")!, status: .pending, threadID: "t-1", replyTo: MessageID("msg-0"))
        let encoded = try codec.encode(chatMessage: original, sequence: 99)
        guard case .chatMessage(let envelope) = try codec.decode(encoded) else {
            Issue.record("expected a chat message")
            return
        }
        #expect(envelope.payload == original)
        #expect(envelope.sequence == 99)
        #expect(envelope.version == "1.0")
        #expect(envelope.type == "chat.message")
    }

    /// Writes the exact shape of the protocol's examples: sorted keys, `{"value"}` ids,
    /// tagged senders, ISO 8601 dates without fractions, `null` for absent optionals.
    @Test func chatMessageShape() throws {
        let message = ChatMessage(
            id: MessageID("msg-1"), content: "Hello", sender: .bot(name: "Opta"), timestamp: ISO8601.parse("2024-01-30T12:00:00Z")!,
            status: .delivered)
        let text = String(decoding: try codec.encode(chatMessage: message, sequence: 1), as: UTF8.self)
        #expect(
            text
                == #"{"payload":{"content":"Hello","id":{"value":"msg-1"},"replyTo":null,"sender":{"name":"Opta","type":"bot"},"status":"delivered","threadID":null,"timestamp":"2024-01-30T12:00:00Z"},"sequence":1,"serverTimestamp":null,"type":"chat.message","version":"1.0"}"#
        )
    }

    @Test func userSenderShape() throws {
        let message = ChatMessage(id: MessageID("m"), content: "x", sender: .user, timestamp: Date(timeIntervalSince1970: 0))
        let payload = try #require(try object(try codec.encode(chatMessage: message, sequence: 1))["payload"] as? [String: Any])
        let sender = try #require(payload["sender"] as? [String: Any])
        #expect(sender.count == 1)
        #expect(sender["type"] as? String == "user")
        #expect(payload["timestamp"] as? String == "1970-01-01T00:00:00Z")
    }

    @Test(arguments: [(WireMessageType.ping, 42), (.pong, 42), (.ping, 0)])
    func pingAndPong(type: WireMessageType, sequence: Int) throws {
        let data = type == .ping ? try codec.encodePing(sequence: sequence) : try codec.encodePong(sequence: sequence)
        let json = try object(data)
        #expect(json["type"] as? String == type.rawValue)
        #expect(json["sequence"] as? Int == sequence)
        let decoded = try codec.decode(data)
        #expect(decoded.typeName == type.rawValue)
    }

    @Test func everyKnownTypeRoundTrips() throws {
        let now = ISO8601.parse("2025-06-01T08:30:00Z")!
        let messages: [WireMessage] = [
            .messageAck(
                WireEnvelope(type: "message.ack", sequence: 2, payload: MessageAck(messageID: MessageID("a"), status: .processed, serverTimestamp: now))),
            .botState(WireEnvelope(type: "bot.state", sequence: 3, payload: BotStateUpdate(state: .typing, botName: "Mono", detail: "…", timestamp: now))),
            .streamingChunk(
                WireEnvelope(
                    type: "streaming.chunk", sequence: 4, payload: StreamingChunk(messageID: MessageID("s"), chunkIndex: 7, content: "é✓ 你好", isFinal: true))),
        ]
        for message in messages {
            let data = try codec.encode(message)
            let again = try codec.encode(try codec.decode(data))
            #expect(again == data, "\(message.typeName) does not survive a round trip")
        }
    }

    @Test func fractionalSecondsAreRead() throws {
        let json =
            #"{"version":"1.0","type":"system.ping","sequence":1,"payload":{"timestamp":"2024-01-30T12:00:00.250Z"},"serverTimestamp":"2024-01-30T12:00:01Z"}"#
        guard case .ping(let envelope) = try codec.decode(json) else {
            Issue.record("expected a ping")
            return
        }
        #expect(envelope.payload.timestamp == ISO8601.parse("2024-01-30T12:00:00Z")!.addingTimeInterval(0.25))
        #expect(envelope.serverTimestamp == ISO8601.parse("2024-01-30T12:00:01Z"))
    }

    @Test func oversizedFrameIsRefused() {
        let small = WireCodec(maximumFrameSize: 64)
        do {
            _ = try small.decode(String(repeating: " ", count: 65))
            Issue.record("an oversized frame decoded")
        } catch {
            #expect(error.kind == "too-large")
        }
    }

    @Test(arguments: [
        #"[1, 2, 3]"#,
        #""just a string""#,
        #"{"type": 7, "version": "1.0", "sequence": 1, "payload": {}}"#,
        #"{"type": "chat.message", "version": "1.0", "sequence": "one", "payload": {}}"#,
        #"{"type": "message.ack", "version": "1.0", "sequence": 1, "payload": {"messageID": {"value": "x"}, "status": "lost", "serverTimestamp": "2024-01-30T12:00:00Z"}}"#,
        #"{"type": "bot.state", "version": "1.0", "sequence": 1, "payload": {"state": "idle", "botName": "Opta", "timestamp": "yesterday"}}"#,
        "",
    ])
    func malformedFramesThrowNotCrash(text: String) {
        #expect(throws: WireCodecError.self) { try codec.decode(text) }
    }

    /// Each refusal names what is wrong, as the counters and the diagnostics report it.
    @Test(arguments: [
        (#"[1, 2, 3]"#, "invalid-json"),
        (#""just a string""#, "invalid-json"),
        ("", "invalid-json"),
        ("{", "invalid-json"),
        (#"{"type": 7, "sequence": 1, "payload": {}}"#, "missing-type"),
        (#"{"type": "chat.message", "version": "1.0", "sequence": "one", "payload": {}}"#, "missing-type"),
        (#"{"type": "streaming.chunk", "version": "1.0", "sequence": 1}"#, "invalid-payload"),
        (
            #"{"type": "message.ack", "version": "1.0", "sequence": 1, "payload": {"messageID": {"value": "x"}, "status": "lost", "serverTimestamp": "2024-01-30T12:00:00Z"}}"#,
            "invalid-payload"
        ),
    ])
    func malformedFramesAreNamedForWhatIsWrong(text: String, kind: String) {
        do {
            let message = try codec.decode(text)
            Issue.record("decoded: \(message)")
        } catch {
            #expect(error.kind == kind, "\(text): \(error)")
        }
    }

    @Test func anUnknownTypeKeepsItsTypeSequenceAndBytes() throws {
        let text = #"{"type": "future.thing", "sequence": 9, "payload": {"x": [1, 2]}}"#
        guard case .unknown(let type, let sequence, let data) = try codec.decode(text) else {
            Issue.record("not decoded as unknown")
            return
        }
        #expect(type == "future.thing" && sequence == 9 && data == Data(text.utf8))
    }
}
