// swift-tools-version: 6.1
//
// The iOS-only code of README.md and the DocC articles (Tools/doc-examples/README.md): never
// linked into anything. `make ios-check` type-checks it for iOS on Linux; on a Mac,
// `xcodebuild -scheme DocumentationExamplesIOS -destination 'generic/platform=iOS'` builds it.
import PackageDescription

let package = Package(
    name: "DocumentationExamplesIOS",
    platforms: [.iOS(.v17)],  // the examples are an iOS 17 app's (`CourierModel`)
    products: [.library(name: "DocumentationExamplesIOS", targets: ["DocumentationExamplesIOS"])],
    dependencies: [.package(name: "Courier", path: "../../..")],
    targets: [
        .target(name: "DocumentationExamplesIOS", dependencies: [.product(name: "CourierKit", package: "Courier")])
    ]
)
