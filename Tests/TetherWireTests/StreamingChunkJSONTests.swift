import Foundation
import Testing

@testable import TetherWire

/// The direct reader of `streaming.chunk` frames against JSONDecoder: whatever it reads, it
/// reads as the decoder does, and it reads the frames gateways write.
@Suite struct StreamingChunkJSONTests {
    private struct Read: Equatable {
        var version: String
        var type: String
        var sequence: Int
        var payload: StreamingChunk
        var serverTimestamp: Date?

        init(_ envelope: WireEnvelope<StreamingChunk>) {
            (version, type, sequence, payload, serverTimestamp) =
                (envelope.version, envelope.type, envelope.sequence, envelope.payload, envelope.serverTimestamp)
        }
    }

    private func direct(_ text: String) -> Read? {
        Array(text.utf8).withUnsafeBufferPointer(WireCodec.directChunk).map(Read.init)
    }

    private func reference(_ text: String) -> Read? {
        (try? WireCodec.decoder.decode(WireEnvelope<StreamingChunk>.self, from: Data(text.utf8))).map(Read.init)
    }

    @Test func readsWhatTheCodecWritesAsTheDecoderDoes() throws {
        let contents = ["w ", "", "quote \" and \\ backslash", "line\nbreak\ttab\u{01}", "é€😀 漢字", "/slash/", "{\"json\": [1]}"]
        for (index, content) in contents.enumerated() {
            for replyTo in [nil, MessageID("m-\(index)")] {
                for stamp in [nil, ISO8601.parse("2026-11-25T01:02:03Z"), ISO8601.parse("2026-11-25T01:02:03.456Z")] {
                    let chunk = StreamingChunk(
                        messageID: MessageID("r-\(index)"), chunkIndex: index * 7, content: content, isFinal: index % 2 == 0, replyTo: replyTo)
                    let data = try WireCodec().encode(chunk, type: "streaming.chunk", sequence: 40 + index, serverTimestamp: stamp)
                    let text = String(decoding: data, as: UTF8.self)
                    let read = try #require(direct(text), "not read directly: \(text)")
                    #expect(read == reference(text), "\(text)")
                    // The codec writes dates to the second: the direct reader reads what was written.
                    #expect(read.payload == chunk && read.serverTimestamp == stamp.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) })
                }
            }
        }
    }

    @Test func leavesEveryOtherFormToTheDecoderOrReadsItTheSame() {
        let base =
            #"{"payload":{"chunkIndex":3,"content":"w ","isFinal":false,"messageID":{"value":"r-1"},"replyTo":{"value":"m-1"}},"sequence":7,"serverTimestamp":"2026-11-25T01:02:03Z","type":"streaming.chunk","version":"1.0"}"#
        let replacements: [(String, String)] = [
            (#","replyTo":{"value":"m-1"}"#, ""), (#"{"value":"m-1"}"#, "null"), (#""2026-11-25T01:02:03Z""#, "null"),
            (#","serverTimestamp":"2026-11-25T01:02:03Z""#, ""), ("01:02:03Z", "01:02:03.5Z"), ("01:02:03Z", "01:02:03+01:00"),
            ("01:02:03Z", "yesterday"), (#""w ""#, #""w\u0020\ud83d\ude00""#), (#""w ""#, #""\ud83d""#), (#""w ""#, "7"), ("3,", "3.0,"),
            ("3,", "\"3\","), ("false", "0"), (#""version":"1.0""#, #""version":1"#), ("streaming.chunk", "chat.message"),
            (#","sequence":7"#, ""), (#""sequence":7"#, #""sequence":null"#), (#""isFinal":false,"#, ""), (#""value":"r-1""#, #""value":"r-1","x":1"#),
            (#""version":"1.0""#, #""version":"1.0","extra":{}"#), (#""sequence":7"#, #""sequence":7,"sequence":8"#), ("{\"payload\"", " { \"payload\" "),
        ]
        let variants = replacements.map { base.replacingOccurrences(of: $0.0, with: $0.1) } + [base, base + "x", String(base.dropLast()), "[]", ""]
        for variant in variants {
            if let read = direct(variant) {
                #expect(read == reference(variant), "\(variant)")
            }
            // Whichever path it takes, the codec answers as the decoder would.
            let decoded = try? WireCodec().decode(variant)
            if case .streamingChunk(let envelope)? = decoded {
                #expect(Read(envelope) == reference(variant), "\(variant)")
            } else {
                #expect(reference(variant) == nil || variant.contains("chat.message"), "\(variant)")
            }
        }
        #expect(direct(base) != nil)
    }
}
