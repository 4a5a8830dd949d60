// swift-tools-version: 6.2
import PackageDescription

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
}

/// A program: a library target with its logic under `Services/<folder>/<library>`
/// and a thin executable under `Services/<folder>/<executable>`.
func program(
    _ executable: String,
    library: String,
    folder: String,
    dependencies: [Target.Dependency]
) -> [Target] {
    [
        .target(
            name: library,
            dependencies: dependencies,
            path: "Services/\(folder)/\(library)",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: executable,
            dependencies: [.target(name: library), "TetherBus", "TetherService", "TetherSchema", .argumentParser],
            path: "Services/\(folder)/\(executable)",
            swiftSettings: swiftSettings
        ),
    ]
}

/// libFuzzer targets, built only by scripts/fuzz (which sets TETHER_FUZZ and builds with
/// `-sanitize=fuzzer`, without which they cannot link), so an ordinary build leaves them out.
let fuzzTargets: [Target] =
    Context.environment["TETHER_FUZZ"] == nil
    ? []
    : [
        .systemLibrary(name: "CFuzzer", path: "Tests/Fuzz/CFuzzer"),
        .executableTarget(name: "fuzz-wire", dependencies: ["CFuzzer", "TetherWire"], path: "Tests/Fuzz/WireCodec", swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-bus", dependencies: ["CFuzzer", "TetherBus", "TetherSchema"], path: "Tests/Fuzz/BusMessage", swiftSettings: swiftSettings),
    ]

let package = Package(
    name: "tether",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tether", targets: ["tether"]),
        .executable(name: "tether-bus", targets: ["tether-bus"]),
        .executable(name: "tether-netmon", targets: ["tether-netmon"]),
        .executable(name: "tether-connd", targets: ["tether-connd"]),
        .executable(name: "tether-protod", targets: ["tether-protod"]),
        .executable(name: "tether-snapd", targets: ["tether-snapd"]),
        .executable(name: "tether-tap", targets: ["tether-tap"]),
        .executable(name: "tether-web", targets: ["tether-web"]),
        .executable(name: "tether-gateway", targets: ["tether-gateway"]),
        .executable(name: "tether-compose", targets: ["tether-compose"]),
        .executable(name: "tether-notify", targets: ["tether-notify"]),
        .library(name: "TetherSchema", targets: ["TetherSchema"]),
        .library(name: "TetherBus", targets: ["TetherBus"]),
        .library(name: "TetherWire", targets: ["TetherWire"]),
        .library(name: "OpenClawWire", targets: ["OpenClawWire"]),
        .library(name: "TetherMarkdown", targets: ["TetherMarkdown"]),
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
        // MARK: Shared

        // libzmq from the system (Debian: libzmq3-dev). The module map links "zmq"
        // directly: Debian's libzmq.pc carries an -isystem flag SwiftPM refuses.
        .systemLibrary(
            name: "CZeroMQ",
            path: "Shared/CZeroMQ",
            providers: [.apt(["libzmq3-dev"])]
        ),
        // The terminal through ncursesw (Debian: libncurses-dev), for the terminal UI.
        .systemLibrary(
            name: "CNcursesw",
            path: "Services/Tether/CNcursesw",
            providers: [.apt(["libncurses-dev"])]
        ),
        // cmark-gfm and its GitHub extensions from the system (Debian: libcmark-gfm-dev,
        // libcmark-gfm-extensions-dev), the Markdown parser of bot replies.
        .systemLibrary(
            name: "CCmarkGFM",
            path: "Shared/CCmarkGFM",
            providers: [.apt(["libcmark-gfm-dev", "libcmark-gfm-extensions-dev"])]
        ),
        // Linux headers the Glibc module leaves out (eventfd).
        .systemLibrary(name: "CLinux", path: "Shared/CLinux"),
        .target(
            name: "TetherWire",
            path: "Shared/TetherWire",
            swiftSettings: swiftSettings
        ),
        // OpenClaw's gateway protocol (versions 3 and 4): frames, the handshake, the device
        // identity (Ed25519), chat.
        .target(
            name: "OpenClawWire",
            dependencies: ["TetherWire", .product(name: "Crypto", package: "swift-crypto")],
            path: "Shared/OpenClawWire",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TetherSchema",
            dependencies: ["TetherWire"],
            path: "Shared/TetherSchema",
            swiftSettings: swiftSettings
        ),
        // Markdown text as a Codable document of blocks and inlines, for every front end.
        .target(
            name: "TetherMarkdown",
            dependencies: ["CCmarkGFM"],
            path: "Shared/TetherMarkdown",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TetherBus",
            dependencies: ["CZeroMQ", "CLinux", "TetherSchema", .logging],
            path: "Shared/TetherBus",
            swiftSettings: swiftSettings
        ),
        // SQLite files that survive damage and a full disk: checked at start, set aside in words.
        .target(
            name: "TetherStorage",
            dependencies: ["TetherBus", "TetherSchema", .grdb, .logging],
            path: "Shared/TetherStorage",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TetherService",
            dependencies: ["CLinux", "TetherBus", "TetherSchema", "TetherWire", .argumentParser, .logging, .serviceLifecycle],
            path: "Shared/TetherService",
            swiftSettings: swiftSettings
        ),
        // What tether-gateway and tether-web share about serving WebSockets.
        .target(
            name: "TetherHTTPServer",
            dependencies: [
                .logging,
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            path: "Shared/TetherHTTPServer",
            swiftSettings: swiftSettings
        ),
    ]
        // MARK: Programs
        + program(
            "tether-bus", library: "BusProxy", folder: "Bus",
            dependencies: ["CZeroMQ", "TetherBus", .logging, .serviceLifecycle]
        )
        + program(
            "tether-gateway", library: "DevGateway", folder: "Gateway",
            dependencies: [
                "OpenClawWire", "TetherSchema", "TetherWire", "TetherService", "TetherHTTPServer", .logging, .serviceLifecycle,
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        )
        + program(
            "tether-connd", library: "ConnectionManager", folder: "Connd",
            dependencies: [
                "OpenClawWire", "TetherBus", "TetherSchema", "TetherService", .logging, .serviceLifecycle,
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        )
        + program(
            "tether-protod", library: "ProtocolHandler", folder: "Protod",
            dependencies: [
                "OpenClawWire", "TetherBus", "TetherSchema", "TetherWire", "TetherService", "TetherStorage", .logging, .serviceLifecycle, .grdb,
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        )
        + program(
            "tether-snapd", library: "SnapshotStore", folder: "Snapd",
            dependencies: ["TetherBus", "TetherSchema", "TetherService", "TetherStorage", .logging, .serviceLifecycle, .grdb]
        )
        + program(
            "tether-netmon", library: "NetworkMonitor", folder: "Netmon",
            dependencies: ["CLinux", "TetherBus", "TetherSchema", "TetherService", .logging, .serviceLifecycle]
        )
        + program(
            "tether", library: "FrontEnd", folder: "Tether",
            dependencies: ["TetherBus", "TetherSchema", "TetherWire", "TetherService", "TetherMarkdown", "CNcursesw", .logging, .serviceLifecycle]
        )
        + [
            // tether-web's page, script and style are resources of its library.
            .target(
                name: "WebFrontEnd",
                dependencies: [
                    "TetherBus", "TetherSchema", "TetherService", "TetherWire", "OpenClawWire", "TetherHTTPServer", .logging, .serviceLifecycle,
                    .product(name: "Crypto", package: "swift-crypto"),
                    .product(name: "Hummingbird", package: "hummingbird"),
                    .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                    .product(name: "NIOCore", package: "swift-nio"),
                    .product(name: "NIOHTTP1", package: "swift-nio"),
                    .product(name: "NIOWebSocket", package: "swift-nio"),
                ],
                path: "Services/Web/WebFrontEnd",
                resources: [
                    .copy("Resources/app.js"), .copy("Resources/app.css"), .copy("Resources/icon.svg"), .copy("Resources/recover.js"),
                    .copy("Resources/markdown.js"),
                ],
                swiftSettings: swiftSettings
            ),
            .executableTarget(
                name: "tether-web",
                dependencies: ["WebFrontEnd", "TetherBus", "TetherService", "TetherSchema", .argumentParser, .logging],
                path: "Services/Web/tether-web",
                swiftSettings: swiftSettings
            ),
        ]
        + [
            // libdbus from the system (Debian: libdbus-1-dev), for desktop notifications.
            .systemLibrary(
                name: "CDBus",
                path: "Services/Notify/CDBus",
                pkgConfig: "dbus-1",
                providers: [.apt(["libdbus-1-dev"])]
            )
        ]
        + program(
            "tether-notify", library: "DesktopNotifier", folder: "Notify",
            dependencies: ["CDBus", "TetherBus", "TetherSchema", "TetherService", "TetherWire", .logging, .serviceLifecycle]
        )
        + program(
            "tether-tap", library: "BusTap", folder: "Tap",
            dependencies: ["TetherBus", "TetherSchema", "TetherService", .logging]
        )
        + program(
            "tether-compose", library: "ComposeSupervisor", folder: "Compose",
            dependencies: [
                "CLinux", "TetherBus", "TetherSchema", "TetherService", .logging,
                .product(name: "Yams", package: "Yams"),
            ]
        )
        + [
            // MARK: Tests

            .target(
                name: "TetherTesting",
                dependencies: ["CLinux", "TetherBus", "TetherSchema", "TetherService", "TetherWire", .logging],
                path: "Tests/TetherTesting",
                swiftSettings: swiftSettings
            ),
            // Benchmarks against baselines measured in the same run (scripts/bench).
            .executableTarget(
                name: "tether-bench",
                dependencies: [
                    "TetherTesting", "TetherBus", "TetherSchema", "TetherWire", "SnapshotStore", "CZeroMQ", .argumentParser, .logging,
                    .product(name: "WSClient", package: "swift-websocket"),
                ],
                path: "Tests/Bench",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherWireTests",
                dependencies: ["TetherWire", "OpenClawWire", .product(name: "Crypto", package: "swift-crypto")],
                path: "Tests/TetherWireTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherMarkdownTests",
                dependencies: ["TetherMarkdown"],
                path: "Tests/TetherMarkdownTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherBusTests",
                dependencies: ["TetherBus", "TetherSchema", "TetherTesting", "CZeroMQ"],
                path: "Tests/TetherBusTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "ProtocolHandlerTests",
                dependencies: ["ProtocolHandler", "OpenClawWire", "TetherBus", "TetherSchema", "TetherTesting", "TetherWire", .logging, .serviceLifecycle],
                path: "Tests/ProtocolHandlerTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "ConnectionManagerTests",
                dependencies: [
                    "ConnectionManager", "OpenClawWire", "TetherBus", "TetherSchema", "TetherService", "TetherTesting", .logging,
                    .product(name: "NIOCore", package: "swift-nio"),
                    .product(name: "NIOSSL", package: "swift-nio-ssl"),
                    .product(name: "NIOWebSocket", package: "swift-nio"),
                ],
                path: "Tests/ConnectionManagerTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "SnapshotStoreTests",
                dependencies: ["SnapshotStore", "TetherBus", "TetherSchema", "TetherTesting", "TetherWire", .grdb, .logging, .serviceLifecycle],
                path: "Tests/SnapshotStoreTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherStorageTests",
                dependencies: ["TetherStorage", "ProtocolHandler", "SnapshotStore", "TetherSchema", "TetherTesting", "TetherWire", .grdb],
                path: "Tests/TetherStorageTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "NetworkMonitorTests",
                dependencies: ["NetworkMonitor", "TetherBus", "TetherSchema", "TetherTesting", .logging, .serviceLifecycle],
                path: "Tests/NetworkMonitorTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "ComposeSupervisorTests",
                dependencies: ["ComposeSupervisor", "ConnectionManager", "TetherService", "TetherTesting"],
                path: "Tests/ComposeSupervisorTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "FrontEndTests",
                dependencies: ["FrontEnd", "TetherBus", "TetherMarkdown", "TetherSchema", "TetherService", "TetherTesting", "TetherWire"],
                path: "Tests/FrontEndTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "WebFrontEndTests",
                dependencies: [
                    "WebFrontEnd", "TetherHTTPServer", "TetherSchema", "TetherWire", .product(name: "NIOCore", package: "swift-nio"),
                    .product(name: "NIOEmbedded", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                ],
                path: "Tests/WebFrontEndTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "DesktopNotifierTests",
                dependencies: ["DesktopNotifier", "TetherSchema", "TetherWire"],
                path: "Tests/DesktopNotifierTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "BusTapTests",
                dependencies: ["BusTap", "TetherBus", "TetherSchema"],
                path: "Tests/BusTapTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "BusProxyTests",
                dependencies: ["BusProxy", "TetherBus", "TetherSchema", "TetherService", "CZeroMQ", .argumentParser],
                path: "Tests/BusProxyTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherServiceTests",
                dependencies: ["TetherService", "TetherBus", "TetherSchema", "TetherTesting", .logging],
                path: "Tests/TetherServiceTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "EndToEndTests",
                dependencies: [
                    "TetherTesting", "TetherBus", "TetherSchema", "TetherService", "TetherWire", "OpenClawWire", "ConnectionManager", "CZeroMQ", .grdb,
                    .logging,
                    .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOWebSocket", package: "swift-nio"),
                ],
                path: "Tests/EndToEndTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TimingTests",
                dependencies: ["TetherTesting", "TetherBus", "TetherSchema", "TetherService", "TetherWire", "CZeroMQ", .logging],
                path: "Tests/TimingTests",
                swiftSettings: swiftSettings
            ),
        ] + fuzzTargets,
    swiftLanguageModes: [.v6]
)
