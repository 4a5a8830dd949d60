// swift-tools-version: 6.2
import PackageDescription

// The code every Tether program shares, as one dynamic library (libTetherKit.so) that the
// programs map once between them: the bus, the schema, the wire codecs, the service helpers,
// storage, Markdown, and every package they and the programs build on. SwiftPM links the
// targets an executable depends on into it, so without this library each of the eleven
// programs would carry its own copy of the same code (docs/BENCHMARKS.md, "One copy of the
// code"). The package at the top level builds the programs and the tests over it.

/// Settings every Tether target shares.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

extension Target.Dependency {
    static let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")
    static let logging = Target.Dependency.product(name: "Logging", package: "swift-log")
    static let serviceLifecycle = Target.Dependency.product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
    static let grdb = Target.Dependency.product(name: "GRDB", package: "GRDB.swift")
    static func nio(_ module: String) -> Target.Dependency { .product(name: module, package: "swift-nio") }
}

let package = Package(
    name: "tether-shared",
    platforms: [.macOS(.v15)],
    products: [
        .library(
            name: "TetherKit", type: .dynamic,
            targets: [
                "TetherWire", "OpenClawWire", "TetherSchema", "TetherMarkdown", "TetherBus", "TetherStorage", "TetherService", "TetherHTTPServer",
                "TetherDependencies",
            ])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.29.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.20.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.6.0"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.0"..<"5.0.0"),
    ],
    targets: [
        // libzmq from the system (Debian: libzmq3-dev). The module map links "zmq"
        // directly: Debian's libzmq.pc carries an -isystem flag SwiftPM refuses.
        .systemLibrary(
            name: "CZeroMQ",
            path: "CZeroMQ",
            providers: [.apt(["libzmq3-dev"])]
        ),
        // cmark-gfm and its GitHub extensions from the system (Debian: libcmark-gfm-dev,
        // libcmark-gfm-extensions-dev), the Markdown parser of bot replies.
        .systemLibrary(
            name: "CCmarkGFM",
            path: "CCmarkGFM",
            providers: [.apt(["libcmark-gfm-dev", "libcmark-gfm-extensions-dev"])]
        ),
        // Linux headers the Glibc module leaves out (eventfd).
        .systemLibrary(name: "CLinux", path: "CLinux"),
        .target(
            name: "TetherWire",
            path: "TetherWire",
            swiftSettings: swiftSettings
        ),
        // OpenClaw's gateway protocol (versions 3 and 4): frames, the handshake, the device
        // identity (Ed25519), chat.
        .target(
            name: "OpenClawWire",
            dependencies: ["TetherWire", .product(name: "Crypto", package: "swift-crypto")],
            path: "OpenClawWire",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TetherSchema",
            dependencies: ["TetherWire"],
            path: "TetherSchema",
            swiftSettings: swiftSettings
        ),
        // Markdown text as a Codable document of blocks and inlines, for every front end.
        .target(
            name: "TetherMarkdown",
            dependencies: ["CCmarkGFM"],
            path: "TetherMarkdown",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TetherBus",
            dependencies: ["CZeroMQ", "CLinux", "TetherSchema", .logging],
            path: "TetherBus",
            swiftSettings: swiftSettings
        ),
        // SQLite files that survive damage and a full disk: checked at start, set aside in words.
        .target(
            name: "TetherStorage",
            dependencies: ["TetherBus", "TetherSchema", .grdb, .logging],
            path: "TetherStorage",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TetherService",
            dependencies: ["CLinux", "TetherBus", "TetherSchema", "TetherWire", .argumentParser, .logging, .serviceLifecycle],
            path: "TetherService",
            swiftSettings: swiftSettings
        ),
        // What tether-gateway and tether-web share about serving WebSockets.
        .target(
            name: "TetherHTTPServer",
            dependencies: [
                .logging,
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .nio("NIOCore"), .nio("NIOEmbedded"),
            ],
            path: "TetherHTTPServer",
            swiftSettings: swiftSettings
        ),
        // Every package module a program or a test imports, so that each is in the library once:
        // a program that linked one of them itself would carry a second copy of it (and of its
        // types), beside the library's.
        .target(
            name: "TetherDependencies",
            dependencies: [
                .argumentParser, .logging, .serviceLifecycle, .grdb,
                .nio("NIOCore"), .nio("NIOPosix"), .nio("NIOHTTP1"), .nio("NIOWebSocket"), .nio("NIOEmbedded"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "Yams", package: "Yams"),
            ],
            path: "TetherDependencies",
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
