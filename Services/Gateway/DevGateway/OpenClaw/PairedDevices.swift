import Foundation

/// The devices the gateway paired, with the device token it issued each, kept in
/// `devices.json` of the state directory.
struct PairedDevices: Sendable {
    struct Device: Codable, Sendable {
        var id: String
        var publicKey: String
        var token: String
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

    /// Pairs a device and issues its token (the one issued before, if it was paired already).
    mutating func pair(id: String, publicKey: String) -> Device {
        if let known = devices[id] { return known }
        let device = Device(id: id, publicKey: publicKey, token: UUID().uuidString.lowercased() + UUID().uuidString.lowercased())
        devices[id] = device
        if let path, let data = try? JSONEncoder().encode(devices) {
            _ = FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
        }
        return device
    }
}
