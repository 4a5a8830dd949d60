import Crypto
import FoundationEssentials
public import OpenClawWire
import TetherService
import TetherWire

#if canImport(Glibc)
import Glibc
import TetherBus
#endif

/// Where connd keeps its OpenClaw device key and the device tokens gateways issued to it:
/// files of mode 0600 in a directory of mode 0700 under the user's configuration directory
/// (`$XDG_CONFIG_HOME/tether`, else `~/.config/tether`). Neither ever goes on the bus, into a
/// log or into snapd.
public struct DeviceKeyStore: Sendable {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    /// `$XDG_CONFIG_HOME/tether`, else `$HOME/.config/tether`: Tether's configuration directory.
    public static var defaultDirectory: String {
        SettingsFile.configurationDirectory()
    }

    var keyPath: String { directory + "/openclaw-device.key" }

    /// The file holding the device token one gateway (by URL) issued.
    func deviceTokenPath(url: String) -> String {
        let digest = SHA256.hash(data: Data(url.utf8)).prefix(8).lowercaseHex
        return directory + "/openclaw-\(digest).device-token"
    }

    /// The device key, made and stored the first time.
    public func identity() throws -> DeviceIdentity {
        if FileManager.default.fileExists(atPath: keyPath) {
            let encoded = try SecretFile.read(keyPath, kind: "device key file")
            guard let raw = Base64URL.decode(encoded), let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw) else {
                throw SecretFileError(
                    .unusable,
                    "device key file \(keyPath) does not hold an Ed25519 key; move it away to make a new one (the device then needs approving again)")
            }
            return DeviceIdentity(privateKey: key)
        }
        try makeDirectory()
        let identity = DeviceIdentity()
        try SecretFile.write(Base64URL.encode(identity.privateKey.rawRepresentation), to: keyPath)
        return identity
    }

    /// The device token stored for the gateway at `url`, if any.
    public func deviceToken(url: String) -> String? {
        try? SecretFile.read(deviceTokenPath(url: url), kind: "device token file")
    }

    /// Stores the device token a gateway issued (replacing one stored before).
    public func storeDeviceToken(_ token: String, url: String) throws {
        try makeDirectory()
        try SecretFile.write(token, to: deviceTokenPath(url: url))
    }

    /// Forgets the device token of the gateway at `url` (it was refused).
    public func forgetDeviceToken(url: String) {
        unlink(deviceTokenPath(url: url))
    }

    private func makeDirectory() throws {
        var info = stat()
        if stat(directory, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else { throw SecretFileError(.wrongKind, "\(directory) is not a directory") }
            return
        }
        // Each missing folder on the way, as `mkdir -p -m 700` makes them.
        var path = ""
        for component in directory.split(separator: "/") {
            path += "/" + component
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
                throw SecretFileError(.unwritable, "cannot create \(path) for the device key: \(String(cString: strerror(errno)))")
            }
        }
    }
}
