import Foundation
import NIOCore
import NIOSSL
import Testing
import TetherSchema

@testable import ConnectionManager

/// TLS failures are told apart by swift-nio-ssl's error types, not by words.
@Suite struct TLSFailureTests {
    @Test func swiftNIOSSLsErrorsAreTLSFailuresAndOthersAreNot() {
        let url = "wss://gateway.example:18789"
        #expect(TLSFailure.problem(NIOSSLError.handshakeFailed(.sslError([])), url: url)?.kind == .tls)
        #expect(TLSFailure.problem(BoringSSLError.zeroReturn, url: url)?.kind == .tls)
        let hostname = TLSFailure.problem(NIOSSLExtraError.failedToValidateHostname, url: url)
        #expect(hostname?.kind == .tls)
        #expect(hostname?.detail.hasPrefix("TLS with \(url) failed: the gateway's certificate is not for this host name") == true)
        #expect(TLSFailure.problem(IOError(errnoCode: ECONNREFUSED, reason: "connect"), url: url) == nil)
        #expect(TLSFailure.problem(ChannelError.connectTimeout(.seconds(1)), url: url) == nil)
    }
}
