// swift-tools-version: 6.1
//
// Courier's benchmarks on ordo-one's package-benchmark (percentiles, allocation counts), a
// package of their own so `make test` never builds them. `make bench` runs them and turns the
// results into Benchmarks/results.md and Benchmarks/send-cost.svg (Benchmarks/chart.py).
import PackageDescription

let package = Package(
    name: "CourierBenchmarks",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [
        .package(name: "Courier", path: "..", traits: ["AsyncHTTPClientTransport"]),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "Send",
            dependencies: [
                .product(name: "Courier", package: "Courier"),
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/Send",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
