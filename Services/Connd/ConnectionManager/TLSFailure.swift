import NIOSSL

/// A failed TLS handshake with the gateway, told apart by the error types swift-nio-ssl throws.
enum TLSFailure {
    /// The problem in the machine's terms and in words; nil when `error` is not TLS's.
    static func problem(_ error: any Error, url: String) -> ConnectionProblem? {
        switch error {
        case let error as NIOSSLExtraError where error == .failedToValidateHostname || error == .serverHostnameImpossibleToMatch:
            return ConnectionProblem(.tls, "TLS with \(url) failed: the gateway's certificate is not for this host name (\(error))")
        case NIOSSLError.handshakeFailed(.sslError(let stack)) where stack.contains(where: Self.isVerificationFailure):
            return ConnectionProblem(
                .tls, "TLS with \(url) failed: the gateway's certificate could not be verified (untrusted issuer, wrong name or expired)")
        case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError, is NIOSSLCloseTimedOutError:
            return ConnectionProblem(.tls, "TLS with \(url) failed: \(error)")
        default:
            return nil
        }
    }

    /// BoringSSL's reason for a certificate it could not verify. swift-nio-ssl keeps the
    /// packed error code private and hands over BoringSSL's own message, so the reason is
    /// read from there.
    private static func isVerificationFailure(_ error: BoringSSLInternalError) -> Bool {
        error.description.contains("CERTIFICATE_VERIFY_FAILED")
    }
}
