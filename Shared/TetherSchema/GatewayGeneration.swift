/// Which OpenClaw gateway a `hello-ok` shows, as far as a chat client's promises depend on it.
///
/// The 2026.4 releases speak protocol 3 and keep nothing a client can ask of a message's fate
/// but their transcript; from 2026.5.12 the gateway speaks protocol 4 only, and its chat
/// gained receipts, catch-up cursors, queue modes and run status over later releases, as
/// optional fields its closed schemas refuse where it does not know them. A field is sent
/// only to a gateway known to accept it.
public struct GatewayGeneration: Sendable, Hashable, Codable {
    /// The release line, from the protocol.
    public enum Line: String, Sendable, Hashable, Codable {
        /// Protocol 3: the 2026.4 releases and earlier.
        case release2026_4 = "2026.4"
        /// Protocol 4: 2026.5.12 and later.
        case protocol4 = "protocol-4"
    }

    public var line: Line
    /// The release the gateway names (`server.version`), when it does.
    public var release: String?
    /// It has `chat.steer` (`features.methods`): a queued message can be moved into the run in progress.
    public var steers: Bool

    public init(line: Line, release: String?, steers: Bool) {
        self.line = line
        self.release = release
        self.steers = steers
    }

    /// What `hello-ok` says: its `protocol`, `server.version` and `features.methods`.
    public init(protocol version: Int, release: String?, methods: [String]?) {
        line = version >= 4 ? .protocol4 : .release2026_4
        self.release = release
        steers = methods?.contains("chat.steer") == true
    }

    /// The gateway in words, for `tether status`: its line, its release, and what of its chat
    /// Tether relies on.
    public var words: String {
        var words =
            switch line {
            case .release2026_4: "OpenClaw of the 2026.4 line (protocol 3)"
            case .protocol4: "OpenClaw protocol 4 (2026.5.12 or later)"
            }
        if let release { words += ", release \(release)" }
        return words
    }

    /// What Tether can rely on with this gateway, in words.
    public var features: String {
        switch line {
        case .release2026_4:
            "no delivery receipts, catch-up cursors, queue modes or run status: what the gateway kept is read from its history"
        case .protocol4:
            "steering \(steers ? "offered" : "not offered"); run status and failure kinds shown; what the gateway kept is asked by key where it answers receipts (the outbox line says), else read from its history"
        }
    }
}
