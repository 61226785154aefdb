import Foundation

extension Courier {
    /// Whether files can be locked by data protection here (iOS-family platforms).
    static var platformHasDataProtection: Bool {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        return true
        #else
        return false
        #endif
    }

    /// On iOS-family platforms, makes the log readable by background delivery while the device
    /// is locked (`completeUntilFirstUserAuthentication`: after the first unlock since boot) and
    /// keeps it out of iCloud and iTunes backups (an outbox restored onto another device would
    /// send old messages again). Files created later inherit the directory's protection. A
    /// failure leaves the system default, which for app files is this same class unless the
    /// app's entitlement chose a stricter one. Note: with a `.complete` entitlement this
    /// *lowers* the log's protection, on purpose (a locked device could not deliver otherwise).
    /// Elsewhere: nothing (POSIX permissions apply).
    /// The iOS branch is type-checked by `make ios-check`, never run here.
    static func applyPlatformDataProtection(to directory: URL) {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        let manager = FileManager.default
        let attributes: [FileAttributeKey: Any] = [
            .protectionKey: FileProtectionType.completeUntilFirstUserAuthentication
        ]
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
