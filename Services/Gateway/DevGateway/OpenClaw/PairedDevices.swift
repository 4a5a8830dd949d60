import Foundation

/// The devices the gateway paired, with the device token it issued each, kept in
/// `devices.json` of the state directory.
struct PairedDevices: Sendable {
    struct Device: Codable, Sendable {
        var id: String
        var publicKey: String
        var token: String
        /// The scopes it was paired with; a connection asking for more is a scope upgrade,
        /// which a person approves. nil: paired before scopes were kept (the chat scopes).
        var scopes: [String]?
    }

    private var devices: [String: Device] = [:]
    private let path: String?

    init(directory: String?) throws {
        path = directory.map { $0 + "/devices.json" }
        if let directory {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        if let path, let data = FileManager.default.contents(atPath: path) {
            devices = (try? JSONDecoder().decode([String: Device].self, from: data)) ?? [:]
        }
    }

    var ids: [String] { devices.keys.sorted() }

    func device(_ id: String) -> Device? { devices[id] }

    /// Pairs a device with `scopes` and issues its token (the one issued before, if it was
    /// paired already: its scopes then grow by those asked for).
    mutating func pair(id: String, publicKey: String, scopes: [String]) -> Device {
        var device = devices[id] ?? Device(id: id, publicKey: publicKey, token: UUID().uuidString.lowercased() + UUID().uuidString.lowercased())
        device.scopes = Array(Set(device.scopes ?? []).union(scopes)).sorted()
        devices[id] = device
        if let path, let data = try? JSONEncoder().encode(devices) {
            _ = FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
        }
        return device
    }

    /// The scopes of `scopes` a paired device was not paired with.
    func missingScopes(of device: Device, asking scopes: [String]) -> [String] {
        let granted = Set(device.scopes ?? ["operator.read", "operator.write"])
        return scopes.filter { !granted.contains($0) && !granted.contains("operator.admin") }
    }
}
