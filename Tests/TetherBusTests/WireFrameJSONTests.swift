import Foundation
import Testing
import TetherTesting

@testable import TetherSchema

/// `WireFrame`'s own writer and reader against the bus's JSONEncoder and JSONDecoder: the same
/// bytes out, the same frame (or the same refusal) in.
@Suite struct WireFrameJSONTests {
    /// Pieces a gateway frame's text is made of, escapes and all.
    private static let pieces = [
        #"{"type":"streaming.chunk","payload":{"content":"w "}}"#, "plain", "\"", "\\", "/", "\u{08}", "\t", "\n", "\u{0B}", "\u{0C}", "\r",
        "\u{00}", "\u{1F}", "\u{7F}", "é", "€", "😀", "\u{2028}", "漢字", " ", "\\u0041",
    ]

    private static func frame(_ random: inout SeededRandom) -> WireFrame {
        let count = Int(random.next() % 12)
        let text = (0..<count).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
        let epoch: Int? = random.next() % 4 == 0 ? nil : Int.random(in: -3...1_000_000, using: &random)
        return WireFrame(epoch: epoch, text: text)
    }

    private func reference(_ bytes: [UInt8]) -> WireFrame? {
        try? BusSchema.makeDecoder().decode(WireFrame.self, from: Data(bytes))
    }

    private func direct(_ bytes: [UInt8]) -> WireFrame? {
        bytes.withUnsafeBytes { try? WireFrame(jsonBytes: $0) }
    }

    @Test func writesWhatTheEncoderWritesAndReadsItBack() throws {
        var random = SeededRandom(seed: 20)
        for _ in 0..<5_000 {
            let frame = Self.frame(&random)
            let expected = Array(try BusSchema.makeEncoder().encode(frame))
            #expect(frame.jsonBytes() == expected, "\(String(decoding: frame.jsonBytes(), as: UTF8.self)) ≠ \(String(decoding: expected, as: UTF8.self))")
            #expect(direct(expected) == frame)
            #expect(expected.withUnsafeBufferPointer(WireFrame.parse) != nil, "not read directly: \(String(decoding: expected, as: UTF8.self))")
        }
    }

    @Test func readsEveryVariantAsTheDecoderDoes() {
        let variants: [String] = [
            #"{"epoch":3,"text":"hello"}"#, #"{"text":"hello"}"#, #"{"text":"hello","epoch":3}"#, #"{ "epoch" : null , "text" : "a" }"#,
            #"{"epoch":3,"text":"a\/b"}"#, #"{"epoch":3,"text":"\u0041\u00e9\u00E9"}"#, #"{"epoch":3,"text":"\ud83d\ude00"}"#,
            #"{"epoch":3,"text":"\uD83D\uDE00 and \u20ac"}"#,
            // Left to the decoder, which reads or refuses them.
            #"{"epoch":3,"text":"\ud83d"}"#, #"{"epoch":3,"text":"\ude00"}"#, #"{"epoch":3,"text":"\ud83d\u0041"}"#, #"{"epoch":3,"text":"\x"}"#,
            #"{"epoch":3,"text":"\u00g1"}"#, #"{"epoch":3,"text":"\u00"}"#, "{\"epoch\":3,\"text\":\"a\u{01}b\"}", "{\"epoch\":3,\"text\":\"a\tb\"}",
            #"{"epoch":"3","text":"a"}"#, #"{"epoch":1.5,"text":"a"}"#, #"{"epoch":1e2,"text":"a"}"#, #"{"epoch":3,"text":"a","extra":1}"#,
            #"{"epoch":3,"text":"a","text":"b"}"#, #"{"epoch":3}"#, #"{"epoch":3,"text":null}"#, #"{"epoch":3,"text":7}"#, #"{"epoch":3,"text":"a"} x"#,
            #"{"epoch":3,"text":"a"#, #"{"epoch":3,"text":"a\"#, "{}", "[]", "", #"{"epoch":99999999999999999999,"text":"a"}"#,
        ]
        for variant in variants {
            let bytes = Array(variant.utf8)
            #expect(direct(bytes) == reference(bytes), "\(variant)")
        }
        var notUTF8 = Array(#"{"epoch":3,"text":"ab"}"#.utf8)
        notUTF8[notUTF8.firstIndex(of: UInt8(ascii: "b"))!] = 0xFF
        #expect(direct(notUTF8) == nil && reference(notUTF8) == nil)
    }
}
