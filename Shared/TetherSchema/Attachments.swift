public import FoundationEssentials

/// An image sent with a message: its bytes in base64, as a `send` command carries it and
/// OpenClaw's `chat.send` takes it.
public struct Attachment: Codable, Hashable, Sendable {
    /// The file's name as the sender gave it (no directories).
    public var name: String
    /// The image type told by its bytes: `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    public var mimeType: String
    /// The bytes, in standard base64 with padding and no line breaks.
    public var content: String

    public init(name: String, mimeType: String, content: String) {
        self.name = name
        self.mimeType = mimeType
        self.content = content
    }

    /// What the transcript keeps of it.
    public var note: AttachmentNote {
        AttachmentNote(name: name, mimeType: mimeType, bytes: ImageAttachments.decodedSize(ofBase64: content))
    }
}

/// What the transcript shows of an attachment: its name, type and size, never its bytes.
public struct AttachmentNote: Codable, Hashable, Sendable {
    public var name: String
    public var mimeType: String
    /// Its size, decoded.
    public var bytes: Int

    public init(name: String, mimeType: String, bytes: Int) {
        self.name = name
        self.mimeType = mimeType
        self.bytes = bytes
    }

    /// `cat.png (image/png, 12,345 bytes)`.
    public var words: String { "\(name) (\(mimeType), \(bytes.grouped) bytes)" }
}

/// The decisions about images sent with a message, shared by every front end and protod:
/// what counts as an image, how large one may be, and the words for each refusal.
///
/// OpenClaw's gateway takes images of at most 5,000,000 bytes decoded, in strict base64, and
/// drops anything that is not an image without a word; Tether refuses such a file in words
/// before anything is queued. A message and its images also cross Tether's bus in one `send`
/// command and one `wire.out` message, each at most ``BusSchema/maximumFrameBodySize`` (the
/// limit ``BusSchema/maximumBodySize(of:)`` gives both); the gateway's own `maxPayload`, which
/// protod learns as it connects, is usually the smaller (OpenClaw's 25 MiB holds three images
/// of 5,000,000 bytes in base64, not four).
public enum ImageAttachments {
    /// The most a gateway takes of one image, decoded (OpenClaw's `chat.send`).
    public static let maximumBytes = 5_000_000
    /// Room kept in a bus message for what is not an image: the text, the ids, the envelope.
    public static let busOverhead = 65_536
    /// The most base64 a message's images may take together, for the message to cross the bus
    /// in its `send` command and its `wire.out` frame.
    public static func busRoom(forText text: String) -> Int {
        let limit = min(
            BusSchema.maximumBodySize(of: .command(SendMessageCommand.method)), BusSchema.maximumBodySize(of: .topic(Topic.wireOutbound.name)))
        return limit - busOverhead - 2 * text.utf8.count
    }

    /// The image type of `bytes`, told by its first bytes (not a file name); nil when it is
    /// none of PNG, JPEG, GIF and WebP.
    public static func sniff(_ bytes: some Collection<UInt8>) -> String? {
        let head = Array(bytes.prefix(12))
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + magic.count && Array(head[offset..<offset + magic.count]) == magic
        }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if starts([0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return "image/gif" }
        if starts(Array("RIFF".utf8)), starts(Array("WEBP".utf8), at: 8) { return "image/webp" }
        return nil
    }

    /// An attachment of a file's bytes, or why it cannot be sent, in words.
    public static func attachment(named name: String, bytes: Data) -> Result<Attachment, AttachmentRefusal> {
        imageType(named: name, head: bytes.prefix(12), size: bytes.count).map {
            Attachment(name: name, mimeType: $0, content: bytes.base64EncodedString())
        }
    }

    /// The image type of a file that starts with `head` and is `size` bytes long, or why it
    /// cannot be sent, in words.
    static func imageType(named name: String, head: some Collection<UInt8>, size: Int) -> Result<String, AttachmentRefusal> {
        guard size > 0 else { return .failure(AttachmentRefusal("\(name) is empty: there is no image to send")) }
        guard let type = sniff(head) else {
            return .failure(
                AttachmentRefusal(
                    "\(name) is not an image Tether can send: only PNG, JPEG, GIF and WebP are, told by the file's bytes, not its name (the gateway would drop anything else without a word)"
                ))
        }
        guard size <= maximumBytes else {
            return .failure(AttachmentRefusal("\(name) is \(size.grouped) bytes; the gateway takes images of at most \(maximumBytes.grouped) bytes"))
        }
        return .success(type)
    }

