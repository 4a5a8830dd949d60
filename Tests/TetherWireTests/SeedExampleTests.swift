import Foundation
import Testing
import TetherWire

/// Every JSON example of the protocol's seed documents (plans 03-02 and 03-04), decoded.
@Suite struct SeedExampleTests {
    let codec = WireCodec()

    private func date(_ text: String) -> Date {
        ISO8601.parse(text)!
    }

    @Test func chatMessageFromTheBot() throws {
        let json = """
            {
                "version": "1.0",
                "type": "chat.message",
                "sequence": 1,
                "payload": {
                    "id": {"value": "msg-1"},
                    "content": "Hello from bot",
                    "sender": {"type": "bot", "name": "Opta"},
                    "timestamp": "2024-01-30T12:00:00Z",
                    "status": "delivered",
                    "threadID": null,
                    "replyTo": null
                },
                "serverTimestamp": null
            }
            """
        guard case .chatMessage(let envelope) = try codec.decode(json) else {
            Issue.record("expected a chat message")
            return
        }
        #expect(envelope.version == "1.0")
        #expect(envelope.sequence == 1)
        #expect(envelope.serverTimestamp == nil)
        #expect(envelope.payload.id == MessageID("msg-1"))
        #expect(envelope.payload.content == "Hello from bot")
        #expect(envelope.payload.sender == .bot(name: "Opta"))
        #expect(envelope.payload.timestamp == date("2024-01-30T12:00:00Z"))
        #expect(envelope.payload.status == .delivered)
        #expect(envelope.payload.threadID == nil)
        #expect(envelope.payload.replyTo == nil)
    }

    @Test func chatMessageFromOpta() throws {
        let json = """
            {"version": "1.0", "type": "chat.message", "sequence": 1,
             "payload": {"id": {"value": "incoming-1"}, "content": "Hello from Opta",
                         "sender": {"type": "bot", "name": "Opta"}, "timestamp": "2024-01-30T12:00:00Z",
                         "status": "delivered", "threadID": null, "replyTo": null},
             "serverTimestamp": null}
            """
        guard case .chatMessage(let envelope) = try codec.decode(json) else {
            Issue.record("expected a chat message")
            return
        }
        #expect(envelope.payload.id.value == "incoming-1")
        #expect(envelope.payload.content == "Hello from Opta")
        #expect(envelope.payload.sender == .bot(name: "Opta"))
    }

    @Test func messageAck() throws {
        let json = """
            {
                "version": "1.0",
                "type": "message.ack",
                "sequence": 5,
                "payload": {
                    "messageID": {"value": "msg-123"},
                    "status": "received",
                    "serverTimestamp": "2024-01-30T12:00:00Z"
                },
                "serverTimestamp": null
            }
            """
        guard case .messageAck(let envelope) = try codec.decode(json) else {
            Issue.record("expected an ack")
            return
        }
        #expect(envelope.sequence == 5)
        #expect(envelope.payload.messageID == MessageID("msg-123"))
        #expect(envelope.payload.status == .received)
        #expect(envelope.payload.serverTimestamp == date("2024-01-30T12:00:00Z"))
    }

    @Test(arguments: [
        (
            """
            {"version": "1.0", "type": "bot.state", "sequence": 10,
             "payload": {"state": "thinking", "botName": "Opta", "detail": null, "timestamp": "2024-01-30T12:00:00Z"},
             "serverTimestamp": null}
            """, 10, nil as String?
        ),
        (
            """
            {"version": "1.0", "type": "bot.state", "sequence": 5,
             "payload": {"state": "thinking", "botName": "Opta", "detail": "Processing your request...", "timestamp": "2024-01-30T12:00:00Z"},
             "serverTimestamp": null}
            """, 5, "Processing your request..."
        ),
    ])
    func botState(json: String, sequence: Int, detail: String?) throws {
        guard case .botState(let envelope) = try codec.decode(json) else {
            Issue.record("expected a bot state")
            return
        }
        #expect(envelope.sequence == sequence)
        #expect(envelope.payload.state == .thinking)
        #expect(envelope.payload.botName == "Opta")
        #expect(envelope.payload.detail == detail)
        #expect(envelope.payload.timestamp == date("2024-01-30T12:00:00Z"))
    }

