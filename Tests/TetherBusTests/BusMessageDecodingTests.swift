import Foundation
import Testing
import TetherBus
import TetherSchema
import TetherTesting

/// The bus message decoder on the inputs the fuzzer (scripts/fuzz) found or starts from.
@Suite struct BusMessageDecodingTests {
    /// Every file in Tests/Fuzz/`folder`/fuzz-bus: bytes split at zero bytes into frames.
    private func inputs(_ folder: String) throws -> [(String, [[UInt8]])] {
        let directory = Programs.packageRoot + "/Tests/Fuzz/\(folder)/fuzz-bus"
        return try FileManager.default.contentsOfDirectory(atPath: directory).sorted().map { name in
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
            return (name, bytes.split(separator: 0, maxSplits: 4, omittingEmptySubsequences: false).map { Array($0) })
        }
    }

    @Test func headersReadBackTheSameAfterEncoding() throws {
        let cases = try inputs("Regressions") + inputs("Seeds")
        #expect(cases.count >= 16)
        for (name, frames) in cases {
            // An input the decoder refuses is fine; one it reads must read back the same.
            guard let message = try? BusMessage(frames: frames) else { continue }
            let header = Array(try BusSchema.makeEncoder().encode(message.header))
            let again = try BusMessage(frames: [Array(message.topic.name.utf8), header, Array(message.body)])
            #expect(again.header == message.header, "\(name): \(String(decoding: frames[1], as: UTF8.self)) → \(String(decoding: header, as: UTF8.self))")
        }
    }

    @Test func gatewayFramesAndSendTakeThirtyTwoMebibytesAndEverythingElseOne() {
        #expect(BusSchema.maximumFrameBodySize == 33_554_432 && BusSchema.maximumBodySize == 1_048_576)
        for topic in [Topic.wireInbound, .wireOutbound] {
            #expect(BusSchema.maximumBodySize(of: .topic(topic.name)) == BusSchema.maximumFrameBodySize, "\(topic)")
        }
        for topic in [Topic.conversationMessage, .heartbeat, .approvals, "wire", "wire.outbound", "wire.o", "test.oversized"] {
            #expect(BusSchema.maximumBodySize(of: .topic(topic.name)) == BusSchema.maximumBodySize, "\(topic)")
        }
        #expect(BusSchema.maximumBodySize(of: .command(SendMessageCommand.method)) == BusSchema.maximumFrameBodySize)
        for method in [TranscriptCommand.method, "display.save", "approve", "wire.out"] {
            #expect(BusSchema.maximumBodySize(of: .command(method)) == BusSchema.maximumBodySize, "\(method)")
        }
        // What a socket lets through: the largest body, and a megabyte more for a command answered tooLarge.
        #expect(BusSchema.largestBodySize == BusSchema.maximumFrameBodySize)
        #expect(BusSchema.commandReadLimit == BusSchema.maximumFrameBodySize + BusSchema.maximumBodySize)
    }

    @Test func aTwoMebibyteBodyIsReadOnAGatewayFrameTopicAndDroppedOnAnyOther() throws {
        let header = Array(#"{"replay":false,"schema":1,"sequence":1,"source":"x","timestamp":"2026-11-23T10:00:00.000Z"}"#.utf8)
        let body = [UInt8](repeating: 32, count: 2 << 20)
        #expect(try BusMessage(frames: [Array("wire.out".utf8), header, body]).body.count == 2 << 20)
        #expect(throws: BusError.self) { try BusMessage(frames: [Array("conv.message".utf8), header, body]) }
        let largest = [UInt8](repeating: 32, count: BusSchema.maximumFrameBodySize)
        #expect(try BusMessage(frames: [Array("wire.in".utf8), header, largest]).body.count == BusSchema.maximumFrameBodySize)
        do {
            _ = try BusMessage(frames: [Array("wire.in".utf8), header, largest + [32]])
            Issue.record("a wire.in body over 32 MiB was read")
        } catch {
            #expect("\(error)".contains("body of 33554433 bytes is over the limit of 33554432 for topic 'wire.in'"), "\(error)")
        }
    }

    @Test func topicsAreReadAsUTF8() throws {
        let header = BusHeader(source: "x", sequence: 1).jsonBytes()
        #expect(try BusMessage(frames: [Array("tëst.π".utf8), header, Array("{}".utf8)]).topic.name == "tëst.π")
        #expect(throws: BusError.self) { try BusMessage(frames: [[UInt8(ascii: "t"), 0xC3], header, Array("{}".utf8)]) }
    }

    @Test func malformedFramesAreRefusedInWords() {
        let header = Array(#"{"replay":false,"schema":1,"sequence":1,"source":"x","timestamp":"2026-11-23T10:00:00.000Z"}"#.utf8)
        let cases: [([[UInt8]], String)] = [
            ([Array("t".utf8), header], "expected 3 frames"),
            ([[], header, []], "topic is empty"),
            ([[0xFF, 0xFE], header, []], "not UTF-8"),
            ([Array("t".utf8), Array("{}".utf8), []], "is not a bus header"),
            ([Array("t".utf8), Array(header.dropLast(2)), []], "is not a bus header"),
            ([Array("t".utf8), Array(String(decoding: header, as: UTF8.self).replacingOccurrences(of: ":1,", with: ":01,").utf8), []], "is not a bus header"),
            ([Array("t".utf8), Array(String(decoding: header, as: UTF8.self).replacingOccurrences(of: "2026", with: "1244").utf8), []], "is not a bus header"),
            ([Array("t".utf8), header, [UInt8](repeating: 32, count: BusSchema.maximumBodySize + 1)], "over the limit"),
        ]
        for (frames, expected) in cases {
            #expect(throws: BusError.self) { try BusMessage(frames: frames) }
            do {
                _ = try BusMessage(frames: frames)
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
    }
}
