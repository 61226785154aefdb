import CourierLog
import Foundation

extension Courier {
    /// The data protection class of the log's files on iOS-family platforms
    /// (`Configuration.fileProtection`), as Foundation's `FileProtectionType` names them. Courier
    /// sets it on its directory before it creates any file there (files inherit their
    /// directory's class) and on every file already there: it **overrides the app's Data
    /// Protection entitlement** for the outbox, in either direction. Elsewhere it does nothing
    /// (POSIX permissions apply: the log's files are the owner's alone).
    public enum FileProtection: Sendable, Hashable {
        /// Readable only while the device is unlocked: the most private, and no background
        /// delivery while it is locked (no `send` either: `.protectedDataUnavailable`).
        case complete
        /// A file open before the device locked stays readable; new files can be created while
        /// locked, but not opened again once closed.
        case completeUnlessOpen
        /// Readable from the first unlock after a restart on (class C, the system's default for
        /// app files): what background delivery needs. The default.
        case completeUntilFirstUserAuthentication
        /// Always readable, even before the first unlock.
        case none
    }

    /// Whether files can be locked by data protection here (iOS-family platforms).
    #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
    static let platformHasDataProtection = true
    #else
    static let platformHasDataProtection = false
    #endif

    /// Gives `directory` and every item in it `protection`, and nothing above it, then keeps it
    /// out of backups. The directory (and any missing parent) is made without a class: given
    /// one, Foundation's `createDirectory(…attributes:)` sets it on every directory it makes on
    /// the way too (`Application Support` on a fresh install, and every file the app makes there
    /// later). Then the class is set on it before the log makes a file there (files take their
    /// directory's class), and on what an earlier version made. Platform-neutral and tested;
    /// `set` is the platform's (`setPlatformProtection`). A failure leaves the system's default.
    static func protectDirectory(
        _ directory: String, _ protection: FileProtection, fileSystem: any LogFileSystem,
        set: (String, FileProtection) -> Void
    ) {
        try? fileSystem.createDirectory(atPath: directory)
        set(directory, protection)
        for name in (try? fileSystem.contentsOfDirectory(atPath: directory)) ?? [] {
            set(directory + "/" + name, protection)
        }
        // Out of iCloud and device backups on iOS-family platforms: an outbox restored onto
        // another device would send old messages again.
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        var url = URL(fileURLWithPath: directory)
        var values = URLResourceValues()
        values.isExcludedFromBackup = true
        try? url.setResourceValues(values)
        #endif
    }

    /// The protection class of the item at `path` on iOS-family platforms (Foundation's
    /// `protectionKey`); elsewhere nothing. Type-checked by `make ios-check`, never run here.
    static func setPlatformProtection(_ path: String, _ protection: FileProtection) {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        try? FileManager.default.setAttributes([.protectionKey: protection.type], ofItemAtPath: path)
        #endif
    }
}

extension Courier.Configuration {
    /// `fileProtection` on `directory` (made if missing) and its items, and the directory kept
    /// out of backups: before the log opens, once it is open, and for the hand-off's bodies.
    func protect(_ directory: String) {
        Courier.protectDirectory(directory, fileProtection, fileSystem: fileSystem, set: setFileProtection)
    }
}

#if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
extension Courier.FileProtection {
    /// Foundation's name for it.
    var type: FileProtectionType {
        switch self {
        case .complete: .complete
        case .completeUnlessOpen: .completeUnlessOpen
        case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
        case .none: .none
        }
    }
}
#endif
