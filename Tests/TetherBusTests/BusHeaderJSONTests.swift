import Foundation
import Testing
import TetherTesting
import TetherWire

@testable import TetherSchema

/// The bus header's own writer and reader against Foundation's JSONEncoder and JSONDecoder,
/// configured as the bus configures them: the same text out, the same header (or the same
/// refusal) in.
@Suite struct BusHeaderJSONTests {
    private static let sources = [
        "tether-connd", "tether watch", "example-python", "bench-publisher", "tëther-π", "a/b", "", "x\u{7F}y",
        // These need escaping: written through the encoder.
        "quote\"d", "back\\slash", "tab\there", "new\nline", "\u{01}",
    ]

    private static func header(_ random: inout SeededRandom) -> BusHeader {
        let milliseconds: Int64 =
            switch random.next() % 10 {
            case 0: Int64.random(in: -10_000_000_000...0, using: &random)  // before 1970: through the encoder
            case 1: 253_402_300_800_000 + Int64.random(in: 0...10_000_000, using: &random)  // the year 10000 on
            case 2: Int64.random(in: 0...86_400_000, using: &random)  // 1970-01-01
            default: Int64.random(in: 0..<253_402_300_800_000, using: &random)
            }
        // Now and then finer than a millisecond, as Date() is.
        let extra = random.next() % 3 == 0 ? Double(random.next() % 1000) / 1_000_000 : 0
        return BusHeader(
            schema: random.next() % 8 == 0 ? Int.random(in: -5...1_000_000, using: &random) : 1,
            source: sources[Int(random.next() % UInt64(sources.count))],
            pid: random.next() % 4 == 0 ? nil : Int32.random(in: Int32.min...Int32.max, using: &random),
            sequence: random.next() % 4 == 0 ? random.next() : random.next() % 100_000,
            timestamp: Date(timeIntervalSince1970: Double(milliseconds) / 1000 + extra),
            replay: random.next() % 2 == 0)
    }

    @Test func writesWhatTheEncoderWrites() throws {
        var random = SeededRandom(seed: 18)
        for _ in 0..<5_000 {
            let header = Self.header(&random)
            let expected = Array(try BusSchema.makeEncoder().encode(header))
            #expect(header.jsonBytes() == expected, "\(String(decoding: header.jsonBytes(), as: UTF8.self)) ≠ \(String(decoding: expected, as: UTF8.self))")
        }
    }

    /// What the decoder reads: the header, or nil when it refuses the text.
    private func reference(_ text: [UInt8]) -> BusHeader? {
        try? BusSchema.makeDecoder().decode(BusHeader.self, from: Data(text))
    }

    @Test func readsWhatTheDecoderReads() throws {
        var random = SeededRandom(seed: 19)
        var direct = 0
        for _ in 0..<5_000 {
            let header = Self.header(&random)
            let written = Array(try BusSchema.makeEncoder().encode(header))
            let read = try? BusHeader(jsonBytes: written)
            #expect(read == reference(written), "\(String(decoding: written, as: UTF8.self))")
            if written.withUnsafeBufferPointer(BusHeaderJSON.parse) != nil { direct += 1 }
        }
        // About 37% take the direct path here: the rest have escaped sources, dates outside
        // 1970-9999 or sequences of 19 digits and more, which the decoder reads.
        #expect(direct > 1_500, "only \(direct) of 5000 read directly")
    }

