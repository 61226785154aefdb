// swift-tools-version: 6.0
//
// Courier: guaranteed delivery of messages from an app to a flaky HTTP server.
// See ARCHITECTURE.md for the codemap; every target below has a paragraph there.
import PackageDescription

let package = Package(
    name: "Courier",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "CourierLog", targets: ["CourierLog"]),
        // Test doubles for the log (a fault-injecting file system), shipped like swift-nio's
        // NIOEmbedded so apps can test their own crash handling.
        .library(name: "CourierLogTesting", targets: ["CourierLogTesting"]),
        .executable(name: "wal-dump", targets: ["wal-dump"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        // The system liblz4 (Debian: liblz4-dev, Homebrew: lz4).
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"]), .brew(["lz4"])]
        ),
        // Hardware CRC-32C (SSE4.2 / ARMv8 CRC), with a Swift fallback in CourierLog.
        .target(name: "CCRC32C"),
        // The write-ahead log. It knows nothing about HTTP or messages.
        .target(name: "CourierLog", dependencies: ["CLZ4", "CCRC32C"]),
        .target(name: "CourierLogTesting", dependencies: ["CourierLog"]),

        // Tools
        .target(name: "WALDumpCore", dependencies: ["CourierLog"], path: "Tools/wal-dump/Core"),
        .executableTarget(
            name: "wal-dump",
            dependencies: ["WALDumpCore", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tools/wal-dump/CLI"
        ),
        .executableTarget(name: "wal-bench", dependencies: ["CourierLog", "CLZ4"], path: "Tools/wal-bench"),
        .executableTarget(name: "wal-fixtures", dependencies: ["CourierLog", "CourierLogTesting"], path: "Tools/wal-fixtures"),

        // Tests
        .testTarget(name: "CourierLogTests", dependencies: ["CourierLog", "CourierLogTesting"]),
        .testTarget(name: "WALDumpTests", dependencies: ["WALDumpCore", "CourierLog", "CourierLogTesting"]),
    ],
    swiftLanguageModes: [.v6]
)
