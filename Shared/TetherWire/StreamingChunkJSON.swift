import FoundationEssentials

// A streamed reply arrives as one `streaming.chunk` frame per piece, often a word: through
// JSONDecoder, reading one cost some 100,000 instructions, most of tether-protod's work for
// a chunk. The frames the gateways write are read here directly; anything else (another
// type, an unknown key, a value of an unexpected kind) goes to JSONDecoder as before.

extension WireCodec {
    /// The `streaming.chunk` envelope in `bytes`, read as ``WireCodec/decode(_:)-(Data)`` would
    /// read it; nil for any other frame, or any form this reader leaves to the decoder.
    static func directChunk(_ bytes: UnsafeBufferPointer<UInt8>) -> WireEnvelope<StreamingChunk>? {
        var reader = DirectJSON.Reader(bytes: bytes)
        var version: String?
        var type: String?
        var sequence: Int?
        var payload: StreamingChunk?
        var serverTimestamp: Date??
        let read = DirectJSON.Reader.object(&reader) { key, reader in
            if DirectJSON.isKey(key, "version"), version == nil {
                guard let value = reader.string() else { return false }
                version = value
            } else if DirectJSON.isKey(key, "type"), type == nil {
                guard let value = reader.string(), value == WireMessageType.streamingChunk.rawValue else { return false }
                type = value
            } else if DirectJSON.isKey(key, "sequence"), sequence == nil {
                guard let value = reader.integer(), let value = Int(exactly: value) else { return false }
                sequence = value
            } else if DirectJSON.isKey(key, "payload"), payload == nil {
                guard let value = chunkPayload(&reader) else { return false }
                payload = value
            } else if DirectJSON.isKey(key, "serverTimestamp"), serverTimestamp == nil {
                if reader.null() {
                    serverTimestamp = .some(nil)
                } else {
                    guard let text = reader.string(), let date = ISO8601.parse(text) else { return false }
                    serverTimestamp = date
                }
            } else {
                return false
            }
            return true
        }
        guard read, reader.atEnd, let version, let type, let sequence, let payload else { return nil }
        return WireEnvelope(version: version, type: type, sequence: sequence, payload: payload, serverTimestamp: serverTimestamp ?? nil)
    }

    /// `{"messageID": {"value": …}, "chunkIndex": …, "content": …, "isFinal": …, "replyTo": …}`.
    private static func chunkPayload(_ reader: inout DirectJSON.Reader) -> StreamingChunk? {
        var messageID: MessageID?
        var chunkIndex: Int?
        var content: String?
        var isFinal: Bool?
        var replyTo: MessageID??
        let read = DirectJSON.Reader.object(&reader) { key, reader in
            if DirectJSON.isKey(key, "messageID"), messageID == nil {
                guard let value = identifier(&reader) else { return false }
                messageID = value
            } else if DirectJSON.isKey(key, "chunkIndex"), chunkIndex == nil {
                guard let value = reader.integer(), let value = Int(exactly: value) else { return false }
                chunkIndex = value
            } else if DirectJSON.isKey(key, "content"), content == nil {
                guard let value = reader.string() else { return false }
                content = value
            } else if DirectJSON.isKey(key, "isFinal"), isFinal == nil {
                guard let value = reader.boolean() else { return false }
                isFinal = value
            } else if DirectJSON.isKey(key, "replyTo"), replyTo == nil {
                if reader.null() {
                    replyTo = .some(nil)
                } else {
                    guard let value = identifier(&reader) else { return false }
                    replyTo = value
                }
            } else {
                return false
            }
            return true
        }
        guard read, let messageID, let chunkIndex, let content, let isFinal else { return nil }
        return StreamingChunk(messageID: messageID, chunkIndex: chunkIndex, content: content, isFinal: isFinal, replyTo: replyTo ?? nil)
    }

    /// `{"value": "…"}`.
    private static func identifier(_ reader: inout DirectJSON.Reader) -> MessageID? {
        guard reader.take(UInt8(ascii: "{")), let key = reader.plainString(), DirectJSON.isKey(key, "value"), reader.take(UInt8(ascii: ":")),
            let value = reader.string(), reader.take(UInt8(ascii: "}"))
        else { return nil }
        return MessageID(value)
    }
}
