// swift-tools-version: 6.1
//
// Courier: guaranteed delivery of messages from an app to a flaky HTTP server.
// See ARCHITECTURE.md for the codemap; every target below has a paragraph there.
import PackageDescription

// CourierLog's privacy manifest (PrivacyInfo.xcprivacy: `stat`/`fstat` of its own files, the
// file-timestamp category, reason C617.1), a resource where an app is built: on Apple platforms.
// Elsewhere the file is excluded, so the Linux build links no resource bundle (as swift-nio
// does for its own). The condition is the manifest's host: an Apple machine building for iOS.
#if canImport(Darwin)
let privacyManifest: [Resource] = [.process("PrivacyInfo.xcprivacy")]
let privacyManifestExcluded: [String] = []
#else
let privacyManifest: [Resource] = []
let privacyManifestExcluded = ["PrivacyInfo.xcprivacy"]
#endif

let package = Package(
    name: "Courier",
    platforms: [.iOS(.v16), .macOS(.v13)],
    // Products are what an app that adds Courier resolves, so they are the libraries alone.
    // SwiftPM resolves only the packages that a consumer's products reach: with no executable
    // product here and the HTTP client behind a trait that is off by default, an app pins
    // swift-log and nothing else (`make consumer-check` measures it). The executables below
    // (`wal-dump`, `courier-sample`, `flaky-server`, the benchmarks and fuzzers) stay runnable in
    // this repository: SwiftPM makes a product of every executable target of the root package
    // (`swift run wal-dump`).
    products: [
        // The library an app adds: `import CourierKit`. Its main type is `Courier`, so
        // `CourierKit.RetryPolicy` and `CourierKit.MessageID` always name Courier's own.
        .library(name: "CourierKit", targets: ["CourierKit"]),
        // Test doubles for an app's own tests: a scripted transport, a manual clock, the
        // simulated background system.
        .library(name: "CourierTesting", targets: ["CourierTesting"]),
    ],
    // AsyncHTTPClient, the Linux transport, sits behind this trait *and* a Linux platform
    // condition. Off by default, so that an iOS app never fetches it (a platform condition
    // alone still fetches and pins a dependency; a disabled trait does not: checked with
    // SwiftPM 6.3). A Linux app turns it on in its one dependency line:
    //   .package(url: "…/courier", from: "0.1.0", traits: ["AsyncHTTPClientTransport"])
    // Without it, opening a Courier on Linux with no `configuration.transport` throws
    // `.transportUnavailable` naming this trait. The Makefile builds this repository with it.
    traits: [
        .trait(
            name: "AsyncHTTPClientTransport",
            description: "The AsyncHTTPClient transport: what Courier delivers through on Linux."
        ),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // Linux transport (URLSession on Linux hangs and re-sends POSTs when servers drop
        // connections; see README). Built on Linux only: Apple platforms use URLSession.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        // `courier-bench --h2` only: a TLS HTTP/2 loopback server (already in the graph as
        // AsyncHTTPClient's dependencies; trait-conditional, so an app never pins them).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.36.0"),
        // `make docs` (DocC); a command plugin: nothing of it is linked into Courier.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
        // Logging the ecosystem's way (`Configuration.logger`); silent unless the app sets one.
        // 1.16: `LogHandler.log(event:)`, which the tests and the os.Logger bridge implement.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // The stand-in flaky server used by tests, the demo and the benchmarks.
        .package(url: "https://github.com/swhitty/FlyingFox", from: "0.27.1"),
    ],
    targets: [
        // The system liblz4 (Debian: liblz4-dev), on Linux only: its block API is the log's
        // block codec there. Apple platforms use the Compression framework instead, so an iOS
        // app needs no system library (the LZ4 frame format itself is Swift, on every platform).
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        // The system's zlib, on every platform (Debian: zlib1g-dev; Apple platforms: the SDK's
        // libz): `Content-Encoding: gzip` bodies (`DestinationOptions.gzip`). No pkg-config: the
        // header is where every system keeps it.
        .systemLibrary(name: "CZlib", providers: [.apt(["zlib1g-dev"])]),
        // Hardware CRC-32C (SSE4.2 / ARMv8 CRC), with a Swift fallback in CourierLog.
        .target(name: "CCRC32C"),
        // The write-ahead log. It knows nothing about HTTP or messages.
        .target(name: "CourierLog",
                dependencies: [.target(name: "CLZ4", condition: .when(platforms: [.linux])), "CCRC32C"],
                exclude: privacyManifestExcluded, resources: privacyManifest),
        .target(name: "CourierLogTesting", dependencies: ["CourierLog"]),
        // The messaging layer and public API: events, projection, retry engine, transports.
        .target(name: "CourierKit", dependencies: [
            "CourierLog", "CZlib",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "AsyncHTTPClient", package: "async-http-client",
                     condition: .when(platforms: [.linux], traits: ["AsyncHTTPClientTransport"])),
            .product(name: "NIOPosix", package: "swift-nio",
                     condition: .when(platforms: [.linux], traits: ["AsyncHTTPClientTransport"])),
        ]),
        .target(name: "CourierTesting", dependencies: ["CourierKit", "CourierLog", "CourierLogTesting"]),
        // The terminal sample (`make demo`): its input model, rows and renderer (tested), and a
        // thin terminal view over `CourierModel`. Not a product: the iOS sample's code lives in
        // Samples/CourierSample (the device kit's Xcode project).
        .target(name: "CourierSample", dependencies: ["CourierKit"]),
        .executableTarget(name: "courier-sample", dependencies: [
            "CourierSample", "CourierKit", "CourierLog", "FlakyServer",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // A loopback HTTP server that fails on purpose (500s, drops, delays, 429 + Retry-After).
        .target(name: "FlakyServer", dependencies: ["CourierLog", .product(name: "FlyingFox", package: "FlyingFox")],
                path: "Tools/flaky-server/Core"),
        .executableTarget(
            name: "flaky-server",
            dependencies: ["FlakyServer", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tools/flaky-server/CLI"),

        // Tools
        .target(name: "WALDumpCore", dependencies: ["CourierLog", "CourierKit"], path: "Tools/wal-dump/Core"),
        .executableTarget(
            name: "wal-dump",
            dependencies: ["WALDumpCore", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tools/wal-dump/CLI"
        ),
        .executableTarget(name: "courier-load", dependencies: ["CourierKit", "CourierLog"], path: "Tools/courier-load"),
        // ExtensionOutbox's writer and collector as processes (ExtensionProcessTests, the outbox bench).
        .executableTarget(name: "courier-outbox", dependencies: ["CourierKit"], path: "Tools/courier-outbox"),
        // `make bench-background`: background hand-off on the simulated system (virtual time).
        .target(name: "BackgroundScenarios", dependencies: ["CourierKit", "CourierTesting"],
                path: "Tools/courier-background-bench/Scenarios"),
        .executableTarget(name: "courier-background-bench", dependencies: ["BackgroundScenarios", "CourierKit"],
                          path: "Tools/courier-background-bench/CLI"),
        // Issue 36's retry-tail scenarios on virtual time: printed by `courier-bench --drain`,
        // asserted by `make test` (RetryTailPromiseTests).
        .target(name: "RetryScenarios", dependencies: ["CourierKit", "CourierTesting", "CourierLog"],
                path: "Tools/retry-scenarios"),
        .target(name: "CHeap", path: "Tools/courier-bench-heap"),  // `courier-bench --model`: heap in use
        .executableTarget(
            name: "courier-bench",
            dependencies: ["CourierKit", "CourierLog", "FlakyServer", "RetryScenarios", "CHeap",
                           .product(name: "AsyncHTTPClient", package: "async-http-client",
                                    condition: .when(platforms: [.linux], traits: ["AsyncHTTPClientTransport"])),
                           .product(name: "NIOSSL", package: "swift-nio-ssl",
                                    condition: .when(platforms: [.linux], traits: ["AsyncHTTPClientTransport"])),
                           .product(name: "NIOHTTP2", package: "swift-nio-http2",
                                    condition: .when(platforms: [.linux], traits: ["AsyncHTTPClientTransport"]))],
            path: "Tools/courier-bench"),
        .executableTarget(name: "wal-bench",
                          dependencies: ["CourierLog", .target(name: "CLZ4", condition: .when(platforms: [.linux]))],
                          path: "Tools/wal-bench"),
        // libFuzzer target (`make fuzz`): built only with `--sanitize fuzzer`, never by `make test`.
        .executableTarget(name: "fuzz-lz4-frame", dependencies: ["CourierLog", "CourierLogTesting"],
                          path: "Tools/fuzz-lz4-frame"),
        // libFuzzer target (`make fuzz`, and a short run in `make test`): event decoder, JSON
        // writer, wal-dump. Built with `--sanitize fuzzer`, without the HTTP client trait.
        .executableTarget(name: "fuzz-courier",
                          dependencies: ["CourierKit", "CourierLog", "CourierLogTesting", "WALDumpCore"],
                          path: "Tools/fuzz-courier"),
        // The messaging layer's golden records (Fixtures/logs/courier-v1), made by today's
        // encoder: `wal-fixtures` writes them, CourierTests decodes them. Not a product.
        .target(name: "GoldenRecords", dependencies: ["CourierKit", "CourierLog", "CourierLogTesting"],
                path: "Tools/wal-fixtures/Records"),
        .executableTarget(name: "wal-fixtures", dependencies: ["CourierLog", "CourierLogTesting", "GoldenRecords"],
                          path: "Tools/wal-fixtures/CLI"),

        // Tests
        .testTarget(name: "CourierSampleTests", dependencies: ["CourierSample", "CourierKit", "CourierTesting"]),
        .testTarget(name: "CourierLogTests", dependencies: [
            "CourierLog", "CourierLogTesting", .target(name: "CLZ4", condition: .when(platforms: [.linux])),
        ]),
        .testTarget(name: "CourierTests", dependencies: [
            "CourierKit", "CourierTesting", "CourierLog", "CourierLogTesting", "FlakyServer",
            "GoldenRecords", "BackgroundScenarios", "RetryScenarios",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "AsyncHTTPClient", package: "async-http-client",
                     condition: .when(platforms: [.linux], traits: ["AsyncHTTPClientTransport"])),
            .product(name: "NIOPosix", package: "swift-nio",
                     condition: .when(platforms: [.linux], traits: ["AsyncHTTPClientTransport"])),
        ]),
        .testTarget(name: "WALDumpTests",
                    dependencies: ["WALDumpCore", "CourierLog", "CourierLogTesting", "CourierKit", "CourierTesting"]),
    ],
    swiftLanguageModes: [.v6]
)
