import FoundationEssentials
import Synchronization
import TetherWire

#if canImport(Glibc)
import Glibc
#endif

// Every bus message carries a header, so it is written and read here directly instead of
// through JSONEncoder and JSONDecoder, which cost some 30,000 instructions each way for it
// (most of a message's cost on the bus). The text is the same: `jsonBytes()` writes what
// `BusSchema.makeEncoder()` writes, and `init(jsonBytes:)` reads what `BusSchema.makeDecoder()`
// reads. A header as the bus writes it is read in one pass (`parseFixedForm`); another
// writer's (keys in any order, space) by the general reader (`parse`); anything off both
// paths (an escaped string, an unknown key, a date with a zone offset) goes through the
// Foundation coders, so nothing is read differently.

extension BusHeader {
    /// The header as JSON: `{"pid":4242,"replay":false,"schema":1,"sequence":42,"source":"tether-connd","timestamp":"…"}`.
    public func jsonBytes() -> [UInt8] {
        guard let milliseconds = BusHeaderJSON.milliseconds(timestamp),
            source.utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(DirectJSON.isPlain) }) ?? source.utf8.allSatisfy(DirectJSON.isPlain)
        else {
            // Sources that need escaping and dates outside 1970-9999: as the encoder writes them.
            return (try? Array(BusSchema.encoder.encode(self))) ?? []
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(112 + source.utf8.count)
        bytes.append(UInt8(ascii: "{"))
        if let pid {
            DirectJSON.append(#""pid":"#, to: &bytes)
            DirectJSON.appendDecimal(Int64(pid), to: &bytes)
            bytes.append(UInt8(ascii: ","))
        }
        DirectJSON.append(replay ? #""replay":true,"schema":"# : #""replay":false,"schema":"#, to: &bytes)
        DirectJSON.appendDecimal(Int64(schema), to: &bytes)
        DirectJSON.append(#","sequence":"#, to: &bytes)
        DirectJSON.appendDecimal(sequence, to: &bytes)
        DirectJSON.append(#","source":""#, to: &bytes)
        bytes.append(contentsOf: source.utf8)
        DirectJSON.append(#"","timestamp":""#, to: &bytes)
        BusHeaderJSON.appendTimestamp(milliseconds: milliseconds, to: &bytes)
        DirectJSON.append(#""}"#, to: &bytes)
        return bytes
    }

    /// Reads a header written as JSON, as ``BusSchema/makeDecoder()`` would.
    public init(jsonBytes bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { try BusHeader(jsonBytes: $0) }
    }

    /// Reads a header written as JSON where it lies (a frame in libzmq's buffer), as
    /// ``BusSchema/makeDecoder()`` would.
    public init(jsonBytes bytes: UnsafeRawBufferPointer) throws {
        if let header = bytes.withMemoryRebound(to: UInt8.self, BusHeaderJSON.parseFixedForm) {
            self = header
        } else if let header = bytes.withMemoryRebound(to: UInt8.self, BusHeaderJSON.parse) {
            self = header
        } else {
            self = try BusSchema.decoder.decode(BusHeader.self, from: Data(bytes))
        }
    }
}

/// The direct path of ``BusHeader/jsonBytes()`` and ``BusHeader/init(jsonBytes:)``.
enum BusHeaderJSON {
    // MARK: Dates

    private static let millisecondsPerDay: Int64 = 86_400_000
    /// 10000-01-01T00:00:00Z: bus dates are before it.
    private static let endOfYear9999: Int64 = 253_402_300_800_000

    /// `date` in whole milliseconds since 1970, as ``BusSchema/format(_:)`` rounds it; nil
    /// outside 1970-9999.
    static func milliseconds(_ date: Date) -> Int64? {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        return (0..<endOfYear9999).contains(milliseconds) ? milliseconds : nil
    }

    /// A second's text, `2026-11-23T05:18:52`: the same for every message published in it.
    struct SecondText {
        var second: Int64
        /// The 19 bytes of the text, in the first 19 of these 24.
        var bytes: (UInt64, UInt64, UInt64)
    }

    /// The second of the last timestamp written, so that the next in the same second formats
    /// only its milliseconds.
    private static let lastSecond = Mutex(SecondText(second: -1, bytes: (0, 0, 0)))

    /// The timestamp of `milliseconds` (since 1970, within 1970-9999), `2026-11-23T05:18:52.251Z`,
    /// as ``BusSchema/format(_:)`` writes it.
    static func appendTimestamp(milliseconds: Int64, to bytes: inout [UInt8]) {
        let (second, millisecond) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        var text = lastSecond.withLock { $0 }
        if text.second != second {
            text = SecondText(second: second, bytes: secondText(second))
            lastSecond.withLock { $0 = text }
        }
        withUnsafeBytes(of: &text.bytes) { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[0..<19])) }
        let fraction = Int(millisecond)
        bytes.append(UInt8(ascii: "."))
        bytes.append(UInt8(ascii: "0") &+ UInt8(fraction / 100))
        bytes.append(UInt8(ascii: "0") &+ UInt8(fraction / 10 % 10))
        bytes.append(UInt8(ascii: "0") &+ UInt8(fraction % 10))
        bytes.append(UInt8(ascii: "Z"))
    }

    /// `YYYY-MM-DDTHH:MM:SS` of a second since 1970, in the first 19 bytes.
    private static func secondText(_ second: Int64) -> (UInt64, UInt64, UInt64) {
        let (days, inDay) = second.quotientAndRemainder(dividingBy: 86_400)
        let (year, month, day) = civil(fromDays: days)
        var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &text) { text in
            var index = 0
            func append(_ value: Int64, digits: Int) {
                var divisor: Int64 = 1
                for _ in 1..<digits { divisor *= 10 }
                while divisor > 0 {
                    text[index] = UInt8(ascii: "0") + UInt8(value / divisor % 10)
                    index += 1
                    divisor /= 10
                }
            }
            func append(_ byte: Unicode.Scalar) {
                text[index] = UInt8(ascii: byte)
                index += 1
            }
            append(year, digits: 4)
            append("-")
            append(month, digits: 2)
            append("-")
            append(day, digits: 2)
            append("T")
            append(inDay / 3600, digits: 2)
            append(":")
            append(inDay / 60 % 60, digits: 2)
            append(":")
            append(inDay % 60, digits: 2)
        }
        return text
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, or with exactly three digits of fraction, in 1970-9999 and each
    /// field in its range; nil for anything else (which the decoder then reads, or refuses).
    static func date(_ text: UnsafeBufferPointer<UInt8>) -> Date? {
        guard text.count == 20 || text.count == 24, text[4] == UInt8(ascii: "-"), text[7] == UInt8(ascii: "-"), text[10] == UInt8(ascii: "T"),
            text[13] == UInt8(ascii: ":"), text[16] == UInt8(ascii: ":"), text[text.count - 1] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ start: Int, _ count: Int) -> Int64? {
            var value: Int64 = 0
            for index in start..<(start + count) {
                let digit = text[index] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int64(digit)
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2), let minute = number(14, 2),
            let second = number(17, 2), year >= 1970, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24,
            minute < 60, second < 60
        else { return nil }
        var milliseconds: Int64 = 0
        if text.count == 24 {
            guard text[19] == UInt8(ascii: "."), let fraction = number(20, 3) else { return nil }
            milliseconds = fraction
        }
        let total = days(fromCivil: year, month, day) * millisecondsPerDay + ((hour * 60 + minute) * 60 + second) * 1000 + milliseconds
        return Date(timeIntervalSince1970: Double(total) / 1000)
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Year, month and day of a day counted from 1970-01-01 (Howard Hinnant's `civil_from_days`).
    private static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Days from 1970-01-01 to a date (Howard Hinnant's `days_from_civil`).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let marchYear = month <= 2 ? year - 1 : year
        let era = (marchYear >= 0 ? marchYear : marchYear - 399) / 400
        let yearOfEra = marchYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    // MARK: Reading

    /// The header in the form ``BusHeader/jsonBytes()`` writes it, read in one pass: its keys
    /// in that order (`pid` may be absent), no space, integers without sign, a source without
    /// escapes and a date ``date(_:)`` reads; nil for anything else, which ``parse(_:)`` then
    /// reads (keys in any order, space, escapes, as other writers may write them) or refuses.
    static func parseFixedForm(_ bytes: UnsafeBufferPointer<UInt8>) -> BusHeader? {
        var text = FixedForm(bytes: bytes)
        var pid: Int32?
        if text.take(#"{"pid":"#) {
            guard let value = text.digits(), let value = Int32(exactly: value), text.take(#","replay":"#) else { return nil }
            pid = value
        } else if !text.take(#"{"replay":"#) {
            return nil
        }
        let replay: Bool
        if text.take("false") {
            replay = false
        } else if text.take("true") {
            replay = true
        } else {
            return nil
        }
        guard text.take(#","schema":"#), let schema = text.digits(), text.take(#","sequence":"#), let sequence = text.digits(),
            text.take(#","source":""#), let sourceBytes = text.plainString(), text.take(#","timestamp":""#), let dateBytes = text.plainString(),
            text.take("}"), text.atEnd, let source = DirectJSON.string(utf8: sourceBytes), let timestamp = date(dateBytes)
        else { return nil }
        return BusHeader(schema: Int(schema), source: source, pid: pid, sequence: UInt64(sequence), timestamp: timestamp, replay: replay)
    }

    /// A cursor over a header in the fixed form: each step takes exactly what it expects.
    private struct FixedForm {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        var atEnd: Bool { index == bytes.count }

        /// Takes `text` if the bytes go on with it.
        mutating func take(_ text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard bytes.count - index >= count, let base = bytes.baseAddress, memcmp(base + index, text.utf8Start, count) == 0 else { return false }
            index += count
            return true
        }

        /// 1 to 18 decimal digits without a leading zero (longer numbers are ``parse(_:)``'s).
        mutating func digits() -> Int64? {
            DirectJSON.digits(in: bytes, at: &index)
        }

        /// The bytes up to the next quote, which is taken, when none needs an escape.
        mutating func plainString() -> UnsafeBufferPointer<UInt8>? {
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    defer { index += 1 }
                    return UnsafeBufferPointer(rebasing: bytes[start..<index])
                }
                guard byte >= 0x20, byte != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            return nil
        }
    }

    /// The header, when `bytes` is one JSON object of its six keys, each at most once, with
    /// plain strings (no escapes), integers, booleans and a date ``date(_:)`` reads; nil for
    /// anything else.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> BusHeader? {
        var reader = DirectJSON.Reader(bytes: bytes)
        var schema: Int?
        var source: String?
        var pid: Int32?
        var sequence: UInt64?
        var timestamp: Date?
        var replay: Bool?
        let read = DirectJSON.Reader.object(&reader) { key, reader in
            if DirectJSON.isKey(key, "schema"), schema == nil {
                guard let value = reader.integer(), let value = Int(exactly: value) else { return false }
                schema = value
            } else if DirectJSON.isKey(key, "source"), source == nil {
                guard let value = reader.plainString(), let text = DirectJSON.string(utf8: value) else { return false }
                source = text
            } else if DirectJSON.isKey(key, "pid"), pid == nil {
                guard let value = reader.integer(), let value = Int32(exactly: value) else { return false }
                pid = value
            } else if DirectJSON.isKey(key, "sequence"), sequence == nil {
                guard let value = reader.integer(), let value = UInt64(exactly: value) else { return false }
                sequence = value
            } else if DirectJSON.isKey(key, "timestamp"), timestamp == nil {
                guard let value = reader.plainString(), let date = date(value) else { return false }
                timestamp = date
            } else if DirectJSON.isKey(key, "replay"), replay == nil {
                guard let value = reader.boolean() else { return false }
                replay = value
            } else {
                return false
            }
            return true
        }
        guard read, reader.atEnd, let schema, let source, let sequence, let timestamp, let replay else { return nil }
        return BusHeader(schema: schema, source: source, pid: pid, sequence: sequence, timestamp: timestamp, replay: replay)
    }
}
