import OpenClawWire
import TetherSchema

/// The sizes the page keeps to, sent in its first frame: it checks a message and a draft
/// against them before anything leaves the browser, and says so in words when one is over.
/// tether-web reads frames up to ``frameBytes``, so anything the page can send within the
/// limits reaches it and is answered; only a larger frame closes the WebSocket (1009).
public struct PageLimits: Codable, Equatable, Sendable {
    /// The largest message, in bytes of its JSON string (UTF-8, quotes and escapes
    /// included), that fits a send command's body on the bus.
    public var messageBytes: Int
    /// The largest draft, measured as a message, that fits snapd's `display.save` body.
    public var draftBytes: Int
    /// The largest WebSocket frame tether-web reads from the page.
    public var frameBytes: Int
    /// OpenClaw: a message fits the gateway when its UTF-8 bytes and these are within the
    /// gateway's `maximumPayload` (in `conn.state`'s `gateway`).
    public var gatewayOverheadBytes: Int
    /// The most base64 a message's images take together when its text is empty; each byte
    /// of text takes two from it (``ImageAttachments/busRoom(forText:)``).
    public var attachmentBytes: Int
    /// The largest image the gateway takes, decoded.
    public var imageBytes: Int

    /// tether-web's limits, from the bus's.
    public static let standard = PageLimits(
        messageBytes: BusSchema.maximumBodySize - commandRoom, draftBytes: BusSchema.maximumBodySize - commandRoom,
        frameBytes: BusSchema.maximumBodySize + 64 * 1024, gatewayOverheadBytes: ChatSendParams.frameOverhead,
        attachmentBytes: ImageAttachments.busRoom(forText: ""), imageBytes: ImageAttachments.maximumBytes)

    /// Room in a command's body for its fields besides the text (id, strategy, front end).
    static let commandRoom = 4 * 1024
}
