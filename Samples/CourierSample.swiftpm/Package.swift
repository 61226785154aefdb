// swift-tools-version: 6.0
//
// The iOS sample app: open this folder in Xcode 16.3 or later (File › Open…, or
// `xed CourierSample.swiftpm`), pick an iPhone simulator or your phone, and press Run. No
// project to generate. For a phone, set your team and a bundle identifier of your own (here,
// in AdditionalInfo.plist's task identifier, and in CourierSampleApp.swift).
//
// An app package (Xcode 14+): the `.iOSApplication` product below is the app. It uses
// CourierKit from this repository as a local package; its screen is its own (SampleScreen.swift),
// over `CourierModel` (iOS 17), which lists and follows the messages. `make ios-check`
// type-checks its sources for iOS on Linux; nothing here is linked or run except by Xcode.
import PackageDescription
import AppleProductTypes

let package = Package(
    name: "CourierSample",
    platforms: [.iOS("17.0")],
    products: [
        .iOSApplication(
            name: "Courier Sample",
            targets: ["CourierSampleApp"],
            bundleIdentifier: "com.example.courier-sample",
            // Set your team to run on a phone (Signing & Capabilities); the simulator needs none.
            teamIdentifier: "",
            displayVersion: "1.0",
            bundleVersion: "1",
            appIcon: .placeholder(icon: .cloud),
            accentColor: .presetColor(.indigo),
            supportedDeviceFamilies: [.phone, .pad],
            supportedInterfaceOrientations: [
                .portrait,
                .landscapeLeft,
                .landscapeRight,
                .portraitUpsideDown(.when(deviceFamilies: [.pad])),
            ],
            capabilities: [.outgoingNetworkConnections()],
            // Background processing (UIBackgroundModes) and the BGTaskScheduler identifier the
            // lifecycle integration registers; local networking for a server on your Mac.
            additionalInfoPlistContentFilePath: "AdditionalInfo.plist"
        ),
    ],
    dependencies: [
        // This repository. Named, because a path dependency is otherwise named after its folder.
        .package(name: "Courier", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "CourierSampleApp",
            dependencies: [
                .product(name: "CourierKit", package: "Courier"),
            ],
            path: "Sources/CourierSampleApp",
            // The app's privacy manifest: it keeps the server you typed in UserDefaults (CA92.1).
            resources: [.process("PrivacyInfo.xcprivacy")]
        ),
    ]
)
