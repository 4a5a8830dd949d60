public import ArgumentParser
public import FoundationEssentials
public import Logging
public import TetherBus

/// CURVE key files: the secret key on the first line, mode 0600.
public enum CurveKeyFile {
    /// The key pair whose secret key is in `path`.
    public static func read(_ path: String) throws -> CurveKeyPair {
        let secret = try SecretFile.read(path, kind: "key file")
        do {
            return try CurveKeyPair(secretKey: secret)
        } catch {
            throw SecretFileError(.unusable, "key file \(path): \(error)")
        }
    }

    /// The key pair in `path`, made there (0600) first if the file does not exist.
    /// - Returns: the pair, and whether it was made now.
    public static func readOrCreate(_ path: String) throws -> (keys: CurveKeyPair, created: Bool) {
        guard !FileManager.default.fileExists(atPath: path) else { return (try read(path), false) }
        guard CurveKeyPair.isSupported else {
            throw SecretFileError(.unsupported, "this libzmq was built without CURVE; a key cannot be made")
        }
        let keys = try CurveKeyPair.generate()
        try SecretFile.write(keys.secretKey, to: path)
        return (keys, true)
    }
}

/// Options of the programs that can join a bus on another host over `tcp://` with CURVE.
///
/// Each falls back to an environment variable; with no address, the program uses the bus
/// in its run directory.
public struct RemoteBusOptions: ParsableArguments, Sendable {
    @Option(help: "A bus on another host: tcp://HOST:PORT, as tether-bus --tcp listens (default: $TETHER_BUS; none: the run directory's bus).")
    public var bus: String?

    // Unconditional: a Z85 key may start with "-", which would otherwise read as an option.
    @Option(
        parsing: .unconditional,
        help: "That bus's public key, as 'tether-bus key FILE' printed it there (default: $TETHER_BUS_SERVER_KEY).")
    public var busServerKey: String?

    @Option(
        help:
            "This program's secret key file (0600), made with 'tether-bus key FILE'; its public key must be in the bus's allow-list (default: $TETHER_BUS_KEY)."
    )
    public var busKey: String?

    public init() {}

    /// The remote bus these options name, or nil for the run directory's.
    public func remoteBus(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> RemoteBus? {
        func value(_ option: String?, _ variable: String) -> String? {
            if let option, !option.isEmpty { return option }
            return environment[variable].flatMap { $0.isEmpty ? nil : $0 }
        }
        guard let address = value(bus, "TETHER_BUS") else { return nil }
        guard let serverKey = value(busServerKey, "TETHER_BUS_SERVER_KEY") else {
            throw ValidationError("a tcp:// bus needs its public key: pass --bus-server-key KEY or set TETHER_BUS_SERVER_KEY")
        }
        guard let keyFile = value(busKey, "TETHER_BUS_KEY") else {
            throw ValidationError("a tcp:// bus needs this program's key: pass --bus-key FILE or set TETHER_BUS_KEY (make one with 'tether-bus key FILE')")
        }
        guard CurveKeyPair.isSupported else {
            throw ValidationError("this libzmq was built without CURVE, which a tcp:// bus requires")
        }
        return try RemoteBus(address: address, serverKey: serverKey, keys: try CurveKeyFile.read(keyFile))
    }
}

extension RemoteBusOptions {
    /// A bus client on the remote bus these options name, else on the bus in `runDirectory`.
    public func makeBusClient(source: String, runDirectory: RunDirectory, logger: Logger) throws -> BusClient {
        try BusClient(source: source, runDirectory: runDirectory, remote: try remoteBus(), logger: logger)
    }
}
