import CZeroMQ

/// A CURVE key pair as libzmq writes it: two keys of 40 Z85 characters.
///
/// The secret key stays in a file only its owner can read; the public key is what the
/// other side is told (the bus's allow-list, a client's `--bus-server-key`).
public struct CurveKeyPair: Sendable, Equatable {
    /// The public key, Z85.
    public let publicKey: String
    /// The secret key, Z85.
    public let secretKey: String

    /// Whether the libzmq this program runs with was built with CURVE (libsodium).
    public static var isSupported: Bool {
        zmq_has("curve") != 0
    }

    /// A new random key pair.
    public static func generate() throws(BusError) -> CurveKeyPair {
        var publicKey = [CChar](repeating: 0, count: 41)
        var secretKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicKey, &secretKey) == 0 else { throw zmqError("zmq_curve_keypair") }
        return CurveKeyPair(publicKey: nulTerminatedText(publicKey), secretKey: nulTerminatedText(secretKey))
    }

    /// The pair whose secret key is `secretKey`; the public key is derived from it.
    public init(secretKey: String) throws(BusError) {
        guard CurveKey.isValid(secretKey) else {
            throw .invalidKey("a CURVE secret key is 40 Z85 characters; this one is not")
        }
        var publicKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&publicKey, secretKey) == 0 else { throw zmqError("zmq_curve_public") }
        self.init(publicKey: nulTerminatedText(publicKey), secretKey: secretKey)
    }

    private init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }
}

/// The text a libzmq key call wrote into `characters`, up to its terminating NUL.
private func nulTerminatedText(_ characters: [CChar]) -> String {
    String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Checks and converts CURVE keys.
public enum CurveKey {
    /// Whether `key` is a 32-byte key written as 40 Z85 characters.
    public static func isValid(_ key: String) -> Bool {
        guard key.utf8.count == 40 else { return false }
        var bytes = [UInt8](repeating: 0, count: 32)
        return zmq_z85_decode(&bytes, key) != nil
    }

    /// The Z85 text of a 32-byte key.
    public static func text(_ binary: [UInt8]) -> String? {
        guard binary.count == 32 else { return nil }
        var characters = [CChar](repeating: 0, count: 41)
        guard zmq_z85_encode(&characters, binary, 32) != nil else { return nil }
        return nulTerminatedText(characters)
    }
}

/// A bus proxy on another host, reached over TCP and authenticated with CURVE.
///
/// The proxy publishes on `port` + 1 what it receives on `port`, and relays commands (send,
/// transcript, snapshot, connection…) received on `port` + 2 to their owners on its host.
public struct RemoteBus: Sendable, Equatable {
    /// The proxy's host name or IPv4 address.
    public var host: String
    /// The port of the proxy's `bus.in`; its `bus.out` is the next one.
    public var port: Int
    /// The proxy's public key.
    public var serverKey: String
    /// This program's key pair, whose public key must be in the proxy's allow-list.
    public var keys: CurveKeyPair

    /// A remote bus at `address` (`tcp://HOST:PORT` or `HOST:PORT`).
    public init(address: String, serverKey: String, keys: CurveKeyPair) throws(BusError) {
        let (host, port) = try Self.parse(address)
        guard CurveKey.isValid(serverKey) else {
            throw .invalidKey("the bus's public key '\(serverKey)' is not 40 Z85 characters")
        }
        self.host = host
        self.port = port
        self.serverKey = serverKey
        self.keys = keys
    }

    /// The host and port of `tcp://HOST:PORT` or `HOST:PORT`; the port must leave room for `bus.out` and the commands after it.
    public static func parse(_ address: String) throws(BusError) -> (host: String, port: Int) {
        let text = address.hasPrefix("tcp://") ? String(address.dropFirst(6)) : address
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (1...65534).contains(port),
            !text[..<colon].isEmpty, !text[..<colon].contains(":"), port <= 65533
        else {
            throw .invalidAddress(address)
        }
        return (String(text[..<colon]), port)
    }

    /// The proxy's `bus.in` endpoint.
    public var busIn: String { "tcp://\(host):\(port)" }
    /// The proxy's `bus.out` endpoint.
    public var busOut: String { "tcp://\(host):\(port + 1)" }
    /// The proxy's command relay: a command sent there, with the name of its endpoint as its
    /// first frame, reaches that endpoint's owner on the proxy's host.
    public var commands: String { "tcp://\(host):\(port + 2)" }
}

extension ZMQSocket {
    /// Makes this socket a CURVE client of the server whose public key is `serverKey`.
    func setCurveClient(serverKey: String, keys: CurveKeyPair) throws(BusError) {
        try set(ZMQ_CURVE_SERVERKEY, bytes: Array(serverKey.utf8))
        try set(ZMQ_CURVE_PUBLICKEY, bytes: Array(keys.publicKey.utf8))
        try set(ZMQ_CURVE_SECRETKEY, bytes: Array(keys.secretKey.utf8))
    }
}
