import CourierLog
import Foundation

/// Errors thrown by `Courier`. Switch on `code`; `message` is for people.
///
///     do { try courier.send(payload, to: url) }
///     catch let error as CourierError where error.code == .storageFull { … }
public struct CourierError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// What went wrong, for `catch` clauses and `switch`.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// The value cannot be sent as JSON (a `Date`, a custom object, NaN or infinity, …).
        case invalidJSON
        /// The URL is not an absolute http or https URL.
        case invalidURL
        /// Extra headers that cannot be sent or stored (more than 200, an empty name, a name
        /// or value with a line break, or longer than 8 KiB).
        case invalidHeaders
        /// An ordering key or a replacement key (`send(…replacing:)`) that is empty or longer than
        /// 1 KiB of UTF-8.
        case invalidOrderingKey
        /// Tags that cannot be stored: more than 32, or one empty or longer than 256 bytes of UTF-8.
        case invalidTags
        /// A `Configuration` value is out of range (documented on the setting).
        case invalidConfiguration
        /// The body is larger than `Configuration.maximumMessageBytes`.
        case messageTooLarge
        /// The disk is full, or `Configuration.maximumStorageBytes` is reached. Nothing was
        /// written and no older message was dropped; retry once messages have drained.
        case storageFull
        /// The directory is open in another `Courier` (this process or another).
        case directoryLocked
        /// The directory is one the system empties when it needs space (Caches, tmp): pending
        /// messages would vanish. The message names the directory and where to put the log.
        case unsuitableDirectory
        /// The log's files cannot be read yet: the device has not been unlocked since it
        /// restarted, and iOS keeps files of the app's data protection class
        /// (`completeUntilFirstUserAuthentication`) locked until then. It happens when iOS
        /// launches the app in the background (to report background uploads, or run a
        /// background task) before the first unlock. Nothing is lost: open again once
        /// protected data is available. `Courier.open(directory:configuration:lifecycle: .automatic)` waits for it.
        case protectedDataUnavailable
        /// The log failed (an I/O error); close and reopen the `Courier`. Thrown by `send` with
        /// `durability = .always` when the fsync failed: the message was written but may not
        /// be on disk, so its fate is unknown. This `Courier` will not deliver it (no event, no
        /// callback); after reopening, it is delivered if the write survived
        /// (`pendingMessages` lists `messageID`), else send it again.
        case storageFailed
        /// No HTTP transport: on Linux, the package trait `AsyncHTTPClientTransport` is off and
        /// `Configuration.transport` is nil. The message says how to turn the trait on.
        case transportUnavailable
        /// `close()` was called.
        case closed
        /// The retry policy gave up on the message (`delivered(_:)` throws this).
        case abandoned
        /// The app withdrew the message with `Courier.cancel(_:)` (`delivered(_:)` throws this).
        case cancelled
        /// `delivered(_:)` was asked about an id this `Courier` has never seen, or resolved too
        /// long ago to remember (see `Configuration.resolvedMemoryCount`).
        case unknownMessage
    }

    /// What went wrong.
    public var code: Code
    /// Why, in words for people (names the setting or value at fault).
    public var message: String
    /// The message the error is about, when there is one: set by `send` when the outcome of
    /// the write is unknown (see the DocC article "Durability": a failed fsync with `.always`).
    public var messageID: MessageID?

    /// An error with `code`, `message` and, when one message is concerned, its id.
    public init(_ code: Code, _ message: String, messageID: MessageID? = nil) {
        self.code = code
        self.message = message
        self.messageID = messageID
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// `message`: what `localizedDescription` shows (in an alert, say). In English, not localized.
    public var errorDescription: String? { message }

    /// What opening the log threw. Where data protection applies (iOS-family platforms), a
    /// refusal to touch a file (EPERM, or EACCES) means protected data is unavailable: files
    /// of the app's class open only after the first unlock since the device restarted.
    init(opening error: LogError, dataProtection: Bool) {
        if dataProtection, let number = error.errno, number == EPERM || number == EACCES {
            self.init(
                .protectedDataUnavailable,
                "the device has not been unlocked since it restarted, so the log "
                    + "cannot be read yet; open again once protected data is available (\(error))")
        } else {
            self.init(error)
        }
    }

    /// What `send` throws under `durability: .always` when its record's fsync failed: whether
    /// the message is on disk is unknown, and this courier drops it (`CourierCore.syncFailed`).
    init(notDurable id: MessageID, _ error: LogError) {
        if error.code == .closed {
            self.init(
                .closed,
                "the courier closed before the message was confirmed durable; close() syncs the log, so it is "
                    + "delivered after reopening unless that sync failed",
                messageID: id)
        } else {
            self.init(
                .storageFailed,
                "the message was written but the fsync failed, so it may or may not survive a power loss "
                    + "(\(error)); close and reopen the Courier: if pendingMessages lists \(id) it will be "
                    + "delivered, otherwise send it again",
                messageID: id)
        }
    }

    /// `error`, met while doing `what` ("logging …", "compaction"), if given, said so in the message.
    init(_ error: LogError, while what: String? = nil) {
        switch error.code {
        case .diskFull: self.init(.storageFull, "disk full: \(error)")
        case .locked: self.init(.directoryLocked, "\(error)")
        case .closed: self.init(.closed, "the courier is closed")
        case .recordTooLarge: self.init(.messageTooLarge, "\(error)")
        default: self.init(.storageFailed, "\(error)")
        }
        if let what { message = "\(what): \(message)" }
    }
}

/// For Objective-C, crash reporters and analytics, which see errors as `NSError`: the domain
/// `CourierKit.CourierError`, a code per `Code` that never changes, and the message as the
/// localized description (the id of the message concerned, if any, under `CourierMessageID`).
extension CourierError: CustomNSError {
    public static var errorDomain: String { "CourierKit.CourierError" }

    public var errorCode: Int { code.number }

    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: message]
        if let messageID { info["CourierMessageID"] = messageID.description }
        return info
    }
}

extension CourierError.Code {
    /// `errorCode`'s number: fixed once given (a code that goes keeps its number unused).
    var number: Int {
        switch self {
        case .invalidJSON: 1
        case .invalidURL: 2
        case .invalidHeaders: 3
        case .invalidOrderingKey: 4
        case .invalidConfiguration: 5
        case .messageTooLarge: 6
        case .storageFull: 7
        case .directoryLocked: 8
        case .protectedDataUnavailable: 9
        case .storageFailed: 10
        case .transportUnavailable: 11
        case .closed: 12
        case .abandoned: 13
        case .cancelled: 14
        // 15 was the wait's cancellation, which is `CancellationError` now.
        case .unknownMessage: 16
        case .invalidTags: 17
        case .unsuitableDirectory: 18
        }
    }
}
