public import Crypto
public import FoundationEssentials
import TetherWire

/// A device's Ed25519 key: who this installation is to an OpenClaw gateway.
public struct DeviceIdentity: Sendable {
    public let privateKey: Curve25519.Signing.PrivateKey

    public init(privateKey: Curve25519.Signing.PrivateKey = Curve25519.Signing.PrivateKey()) {
        self.privateKey = privateKey
    }

    /// The raw 32-byte public key.
    public var publicKeyRaw: Data { privateKey.publicKey.rawRepresentation }

    /// `device.id`: the SHA-256 of the raw public key, lowercase hex.
    public var deviceID: String { Self.deviceID(ofPublicKey: publicKeyRaw) }

    /// `device.publicKey`: the raw public key, base64url without padding.
    public var publicKeyBase64URL: String { Base64URL.encode(publicKeyRaw) }

    public static func deviceID(ofPublicKey raw: Data) -> String {
        Array(SHA256.hash(data: raw)).lowercaseHex
    }

    /// Signs `payload` (UTF-8); the signature as base64url without padding.
    public func sign(_ payload: String) throws -> String {
        Base64URL.encode(try privateKey.signature(for: Data(payload.utf8)))
    }

    /// Whether `signature` (base64url) is a signature of `payload` by `publicKey` (base64url, raw 32 bytes).
    public static func verify(signature: String, of payload: String, publicKey: String) -> Bool {
        guard let keyData = Base64URL.decode(publicKey), let signatureData = Base64URL.decode(signature),
            let key = try? Curve25519.Signing.PublicKey(rawRepresentation: keyData)
        else { return false }
        return key.isValidSignature(signatureData, for: Data(payload.utf8))
    }
}

/// The string a device signs in its `connect` request.
public struct DeviceSignedPayload: Sendable, Hashable {
    /// `v2` (with the nonce) and `v3` (v2 with the platform and device family, lowercased).
    public enum Version: String, Sendable, CaseIterable {
        case v2, v3
    }

    public var version: Version
    public var deviceID: String
    public var clientID: String
    public var clientMode: String
    public var role: String
    public var scopes: [String]
    public var signedAtMs: Int
    /// `auth.token`, else the device token, else empty.
    public var token: String
    public var nonce: String
    public var platform: String
    public var deviceFamily: String

    public init(
        version: Version, deviceID: String, clientID: String, clientMode: String, role: String, scopes: [String], signedAtMs: Int, token: String,
        nonce: String, platform: String, deviceFamily: String
    ) {
        self.version = version
        self.deviceID = deviceID
        self.clientID = clientID
        self.clientMode = clientMode
        self.role = role
        self.scopes = scopes
        self.signedAtMs = signedAtMs
        self.token = token
        self.nonce = nonce
        self.platform = platform
        self.deviceFamily = deviceFamily
    }

    /// `v2|id|client|mode|role|scopes|signedAt|token|nonce`, and for v3 `|platform|family`
    /// trimmed and in ASCII lowercase (an absent family is empty), as the gateway builds it.
    public var text: String {
        var fields = [version.rawValue, deviceID, clientID, clientMode, role, scopes.joined(separator: ","), String(signedAtMs), token, nonce]
        if version == .v3 {
            fields += [Self.asciiLowercased(platform), Self.asciiLowercased(deviceFamily)]
        }
        return fields.joined(separator: "|")
    }

    /// As the gateway normalises them: trimmed, then A-Z lowercased (nothing else).
    private static func asciiLowercased(_ text: String) -> String {
        let trimmed = text.trimmingWhitespace()
        return String(String.UnicodeScalarView(trimmed.unicodeScalars.map { ("A"..."Z").contains($0) ? Unicode.Scalar($0.value + 32)! : $0 }))
    }
}

/// Base64url (RFC 4648 §5). Written without padding; read with or without it.
public enum Base64URL {
    public static func encode(_ data: Data) -> String {
        String(data.base64EncodedString().compactMap { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 == "=" ? nil : $0 })
    }

    public static func decode(_ text: String) -> Data? {
        var base64 = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