    @Test func readsEveryVariantAsTheDecoderDoes() {
        let base = #"{"pid":4242,"replay":false,"schema":1,"sequence":42,"source":"tether-connd","timestamp":"2026-11-23T05:18:52.251Z"}"#
        let shapes: [String] = [
            base,
            // Python's json.dumps, keys in another order, space and newlines around.
            #"{"schema": 1, "source": "example-python", "pid": 7, "sequence": 3, "timestamp": "2026-11-23T05:18:52.251Z", "replay": true}"#,
            " \n{ \"replay\" :false ,\"schema\":1,\"sequence\":1,\"source\":\"x\",\"timestamp\":\"2026-02-28T23:59:59Z\"}\t\r\n",
            #"{"replay":false,"schema":1,"sequence":1,"source":"x","timestamp":"2024-02-29T00:00:00.000Z"}"#,
        ]
        let replacements: [(String, String)] = [
            // Dates the direct path leaves to the decoder, or the decoder refuses.
            (".251Z", ".25Z"), (".251Z", ".2519Z"), (".251Z", ".251+01:00"), (".251Z", ".251z"), ("2026-11-23", "2026-02-30"),
            ("2026-11-23", "2025-02-29"), ("2026-11-23", "2026-13-01"), ("2026-11-23", "1969-12-31"), ("T05:", "T24:"), (":52.", ":60."),
            ("T05", " 05"),
            // Numbers, strings and keys.
            ("4242", "null"), ("4242", "04242"), ("4242", "-4242"), ("4242", "4.242e3"), ("4242", "1e3"), ("4242", "4294967296"),
            ("\"sequence\":42", "\"sequence\":99999999999999999999"), ("\"sequence\":42", "\"sequence\":1234567890123456789"),
            ("\"sequence\":42", "\"sequence\":-1"), ("\"schema\":1", "\"schema\":-0"),
            ("false", "0"), ("false", "falsey"), ("tether-connd", #"tether\u002Dconnd"#), ("tether-connd", "tether\u{01}connd"),
            ("\"pid\":4242,", ""), ("\"schema\":1,", ""), ("\"pid\":4242,", "\"pid\":4242,\"pid\":4243,"),
            ("\"pid\":4242,", "\"pid\":4242,\"extra\":[1,{\"a\":2}],"), ("\"pid\"", "\"p\\u0069d\""),
        ]
        let broken: [String] = [base + " x", base + "}", String(base.dropLast()), "", "[]", "{}", "null", "{\"source\":}"]
        let variants = shapes + replacements.map { base.replacingOccurrences(of: $0.0, with: $0.1) } + broken
        for variant in variants {
            let text = Array(variant.utf8)
            #expect((try? BusHeader(jsonBytes: text)) == reference(text), "\(variant)")
        }
        // The shapes Tether's programs and the Python front end write are read directly.
        for variant in shapes {
            #expect(Array(variant.utf8).withUnsafeBufferPointer(BusHeaderJSON.parse) != nil, "\(variant)")
        }
    }

    /// The form the bus itself writes is read in one pass, to the same header the decoder
    /// reads; what that pass gives up on, the general reader or the decoder reads.
    @Test func theBusesOwnFormIsReadInOnePass() {
        var random = SeededRandom(seed: 20)
        var fixed = 0
        for _ in 0..<5_000 {
            let header = Self.header(&random)
            let written = header.jsonBytes()
            let reference = reference(written)
            let read = written.withUnsafeBufferPointer(BusHeaderJSON.parseFixedForm)
            #expect(read == nil || read == reference, "\(String(decoding: written, as: UTF8.self))")
            #expect((try? BusHeader(jsonBytes: written)) == reference, "\(String(decoding: written, as: UTF8.self))")
            // Written directly, with no sign to read and at most 18 digits: the one pass reads it.
            let unsigned = header.schema >= 0 && (header.pid ?? 0) >= 0
            if written.withUnsafeBufferPointer(BusHeaderJSON.parse) != nil, unsigned, header.sequence < 1_000_000_000_000_000_000 {
                #expect(read != nil, "\(String(decoding: written, as: UTF8.self))")
            }
            if read != nil { fixed += 1 }
        }
        // About 23% here: the rest have negative pids (half the random ones), escaped sources,
        // dates outside 1970-9999 or long sequences, which the other readers read.
        #expect(fixed > 1_000, "only \(fixed) of 5000 read in one pass")
    }

    @Test func otherWritersFormsAreLeftToTheGeneralReader() {
        let shapes = [
            // Keys in another order, space, an escape, a key the bus does not write: as front ends
            // written from BUS.md alone may write them.
            #"{"schema": 1, "source": "example-python", "pid": 7, "sequence": 3, "timestamp": "2026-11-23T05:18:52.251Z", "replay": true}"#,
            #"{"replay":false,"schema":1,"sequence":1,"source":"x","timestamp":"2026-11-23T05:18:52.251Z","pid":7}"#,
            #"{"pid":7, "replay":false,"schema":1,"sequence":1,"source":"x","timestamp":"2026-11-23T05:18:52.251Z"}"#,
            #"{"pid":7,"replay":false,"schema":1,"sequence":1,"source":"x","timestamp":"2026-11-23T05:18:52.251Z"} "#,
            #"{"pid":-7,"replay":false,"schema":1,"sequence":1,"source":"x","timestamp":"2026-11-23T05:18:52.251Z"}"#,
        ]
        for shape in shapes {
            let text = Array(shape.utf8)
            #expect(text.withUnsafeBufferPointer(BusHeaderJSON.parseFixedForm) == nil, "\(shape)")
            #expect(text.withUnsafeBufferPointer(BusHeaderJSON.parse) != nil, "\(shape)")
            #expect((try? BusHeader(jsonBytes: text)) == reference(text), "\(shape)")
        }
        // An escape: left to the decoder by both.
        let escaped = Array(#"{"pid":7,"replay":false,"schema":1,"sequence":1,"source":"a\/b","timestamp":"2026-11-23T05:18:52.251Z"}"#.utf8)
        #expect(escaped.withUnsafeBufferPointer(BusHeaderJSON.parseFixedForm) == nil)
        #expect(escaped.withUnsafeBufferPointer(BusHeaderJSON.parse) == nil)
        #expect((try? BusHeader(jsonBytes: escaped))?.source == "a/b")
    }

    /// A header cut short anywhere, or with any byte changed, is read as the decoder reads it,
    /// or refused as it refuses it: nothing is read differently, nothing crashes.
    @Test func damagedHeadersAreReadOrRefusedAsTheDecoderDoes() {
        let written = BusHeader(source: "tether-connd", pid: 4242, sequence: 42, timestamp: Date(timeIntervalSince1970: 1_795_411_132.251)).jsonBytes()
        var damaged: [[UInt8]] = (0..<written.count).map { Array(written[..<$0]) }
        for index in written.indices {
            for byte: UInt8 in [0x00, 0x20, UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "}"), 0xC3, 0xFF] {
                var copy = written
                copy[index] = byte
                damaged.append(copy)
            }
        }
        for text in damaged {
            let reference = reference(text)
            let read = text.withUnsafeBufferPointer(BusHeaderJSON.parseFixedForm)
            #expect(read == nil || read == reference, "\(String(decoding: text, as: UTF8.self))")
            #expect((try? BusHeader(jsonBytes: text)) == reference, "\(String(decoding: text, as: UTF8.self))")
        }
    }

    /// The date's second is written once and kept: messages in the same second, the next
    /// second, and a clock set back still get the text the encoder writes.
    @Test func timestampsFromTheKeptSecondAreWhatTheEncoderWrites() throws {
        let start = 1_795_411_132.0
        let offsets: [Double] = [0.0, 0.0004, 0.001, 0.5, 0.9994, 0.9996, 1.0, 1.25, 61, 3_600, 86_400, -1, -86_400 * 365, 0.999]
        for offset in offsets {
            let header = BusHeader(source: "tether-connd", pid: 1, sequence: 1, timestamp: Date(timeIntervalSince1970: start + offset))
            let expected = Array(try BusSchema.makeEncoder().encode(header))
            #expect(header.jsonBytes() == expected, "\(String(decoding: header.jsonBytes(), as: UTF8.self)) ≠ \(String(decoding: expected, as: UTF8.self))")
        }
    }

    @Test func utf8IsCheckedAsTheStandardLibraryChecksIt() {
        let cases: [[UInt8]] = [
            [], Array("tether-connd".utf8), Array("tëther-π".utf8), Array("😀".utf8), [0xFF], [0xC3], [0x61, 0xC3], [0xE2, 0x82], [0xED, 0xA0, 0x80],
            [0xC0, 0xAF], [0x7F], [0x00],
        ]
        for bytes in cases {
            let read = bytes.withUnsafeBufferPointer { DirectJSON.string(utf8: $0) }
            #expect(read == String(validating: bytes, as: UTF8.self), "\(bytes)")
        }
    }

    @Test func bytesThatAreNotUTF8AreRefusedAsTheDecoderRefusesThem() {
        var text = Array(#"{"replay":false,"schema":1,"sequence":1,"source":"ab","timestamp":"2026-11-23T05:18:52.251Z"}"#.utf8)
        text[text.firstIndex(of: UInt8(ascii: "b"))!] = 0xFF
        #expect((try? BusHeader(jsonBytes: text)) == nil)
        #expect(reference(text) == nil)
    }
}
