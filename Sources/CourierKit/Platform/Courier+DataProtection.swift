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
    static var platformHasDataProtection: Bool {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        return true
        #else
        return false
        #endif
    }

    /// Applies `protection` to `directory` (made now if it is missing, with the class already
    /// set, so that no file of the log is ever created in another class), to every file in it,
    /// and keeps it out of iCloud and device backups (an outbox restored onto another device
    /// would send old messages again). A failure leaves the system's default. Called before
    /// the log opens, and again for the hand-off's body folder. The iOS branch is type-checked
    /// by `make ios-check`, never run here; elsewhere it does nothing.
    static func applyPlatformDataProtection(to directory: URL, _ protection: FileProtection) {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        let manager = FileManager.default
        let attributes: [FileAttributeKey: Any] = [.protectionKey: protection.type]
        try? manager.createDirectory(at: directory, withIntermediateDirectories: true, attributes: attributes)
        try? manager.setAttributes(attributes, ofItemAtPath: directory.path)
        for name in (try? manager.contentsOfDirectory(atPath: directory.path)) ?? [] {
            try? manager.setAttributes(attributes, ofItemAtPath: directory.appendingPathComponent(name).path)
        }
        var url = directory
        var values = URLResourceValues()
        values.isExcludedFromBackup = true
        try? url.setResourceValues(values)
        #endif
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
