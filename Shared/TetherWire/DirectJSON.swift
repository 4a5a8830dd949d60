import FoundationEssentials

/// Pieces shared by Tether's direct JSON readers and writers (the bus header, the wire frame
/// body, the streamed chunk): what they write is byte for byte what the JSONEncoder they
/// stand in for writes, and what they cannot read exactly as its JSONDecoder would, they
/// leave to it.
public enum DirectJSON {
    /// A byte that goes into a JSON string as it is: not a quote, a backslash or a control
    /// character (the encoder leaves `/` and non-ASCII UTF-8 as they are).
    public static func isPlain(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }

    public static func append(_ text: StaticString, to bytes: inout [UInt8]) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// `value` in decimal, as JSON writes an integer.
    public static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        appendDecimal(value.magnitude, to: &bytes)
    }

    /// `value` in decimal, as JSON writes an integer.
    public static func appendDecimal(_ value: UInt64, to bytes: inout [UInt8]) {
        var magnitude = value
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for 20 digits, written from the end
        withUnsafeMutableBytes(of: &digits) { buffer in
            var start = buffer.count
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// `text` as a JSON string's contents, escaped as the bus's JSONEncoder escapes it: a quote,
    /// a backslash and the control characters (`\b \t \n \f \r` short, the rest `\u00xx`).
    public static func appendEscaped(_ text: String, to bytes: inout [UInt8]) {
        var text = text
        text.withUTF8 { utf8 in
            guard let base = utf8.baseAddress else { return }
            var plainStart = 0
            var index = 0
            while index < utf8.count {
                let byte = base[index]
                // The common case, kept to one comparison chain: a byte written as it is.
                if byte >= 0x20, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
                    index += 1
                    continue
                }
                bytes.append(contentsOf: UnsafeBufferPointer(start: base + plainStart, count: index - plainStart))
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                default:
                    let hex: StaticString = "0123456789abcdef"
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    hex.withUTF8Buffer { digits in
                        bytes.append(digits[Int(byte >> 4)])
                        bytes.append(digits[Int(byte & 0xF)])
                    }
                }
                index += 1
                plainStart = index
            }
            bytes.append(contentsOf: UnsafeBufferPointer(start: base + plainStart, count: utf8.count - plainStart))
        }
    }

    /// `bytes` as a String when they are UTF-8, else nil: what `String(validating:as:)` gives,
    /// without its generic code (unspecialized in the standard library, it looked up type
    /// metadata at each call, some 900 instructions for a bus header's source) when the
    /// bytes are ASCII, as topics and program names are.
    public static func string(utf8 bytes: UnsafeBufferPointer<UInt8>) -> String? {
        for byte in bytes where byte >= 0x80 {
            return String(validating: bytes, as: UTF8.self)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `key` is `name`. Byte by byte: `elementsEqual` through the sequences'
    /// iterators cost 2,200 instructions a bus header, more than the rest of reading it.
    public static func isKey(_ key: UnsafeBufferPointer<UInt8>, _ name: StaticString) -> Bool {
        name.withUTF8Buffer { name in
            guard name.count == key.count else { return false }
            for index in 0..<key.count where name[index] != key[index] { return false }
            return true
        }
    }

    /// 1 to 18 decimal digits at `index`, without a leading zero, taken; nil for anything
    /// else (longer numbers are left to the decoder).
    public static func digits(in bytes: UnsafeBufferPointer<UInt8>, at index: inout Int) -> Int64? {
        let start = index
        var value: Int64 = 0
        while index < bytes.count, bytes[index] &- UInt8(ascii: "0") < 10 {
            guard index - start < 18 else { return nil }
            value = value * 10 + Int64(bytes[index] &- UInt8(ascii: "0"))
            index += 1
        }
        let count = index - start
        guard count > 0, count == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        return value
    }

    /// A cursor over JSON text that reads the forms the direct readers need, and gives up
    /// (nil) on anything else.
    public struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        public init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        /// Whether only space is left.
        public var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        public mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// Takes `byte` after any space.
        public mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A string without escapes or control characters: its bytes between the quotes.
        public mutating func plainString() -> UnsafeBufferPointer<UInt8>? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            // Scanned with a local index, kept in a register: the reader's own is written once.
            let start = index
            var end = start
            while end < bytes.count {
                let byte = bytes[end]
                if byte == UInt8(ascii: "\"") {
                    index = end + 1
                    return UnsafeBufferPointer(rebasing: bytes[start..<end])
                }
                guard DirectJSON.isPlain(byte) else { return nil }
                end += 1
            }
            return nil
        }

        /// A string, its escapes undone; nil for a raw control character, an escape JSON does
        /// not have, a `\u` escape of half a surrogate pair, or bytes that are not UTF-8.
        public mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var unescaped: [UInt8] = []
            var escaped = false
            var plainStart = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                let byte = bytes[index]
                guard byte >= 0x20 else { return nil }
                guard byte == UInt8(ascii: "\\") else {
                    index += 1
                    continue
                }
                if !escaped { unescaped.reserveCapacity(bytes.count - plainStart) }
                escaped = true
                unescaped.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart..<index]))
                index += 1
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): unescaped.append(escape)
                case UInt8(ascii: "b"): unescaped.append(0x08)
                case UInt8(ascii: "f"): unescaped.append(0x0C)
                case UInt8(ascii: "n"): unescaped.append(0x0A)
                case UInt8(ascii: "r"): unescaped.append(0x0D)
                case UInt8(ascii: "t"): unescaped.append(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = hexQuad() else { return nil }
                    if (0xD800..<0xDC00).contains(scalar) {
                        // The high half of a pair: the low half must follow as \uDC00-\uDFFF.
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return nil }
                        index += 2
                        guard let low = hexQuad(), (0xDC00..<0xE000).contains(low) else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let character = Unicode.Scalar(scalar) else { return nil }
                    unescaped.append(contentsOf: UTF8.encode(character)!)
                default:
                    return nil
                }
                plainStart = index
            }
            guard index < bytes.count else { return nil }
            let end = index
            index += 1
            if !escaped {
                return DirectJSON.string(utf8: UnsafeBufferPointer(rebasing: bytes[plainStart..<end]))
            }
            unescaped.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart..<end]))
            return String(validating: unescaped, as: UTF8.self)
        }

        /// Four hex digits after `\u`.
        private mutating func hexQuad() -> UInt32? {
            guard index + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// Reads an object: `member` reads the value of each key in turn and says whether it
        /// could (false gives up on the object). True once the closing brace is read.
        public static func object(
            _ reader: inout Reader, member: (_ key: UnsafeBufferPointer<UInt8>, _ reader: inout Reader) -> Bool
        ) -> Bool {
            guard reader.take(UInt8(ascii: "{")) else { return false }
            repeat {
                guard let key = reader.plainString(), reader.take(UInt8(ascii: ":")), member(key, &reader) else { return false }
            } while reader.take(UInt8(ascii: ","))
            return reader.take(UInt8(ascii: "}"))
        }

        /// Takes `null` after any space.
        public mutating func null() -> Bool {
            skipSpace()
            return take(literal: "null")
        }

        /// Takes `literal` if the text goes on with it.
        private mutating func take(literal: StaticString) -> Bool {
            let taken = literal.withUTF8Buffer { literal -> Int? in
                guard bytes.count - index >= literal.count else { return nil }
                for offset in 0..<literal.count where bytes[index + offset] != literal[offset] { return nil }
                return literal.count
            }
            guard let taken else { return false }
            index += taken
            return true
        }

        /// An integer as JSON writes it: an optional minus, no leading zero, at most 18 digits
        /// (longer ones are left to the decoder).
        public mutating func integer() -> Int64? {
            skipSpace()
            let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            guard let value = DirectJSON.digits(in: bytes, at: &index) else { return nil }
            // A fraction or an exponent: the decoder's to judge.
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") || bytes[index] | 0x20 == UInt8(ascii: "e") { return nil }
            return negative ? -value : value
        }

        public mutating func boolean() -> Bool? {
            skipSpace()
            if take(literal: "true") { return true }
            if take(literal: "false") { return false }
            return nil
        }
    }
}
