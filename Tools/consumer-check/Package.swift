// swift-tools-version: 6.1
//
// An app's view of Courier: one dependency, on the `CourierKit` product, with its default traits,
// exactly as an iOS app adds it. `make consumer-check` (part of `make test`) resolves this
// package and fails if its Package.resolved pins anything but swift-log, then builds and runs
// it on Linux, where the trait `AsyncHTTPClientTransport` is therefore off.
import PackageDescription

let package = Package(
    name: "ConsumerCheck",
    platforms: [.iOS(.v16), .macOS(.v13)],
    dependencies: [.package(name: "Courier", path: "../..")],
    targets: [
        .executableTarget(name: "consumer-check", dependencies: [.product(name: "CourierKit", package: "Courier")])
    ],
    swiftLanguageModes: [.v6]
)
