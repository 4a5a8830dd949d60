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

    @Test func malformedFramesAreRefusedInWords() {
        let header = Array(#"{"replay":false,"schema":1,"sequence":1,"source":"x","timestamp":"2026-11-23T10:00:00.000Z"}"#.utf8)
        let cases: [([[UInt8]], String)] = [
            ([Array("t".utf8), header], "expected 3 frames"),
            ([[], header, []], "topic is empty"),
            ([[0xFF, 0xFE], header, []], "not UTF-8"),
            ([Array("t".utf8), Array("{}".utf8), []], "is not a bus header"),
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
