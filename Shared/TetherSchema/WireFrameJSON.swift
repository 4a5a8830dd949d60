import FoundationEssentials
import TetherWire

/// A bus body with its own JSON writer and reader, for the bodies on the bus's hot paths: it
/// writes what the bus's JSONEncoder writes and reads what its JSONDecoder reads, for a
/// fraction of the cost. ``TetherBus/BusClient`` and ``TetherBus/BusMessage`` use them.
public protocol DirectJSONBody: Codable {
    /// The body as the bus's JSONEncoder writes it.
    func jsonBytes() -> [UInt8]
    /// Reads a body as the bus's JSONDecoder would, throwing what it throws.
    init(jsonBytes: UnsafeRawBufferPointer) throws
}

// Every frame to and from the gateway (each streamed chunk) crosses the bus as a WireFrame,
// whose text is a JSON document inside a JSON string: through JSONDecoder, unescaping it was
// a quarter of tether-protod's work for a chunk.
extension WireFrame: DirectJSONBody {
    /// `{"epoch":3,"text":"…"}`, the epoch left out when nil.
    public func jsonBytes() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + text.utf8.count / 8 + 32)
        bytes.append(UInt8(ascii: "{"))
        if let epoch {
            DirectJSON.append(#""epoch":"#, to: &bytes)
            DirectJSON.appendDecimal(Int64(epoch), to: &bytes)
            bytes.append(UInt8(ascii: ","))
        }
        DirectJSON.append(#""text":""#, to: &bytes)
        DirectJSON.appendEscaped(text, to: &bytes)
        DirectJSON.append(#""}"#, to: &bytes)
        return bytes
    }

    public init(jsonBytes bytes: UnsafeRawBufferPointer) throws {
        if let frame = Self.parse(bytes.assumingMemoryBound(to: UInt8.self)) {
            self = frame
        } else {
            self = try BusSchema.decoder.decode(WireFrame.self, from: Data(bytes))
        }
    }

    /// The frame, when `bytes` is an object of `epoch` (an integer or null, or left out) and
    /// `text`, each at most once; nil for anything else.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> WireFrame? {
        var reader = DirectJSON.Reader(bytes: bytes)
        var epoch: Int??
        var text: String?
        let read = DirectJSON.Reader.object(&reader) { key, reader in
            if DirectJSON.isKey(key, "epoch"), epoch == nil {
                if reader.null() {
                    epoch = .some(nil)
                } else {
                    guard let value = reader.integer(), let value = Int(exactly: value) else { return false }
                    epoch = value
                }
            } else if DirectJSON.isKey(key, "text"), text == nil {
                guard let value = reader.string() else { return false }
                text = value
            } else {
                return false
            }
            return true
        }
        guard read, reader.atEnd, let text else { return nil }
        return WireFrame(epoch: epoch ?? nil, text: text)
    }
}
