// swift-tools-version: 6.2
import PackageDescription

/// Settings every Tether target shares.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The code every program shares, the packages under it included: one dynamic library
/// (Shared/Package.swift). A target here names no package module of its own; each is
/// imported from the library, since a module linked here too would be a second copy.
let kit = Target.Dependency.product(name: "TetherKit", package: "Shared")

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
            dependencies: [.target(name: library), kit],
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
        .executableTarget(name: "fuzz-wire", dependencies: ["CFuzzer", kit], path: "Tests/Fuzz/WireCodec", swiftSettings: swiftSettings),
        .executableTarget(name: "fuzz-bus", dependencies: ["CFuzzer", kit], path: "Tests/Fuzz/BusMessage", swiftSettings: swiftSettings),
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
    ],
    dependencies: [
        .package(path: "Shared"),
        // For its generate-manual plugin alone (scripts/manuals): a package's plugins are
        // usable only from a package that depends on it directly. No target here names its
        // product; ArgumentParser comes through the library like every other module.
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
    ],
    targets: [
        // The terminal through ncursesw (Debian: libncurses-dev), for the terminal UI.
        .systemLibrary(
            name: "CNcursesw",
            path: "Services/Tether/CNcursesw",
            providers: [.apt(["libncurses-dev"])]
        )
    ]
        // MARK: Programs
        + program(
            "tether-bus", library: "BusProxy", folder: "Bus",
            dependencies: [kit]
        )
        + program(
            "tether-gateway", library: "DevGateway", folder: "Gateway",
            dependencies: [kit]
        )
        + program(
            "tether-connd", library: "ConnectionManager", folder: "Connd",
            dependencies: [kit]
        )
        + program(
            "tether-protod", library: "ProtocolHandler", folder: "Protod",
            dependencies: [kit]
        )
        + program(
            "tether-snapd", library: "SnapshotStore", folder: "Snapd",
            dependencies: [kit]
        )
        + program(
            "tether-netmon", library: "NetworkMonitor", folder: "Netmon",
            dependencies: [kit]
        )
        + program(
            "tether", library: "FrontEnd", folder: "Tether",
            dependencies: ["CNcursesw", kit]
        )
        + [
            // tether-web's page, script and style are resources of its library.
            .target(
                name: "WebFrontEnd",
                dependencies: [kit],
                path: "Services/Web/WebFrontEnd",
                resources: [
                    .copy("Resources/app.js"), .copy("Resources/app.css"), .copy("Resources/icon.svg"), .copy("Resources/recover.js"),
                    .copy("Resources/markdown.js"),
                ],
                swiftSettings: swiftSettings
            ),
            .executableTarget(
                name: "tether-web",
                dependencies: ["WebFrontEnd", kit],
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
            dependencies: ["CDBus", kit]
        )
        + program(
            "tether-tap", library: "BusTap", folder: "Tap",
            dependencies: [kit]
        )
        + program(
            "tether-compose", library: "ComposeSupervisor", folder: "Compose",
            dependencies: [kit]
        )
        + [
            // MARK: Tests

            .target(
                name: "TetherTesting",
                dependencies: [kit],
                path: "Tests/TetherTesting",
                swiftSettings: swiftSettings
            ),
            // Benchmarks against baselines measured in the same run (scripts/bench).
            .executableTarget(
                name: "tether-bench",
                dependencies: ["TetherTesting", "SnapshotStore", kit],
                path: "Tests/Bench",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherWireTests",
                dependencies: [kit],
                path: "Tests/TetherWireTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherMarkdownTests",
                dependencies: [kit],
                path: "Tests/TetherMarkdownTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherBusTests",
                dependencies: ["TetherTesting", kit],
                path: "Tests/TetherBusTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "ProtocolHandlerTests",
                dependencies: ["ProtocolHandler", "TetherTesting", kit],
                path: "Tests/ProtocolHandlerTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "ConnectionManagerTests",
                dependencies: ["ConnectionManager", "TetherTesting", kit],
                path: "Tests/ConnectionManagerTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "SnapshotStoreTests",
                dependencies: ["SnapshotStore", "TetherTesting", kit],
                path: "Tests/SnapshotStoreTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherStorageTests",
                dependencies: ["ProtocolHandler", "SnapshotStore", "TetherTesting", kit],
                path: "Tests/TetherStorageTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "NetworkMonitorTests",
                dependencies: ["NetworkMonitor", "TetherTesting", kit],
                path: "Tests/NetworkMonitorTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "ComposeSupervisorTests",
                dependencies: ["ComposeSupervisor", "ConnectionManager", "TetherTesting", kit],
                path: "Tests/ComposeSupervisorTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "FrontEndTests",
                dependencies: ["FrontEnd", "TetherTesting", kit],
                path: "Tests/FrontEndTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "WebFrontEndTests",
                dependencies: ["WebFrontEnd", kit],
                path: "Tests/WebFrontEndTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "DesktopNotifierTests",
                dependencies: ["DesktopNotifier", kit],
                path: "Tests/DesktopNotifierTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "BusTapTests",
                dependencies: ["BusTap", kit],
                path: "Tests/BusTapTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "BusProxyTests",
                dependencies: ["BusProxy", kit],
                path: "Tests/BusProxyTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TetherServiceTests",
                dependencies: ["TetherTesting", kit],
                path: "Tests/TetherServiceTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "EndToEndTests",
                dependencies: ["TetherTesting", "ConnectionManager", kit],
                path: "Tests/EndToEndTests",
                swiftSettings: swiftSettings
            ),
            .testTarget(
                name: "TimingTests",
                dependencies: ["TetherTesting", kit],
                path: "Tests/TimingTests",
                swiftSettings: swiftSettings
            ),
        ] + fuzzTargets,
    swiftLanguageModes: [.v6]
)