    /// An attachment of the file at `path`, or why it cannot be sent, in words.
    public static func attachment(at path: String) -> Result<Attachment, AttachmentRefusal> {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return .failure(AttachmentRefusal("cannot attach \(path): there is no such file"))
        }
        guard !isDirectory else { return .failure(AttachmentRefusal("cannot attach \(path): it is a directory")) }
        // A file over the limit is refused by its size, before it is read.
        if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size > maximumBytes {
            return .failure(AttachmentRefusal("\(name) is \(size.grouped) bytes; the gateway takes images of at most \(maximumBytes.grouped) bytes"))
        }
        guard let bytes = FileManager.default.contents(atPath: path) else {
            return .failure(AttachmentRefusal("cannot attach \(path): it cannot be read"))
        }
        return attachment(named: name, bytes: bytes)
    }

    /// Why a message with these attachments is not sent, in words; nil when it may be. Checks
    /// what a front end cannot check one attachment at a time: the strict base64, the type and
    /// size of what the bytes hold, and the room on the bus for all of them with the text.
    public static func refusal(for attachments: [Attachment], text: String) -> AttachmentRefusal? {
        // A message without images is the text's own business (its limits are checked elsewhere).
        guard !attachments.isEmpty else { return nil }
        for attachment in attachments {
            // Strict base64 is checked whole; of the bytes only the first 12 are decoded (16
            // characters, never padded when more follow), for the type: the size is the length's.
            guard isStrictBase64(attachment.content), let head = Data(base64Encoded: String(attachment.content.prefix(16))) else {
                return AttachmentRefusal("\(attachment.name): its content is not base64 (standard alphabet, padded, no line breaks)")
            }
            switch imageType(named: attachment.name, head: head, size: decodedSize(ofBase64: attachment.content)) {
            case .failure(let refusal): return refusal
            case .success(let type) where type != attachment.mimeType:
                return AttachmentRefusal("\(attachment.name) is said to be \(attachment.mimeType), but its bytes are \(type)")
            case .success: break
            }
        }
        let total = attachments.reduce(0) { $0 + $1.content.utf8.count }
        let room = busRoom(forText: text)
        guard total <= room else {
            let decoded = attachments.reduce(0) { $0 + decodedSize(ofBase64: $1.content) }
            return AttachmentRefusal(
                "the image\(attachments.count == 1 ? " is" : "s are") \(decoded.grouped) bytes; with this text, Tether's bus carries at most \((max(0, room / 4 * 3)).grouped) bytes of images with one message (the gateway itself would take up to \(maximumBytes.grouped) bytes an image): send a smaller image"
            )
        }
        return nil
    }

    /// `1 image (image/png, 12,345 bytes)`, `2 images (image/png, 10 bytes; image/gif, 20 bytes)`.
    public static func summary(_ notes: [AttachmentNote]) -> String {
        let each = notes.map { "\($0.mimeType), \(($0.bytes).grouped) bytes" }.joined(separator: "; ")
        return "\(notes.count) image\(notes.count == 1 ? "" : "s") (\(each))"
    }

    /// Whether `text` is base64 as OpenClaw's gateway takes it: a multiple of 4 long, the
    /// standard alphabet, at most two `=` at the end, no line breaks or spaces. One pass over
    /// the bytes with a table: an image's base64 is megabytes long.
    public static func isStrictBase64(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard !bytes.isEmpty, bytes.count % 4 == 0 else { return false }
            var end = bytes.count
            for _ in 0..<2 where bytes[end - 1] == UInt8(ascii: "=") { end -= 1 }
            var index = 0
            while index < end {
                guard base64Alphabet[Int(bytes[index])] else { return false }
                index += 1
            }
            return true
        }
    }

    /// For each byte, whether it is in the standard base64 alphabet (`A-Z a-z 0-9 + /`).
    private static let base64Alphabet: [Bool] = (0...255).map { value in
        let byte = UInt8(value)
        return (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
    }

    /// The decoded size of base64 text, from its length and padding (OpenClaw's estimate).
    public static func decodedSize(ofBase64 text: String) -> Int {
        let bytes = Array(text.utf8.suffix(2))
        let padding = bytes.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        return max(0, text.utf8.count / 4 * 3 - padding)
    }

}

extension TranscriptEntry {
    /// `[image: cat.png (image/png, 12,345 bytes)]`: the images the message carried, as every
    /// front end shows them after its text; nil when none.
    public var attachmentWords: String? {
        guard let attachments, !attachments.isEmpty else { return nil }
        return "[\(attachments.count == 1 ? "image" : "images"): \(attachments.map(\.words).joined(separator: "; "))]"
    }

    /// The text and, after it, ``attachmentWords``: what a front end shows of the message.
    public var contentWithAttachments: String {
        guard let words = attachmentWords else { return content }
        return content.isEmpty ? words : content + " " + words
    }
}

/// Why an attachment is not sent, in words a person reads.
public struct AttachmentRefusal: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}
