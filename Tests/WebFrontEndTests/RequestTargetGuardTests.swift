import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import WebFrontEnd

/// Request heads that hummingbird's request would show as something they are not: refused
/// with 400 before they reach the access check, on the real HTTP decoder.
@Suite struct RequestTargetGuardTests {
    @Test func onlyAPathWithOneHostGoesOn() {
        #expect(RequestTargetCheck.problem(target: "/", hostHeaders: 1) == nil)
        #expect(RequestTargetCheck.problem(target: "/ws?token=x", hostHeaders: 1) == nil)
        #expect(RequestTargetCheck.problem(target: "/", hostHeaders: 0) == nil, "a missing Host is WebAccess's to refuse, in its words")
        #expect(RequestTargetCheck.problem(target: "http://evil.example/", hostHeaders: 1)?.contains("origin form") == true)
        #expect(RequestTargetCheck.problem(target: "127.0.0.1:8766", hostHeaders: 1) != nil, "authority form")
        #expect(RequestTargetCheck.problem(target: "*", hostHeaders: 1) != nil, "asterisk form")
        #expect(RequestTargetCheck.problem(target: "/", hostHeaders: 2) == "a request names one Host, not 2")
    }

    /// A channel with NIO's HTTP server pipeline and the guard after its decoder, as tether-web has it.
    private func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
        let decoder = ByteToMessageHandler(HTTPRequestDecoder())
        try channel.pipeline.syncOperations.addHandler(decoder)
        try channel.pipeline.syncOperations.addHandler(RequestTargetGuard(logger: Logger(label: "test")), position: .after(decoder))
        return channel
    }

    private func answer(_ channel: EmbeddedChannel) throws -> String {
        var answer = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { answer += String(buffer: buffer) }
        return answer
    }

    @Test(arguments: [
        "GET http://evil.example/ HTTP/1.1\r\nHost: 127.0.0.1:8766\r\n\r\n",
        "GET http://evil.example/ws HTTP/1.1\r\nHost: 127.0.0.1:8766\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:8766\r\nHost: evil.example\r\n\r\n",
    ])
    func aRequestThatLooksLikeAnotherIsAnswered400AndClosed(_ request: String) throws {
        let channel = try channel()
        try channel.writeInbound(ByteBuffer(string: request))
        #expect(try channel.readInbound(as: HTTPServerRequestPart.self) == nil, "the request went on")
        let answer = try answer(channel)
        #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request"), "\(answer)")
        #expect(answer.contains("Connection: close"))
        #expect(!channel.isActive, "the connection stays open")
    }

    @Test func aRequestInOriginFormGoesOnWhole() throws {
        let channel = try channel()
        try channel.writeInbound(ByteBuffer(string: "POST /x HTTP/1.1\r\nHost: 127.0.0.1:8766\r\nContent-Length: 2\r\n\r\nhi"))
        guard case .head(let head)? = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            Issue.record("no head")
            return
        }
        #expect(head.uri == "/x")
        guard case .body(let body)? = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            Issue.record("no body")
            return
        }
        #expect(String(buffer: body) == "hi")
        #expect(try answer(channel).isEmpty)
        _ = try channel.finish()
    }

    /// After a WebSocket upgrade's head what comes is not HTTP: it is passed on as it is.
    @Test func whatFollowsAnUpgradesHeadIsPassedOn() throws {
        let channel = try channel()
        let upgrade =
            "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:8766\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        try channel.writeInbound(ByteBuffer(string: upgrade))
        guard case .head? = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            Issue.record("the upgrade's head did not go on")
            return
        }
        // The upgrader takes the decoder away; bytes then reach the guard as they are.
        #expect(try channel.readInbound(as: HTTPServerRequestPart.self) == .end(nil))
        let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
        _ = channel.pipeline.syncOperations.removeHandler(decoder)
        channel.embeddedEventLoop.run()
        try channel.writeInbound(ByteBuffer(bytes: [0x81, 0x80, 1, 2, 3, 4]))
        #expect(try channel.readInbound(as: ByteBuffer.self)?.readableBytes == 6)
        _ = try channel.finish()
    }
}
