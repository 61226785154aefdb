import Foundation

/// What the app and its share extension share (this folder is compiled into both): the App
/// Group, the outbox folder in its container, and the server the user last applied.
enum SharedContainer {
    /// The App Group both entitlements files name; `make xcodeproj-check` fails if the three
    /// differ. On a phone, use a group of your own team's (Samples/README.md).
    static let appGroup = "group.com.example.courier-sample"

    /// The group's container; nil when this process lacks the entitlement (iOS answers nil for
    /// a group it does not have).
    static var container: URL? {
        FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: appGroup)
    }

    /// Where extensions write (`ExtensionOutbox`) and the app's courier collects
    /// (`extensionOutboxDirectory`). Only this outbox lives in the group's container: the
    /// courier's own log stays in the app's, because a courier locks its folder for its whole
    /// life and iOS kills a process suspended with a lock in a shared container (0xdead10cc).
    static var extensionOutbox: URL? {
        container?.appending(path: "ExtensionOutbox", directoryHint: .isDirectory)
    }

    /// The first user's server (200 or 500 at random), until the user types another.
    static let challengeServer = URL(string: "https://challenge.ronash.co/reliable-messaging")!
    private static let serverKey = "courier-sample.server"

    /// Where messages go, the extension's too: kept in the group's defaults, so the extension
    /// sends where the app does (privacy manifests: 1C8F.1).
    static var server: URL {
        get {
            UserDefaults(suiteName: appGroup)?.string(forKey: serverKey).flatMap(URL.init(string:))
                ?? challengeServer
        }
        set { UserDefaults(suiteName: appGroup)?.set(newValue.absoluteString, forKey: serverKey) }
    }
}
