import HTTPTypes
public import HummingbirdCore
public import HummingbirdWebSocket
public import Logging
import NIOCore
import NIOEmbedded

/// Sets up a WebSocket server's connections once on the calling thread, before the server
/// listens, so that no two event loop threads are the first to instantiate the same types.
///
/// Swift 6.3's runtime on Linux can crash (SIGSEGV in `swift_checkMetadataState`, from
/// `swift_conformsToProtocol` while demangling a type) when one thread checks a generic
/// requirement on a generic class's metadata that another thread is still instantiating for
/// the first time. hummingbird-websocket's `HTTP1WebSocketUpgradeChannel.setup` does exactly
/// that on every event loop at once when a server's first connections arrive together: NIO's
/// `configureUpgradableHTTPServerPipeline` looks up `ByteToMessageHandler<HTTPRequestDecoder>`,
/// whose requirement is checked on the generic class `HTTPDecoder<…>` while another loop
/// instantiates it (StartUnderLoadTests caught it in tether-gateway and tether-web; the
/// crashing frames are those of https://github.com/swiftlang/swift/issues/58414, open when this was written).
/// Once the metadata is complete, later lookups only read it.
public enum ChildChannelWarmUp {
    /// Sets up a connection that asks to upgrade and one that does not, each on an in-memory
    /// channel through the child channel `wrap` makes of a plain WebSocket child channel (the
    /// server's own wrapper, so that its handlers are instantiated too), then closes both.
    /// - Returns: the first line each connection answered: the upgrade's `101`, and nothing for
    ///   the other (its responder is never run).
    @discardableResult
    public static func run<Child: ServerChildChannel>(logger: Logger, wrap: (HTTP1WebSocketUpgradeChannel) -> Child) -> [String] {
        let childChannel = wrap(
            HTTP1WebSocketUpgradeChannel(
                responder: { _, _, _ in }, configuration: .init(),
                shouldUpgrade: { _, _, _ in .upgrade([:]) { _, _, _ in } }))
        let upgrade =
            "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        return [upgrade, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"].map { request in
            let channel = EmbeddedChannel()
            _ = childChannel.setup(channel: channel, logger: logger)
            try? channel.writeInbound(ByteBuffer(string: request))
            channel.embeddedEventLoop.run()
            let answer = (try? channel.readOutbound(as: ByteBuffer.self)).flatMap { $0 }.map { String(buffer: $0) } ?? ""
            _ = try? channel.close().wait()
            return String(answer.prefix { $0 != "\r\n" })
        }
    }
}
