import Foundation
import OpenClawWire
import TetherSchema

/// `chat.send`'s attachments as OpenClaw's gateway takes them (`parseMessageWithAttachments`,
/// `src/gateway/chat-attachments.ts`, with `maxBytes` 5,000,000): strict base64, the decoded
/// size estimated and limited, the type sniffed from the bytes, anything that is not an image
/// dropped without a word, an image over 2,000,000 bytes offloaded to the media store.
extension OpenClawGateway {
    /// An image the gateway kept from a `chat.send`.
    struct ReceivedImage: Sendable, Hashable {
        var mimeType: String
        /// Its decoded size, as the gateway estimates it.
        var bytes: Int
        /// Its base64 length, which history shows as `bytes` of an omitted image block.
        var base64Length: Int
        /// Offloaded to the media store (over 2,000,000 bytes): the message names it instead.
        var mediaReference: String?
    }

    /// The most an attachment may decode to.
    static let attachmentMaximumBytes = 5_000_000
    /// Above this an image is saved to the media store, and only some formats may be.
    static let offloadThresholdBytes = 2_000_000
    static let offloadableTypes: Set<String> = ["image/jpeg", "image/jpg", "image/png", "image/webp", "image/gif", "image/heic", "image/heif"]

    /// What `chat.send`'s attachments come to: the images kept and the message as the gateway
    /// rewrites it (a `[media attached: …]` line for each offloaded one), or the error it
    /// answers with (`INVALID_REQUEST`, the JavaScript error as `String(err)` writes it).
    enum ParsedAttachments {
        case kept(message: String, images: [ReceivedImage])
        case refused(GatewayErrorShape)
    }

    static func parseAttachments(_ attachments: [ChatAttachment]?, message: String) -> ParsedAttachments {
        var message = message
        var images: [ReceivedImage] = []
        // Items without string content were removed before (`normalizeRpcAttachmentsToChatAttachments`).
        for (index, attachment) in (attachments ?? []).filter({ $0.content?.isEmpty == false }).enumerated() {
            let label = [attachment.fileName, attachment.type].compactMap { $0 }.first { !$0.isEmpty } ?? "attachment-\(index + 1)"
            var base64 = (attachment.content ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            if base64.hasPrefix("data:"), let comma = base64.range(of: ";base64,"), !base64[..<comma.lowerBound].contains(";") {
                base64 = String(base64[comma.upperBound...])
            }
            guard ImageAttachments.isStrictBase64(base64) else { return .refused(invalid("Error: attachment \(label): invalid base64 content")) }
            let size = ImageAttachments.decodedSize(ofBase64: base64)
            if size <= 0 { continue }
            guard size <= attachmentMaximumBytes else {
                return .refused(invalid("Error: attachment \(label): exceeds size limit (\(size) > \(attachmentMaximumBytes) bytes)"))
            }
            let declared = attachment.mimeType.flatMap { $0.split(separator: ";").first }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            let sniffed = Data(base64Encoded: String(base64.prefix(256 / 4 * 4))).flatMap(sniffedType)
            if let sniffed, !sniffed.hasPrefix("image/") { continue }
            guard let type = sniffed ?? declared.flatMap({ $0.isEmpty ? nil : $0 }), type.hasPrefix("image/") else { continue }
            var image = ReceivedImage(mimeType: type, bytes: size, base64Length: base64.utf8.count)
            if size > offloadThresholdBytes {
                guard offloadableTypes.contains(type) else {
                    return .refused(
                        invalid(
                            "Error: attachment \(label): format \(type) is too large to pass inline (\(size) > \(offloadThresholdBytes) bytes) and cannot be offloaded. Please convert to JPEG, PNG, WEBP, GIF, HEIC, or HEIF."
                        ))
                }
                let reference = "media://inbound/\(UUID().uuidString.lowercased())"
                image.mediaReference = reference
                message += "\n[media attached: \(reference)]"
            }
            images.append(image)
        }
        return .kept(message: message, images: images)
    }

    /// The type of a file's first bytes: the images Tether sends, and the common files that
    /// are not images (which the gateway's `file-type` also tells, and drops).
    static func sniffedType(_ bytes: Data) -> String? {
        if let image = ImageAttachments.sniff(bytes) { return image }
        let head = Array(bytes.prefix(8))
        if head.starts(with: Array("%PDF".utf8)) { return "application/pdf" }
        if head.starts(with: [0x50, 0x4B, 0x03, 0x04]) { return "application/zip" }
        if head.starts(with: [0x1F, 0x8B]) { return "application/gzip" }
        if head.starts(with: Array("BM".utf8)), bytes.count >= 14 { return "image/bmp" }
        return nil
    }

    /// The bot's words for the images it received: `You sent 1 image (image/png, 12,345 bytes)`.
    static func receivedWords(_ images: [ReceivedImage]) -> String? {
        guard !images.isEmpty else { return nil }
        return "You sent " + ImageAttachments.summary(images.map { AttachmentNote(name: "", mimeType: $0.mimeType, bytes: $0.bytes) })
    }

    /// The user entry's blocks for its inline images, as `chat.history` shows them: the
    /// sanitiser removes the data and says how long it was.
    static func imageBlocks(_ images: [ReceivedImage]) -> [JSONValue] {
        images.filter { $0.mediaReference == nil }.map { image in
            .object(["type": .string("image"), "mimeType": .string(image.mimeType), "omitted": .bool(true), "bytes": .number(Double(image.base64Length))])
        }
    }
}
