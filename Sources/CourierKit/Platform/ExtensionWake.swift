import Foundation

#if canImport(Darwin)
import CoreFoundation
#endif

/// The wake an `ExtensionOutbox` send gives the app: on Apple platforms, a Darwin notification
/// (`CFNotificationCenterGetDarwinNotifyCenter`, the one notification center that crosses
/// process boundaries, system-wide and carrying a name only: so the name holds a hash of the
/// folder's path, which is the App Group container's, unique per group and device), which a
/// running app's courier observes and answers with a collection. The center delivers on the
/// main thread's run loop (running in an app); the callback only queues the collection. A
/// suspended or dead app hears nothing; it collects when it next opens or comes to the
/// foreground. Elsewhere (Linux) there is no such center: a no-op.
enum ExtensionWake {
    /// The notification's name for an outbox folder: one per folder, so two couriers of one app
    /// group with different folders do not wake each other.
    static func name(for directory: URL) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a of the folder's path
        for byte in directory.standardizedFileURL.path.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return "courier.extension-outbox." + String(hash, radix: 16)
    }

    /// Posts the wake for `directory` (from the extension's `send`).
    static func post(for directory: URL) {
        #if canImport(Darwin)
        // A Darwin center ignores the object, the user info and `deliverImmediately`; Apple asks
        // for nil and false there, for compatibility (CFNotificationCenterGetDarwinNotifyCenter's page).
        let center = CFNotificationCenterGetDarwinNotifyCenter()
        CFNotificationCenterPostNotification(
            center, CFNotificationName(name(for: directory) as CFString), nil, nil, false)
        #endif
    }

    /// Calls `wake` whenever an extension posts for `directory`, until the returned observer
    /// is passed to `stop`. On Apple platforms the center calls back on the main thread.
    static func observe(_ directory: URL, wake: @escaping @Sendable () -> Void) -> Observer {
        let observer = Observer(wake)
        #if canImport(Darwin)
        CFNotificationCenterAddObserver(
            CFNotificationCenterGetDarwinNotifyCenter(), Unmanaged.passUnretained(observer).toOpaque(),
            { _, context, _, _, _ in
                guard let context else { return }
                Unmanaged<Observer>.fromOpaque(context).takeUnretainedValue().wake()
            },
            name(for: directory) as CFString, nil, .deliverImmediately)
        #endif
        return observer
    }

    /// Stops the observation (before the observer goes: the center keeps a raw pointer to it).
    static func stop(_ observer: Observer) {
        #if canImport(Darwin)
        CFNotificationCenterRemoveEveryObserver(
            CFNotificationCenterGetDarwinNotifyCenter(), Unmanaged.passUnretained(observer).toOpaque())
        #endif
    }

    /// What the center calls back: a box for the closure (a C callback captures nothing).
    final class Observer: Sendable {
        let wake: @Sendable () -> Void
        init(_ wake: @escaping @Sendable () -> Void) { self.wake = wake }
    }
}