    @Test(arguments: [
        (
            """
            {"version": "1.0", "type": "streaming.chunk", "sequence": 15,
             "payload": {"messageID": {"value": "msg-stream"}, "chunkIndex": 3, "content": "Hello ", "isFinal": false},
             "serverTimestamp": null}
            """, StreamingChunk(messageID: MessageID("msg-stream"), chunkIndex: 3, content: "Hello ", isFinal: false)
        ),
        (
            """
            {"version": "1.0", "type": "streaming.chunk", "sequence": 10,
             "payload": {"messageID": {"value": "stream-1"}, "chunkIndex": 0, "content": "Hello ", "isFinal": false},
             "serverTimestamp": null}
            """, StreamingChunk(messageID: MessageID("stream-1"), chunkIndex: 0, content: "Hello ", isFinal: false)
        ),
        (
            """
            {"version": "1.0", "type": "streaming.chunk", "sequence": 11,
             "payload": {"messageID": {"value": "stream-1"}, "chunkIndex": 1, "content": "World!", "isFinal": true},
             "serverTimestamp": null}
            """, StreamingChunk(messageID: MessageID("stream-1"), chunkIndex: 1, content: "World!", isFinal: true)
        ),
    ])
    func streamingChunk(json: String, expected: StreamingChunk) throws {
        guard case .streamingChunk(let envelope) = try codec.decode(json) else {
            Issue.record("expected a chunk")
            return
        }
        #expect(envelope.payload == expected)
    }

    @Test func ping() throws {
        let json = """
            {"version": "1.0", "type": "system.ping", "sequence": 100,
             "payload": {"timestamp": "2024-01-30T12:00:00Z"}, "serverTimestamp": null}
            """
        guard case .ping(let envelope) = try codec.decode(json) else {
            Issue.record("expected a ping")
            return
        }
        #expect(envelope.sequence == 100)
        #expect(envelope.payload.timestamp == date("2024-01-30T12:00:00Z"))
    }

    @Test func pong() throws {
        let json = """
            {"version": "1.0", "type": "system.pong", "sequence": 100,
             "payload": {"timestamp": "2024-01-30T12:00:00Z"}, "serverTimestamp": null}
            """
        guard case .pong(let envelope) = try codec.decode(json) else {
            Issue.record("expected a pong")
            return
        }
        #expect(envelope.sequence == 100)
    }

    @Test(arguments: [
        (#"{"version": "1.0", "type": "future.feature", "sequence": 1, "payload": {}, "serverTimestamp": null}"#, 1),
        (#"{"version": "1.0", "type": "future.feature", "sequence": 99, "payload": {"data": "unknown"}, "serverTimestamp": null}"#, 99),
    ])
    func unknownTypeIsKept(json: String, sequence: Int) throws {
        guard case .unknown(let type, let decodedSequence, let data) = try codec.decode(json) else {
            Issue.record("expected an unknown type")
            return
        }
        #expect(type == "future.feature")
        #expect(decodedSequence == sequence)
        #expect(data == Data(json.utf8))
        // Passed on, it is the same bytes.
        #expect(try codec.encode(.unknown(type: type, sequence: decodedSequence, data: data)) == Data(json.utf8))
    }

    @Test func missingType() {
        let json = #"{"version": "1.0", "sequence": 1, "payload": {}}"#
        #expect(throws: WireCodecError.self) { try codec.decode(json) }
        do {
            _ = try codec.decode(json)
        } catch {
            #expect(error.kind == "missing-type")
        }
    }

    @Test func invalidJSON() {
        do {
            _ = try codec.decode("not valid json {")
            Issue.record("invalid JSON decoded")
        } catch {
            #expect(error.kind == "invalid-json")
        }
    }

    /// The seed's streaming fast-path example: the right type with an empty payload.
    @Test func knownTypeWithWrongShape() {
        do {
            _ = try codec.decode(#"{"type": "streaming.chunk", "version": "1.0", "sequence": 1, "payload": {}}"#)
            Issue.record("an empty chunk payload decoded")
        } catch {
            #expect(error.kind == "invalid-payload")
            #expect(error.description.contains("streaming.chunk"))
        }
    }
}
