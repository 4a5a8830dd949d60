import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Asks a gateway, with a plain HTTP request, what it thinks of a token.
///
/// A refused WebSocket upgrade looks the same to the WebSocket client whatever the reason;
/// this request to the same URL tells a rejected credential (401, 403) from the rest.
enum HTTPStatusProbe {
    static func status(url: String, token: String, tls: TLSConfiguration?, timeout: Duration = .seconds(5)) async throws -> Int {
        guard let components = URLComponents(string: url), let host = components.host else {
            throw InvalidURL(url: url)
        }
        let secure = components.scheme == "wss" || components.scheme == "https"
        let port = components.port ?? (secure ? 443 : 80)
        let path = (components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath) + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
        let sslContext = try secure ? NIOSSLContext(configuration: tls ?? .makeClientConfiguration()) : nil

        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.milliseconds(Int64(timeout.components.seconds * 1000)))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: host))
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var headers = HTTPHeaders()
            headers.add(name: "Host", value: components.port.map { "\(host):\($0)" } ?? host)
            headers.add(name: "Authorization", value: "Bearer \(token)")
            headers.add(name: "Connection", value: "close")
            try await outbound.write(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)))
            try await outbound.write(.end(nil))
            for try await part in inbound {
                if case .head(let head) = part { return Int(head.status.code) }
            }
            throw ChannelError.eof
        }
    }
}

/// A gateway URL without a host: nothing to ask.
struct InvalidURL: Error, CustomStringConvertible {
    let url: String
    var description: String { "\(url) is not a URL with a host" }
}
