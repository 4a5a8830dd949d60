import OpenClawWire
import TetherSchema

/// The sizes the page keeps to, sent in its first frame: it checks a message and a draft
/// against them before anything leaves the browser, and says so in words when one is over.
/// tether-web reads frames up to ``frameBytes``, so anything the page can send within the
/// limits reaches it and is answered; only a larger frame closes the WebSocket (1009).
public struct PageLimits: Codable, Equatable, Sendable {
    /// The largest message text, in bytes of its JSON string (UTF-8, quotes and escapes
    /// included): ``SendMessageCommand/maximumTextBytes``, what protod takes.
    public var messageBytes: Int
    /// The largest draft, measured as a message, that fits snapd's `display.save` body.
    public var draftBytes: Int
    /// The largest message tether-web reads from the page: a send with its images, within a
    /// `send` command's body (``BusSchema/maximumBodySize(of:)``) and the page's envelope.
    public var frameBytes: Int
    /// OpenClaw: a message fits the gateway when its UTF-8 bytes and these are within the
    /// gateway's `maximumPayload` (in `conn.state`'s `gateway`).
    public var gatewayOverheadBytes: Int
    /// OpenClaw: what each image adds to the gateway's frame besides its base64, its name
    /// and its type (``ChatSendParams/attachmentOverhead``).
    public var gatewayAttachmentOverheadBytes: Int
    /// The most base64 a message's images take together when its text is empty; each byte
    /// of text takes two from it (``ImageAttachments/busRoom(forText:)``).
    public var attachmentBytes: Int
    /// The largest image the gateway takes, decoded.
    public var imageBytes: Int

    /// tether-web's limits, from the bus's.
    public static let standard = PageLimits(
        messageBytes: SendMessageCommand.maximumTextBytes, draftBytes: BusSchema.maximumBodySize - commandRoom,
        frameBytes: BusSchema.maximumBodySize(of: .command(SendMessageCommand.method)) + 64 * 1024, gatewayOverheadBytes: ChatSendParams.frameOverhead,
        gatewayAttachmentOverheadBytes: ChatSendParams.attachmentOverhead, attachmentBytes: ImageAttachments.busRoom(forText: ""),
        imageBytes: ImageAttachments.maximumBytes)

    /// Room in a command's body for its fields besides the text (id, strategy, front end).
    static let commandRoom = 4 * 1024
}
