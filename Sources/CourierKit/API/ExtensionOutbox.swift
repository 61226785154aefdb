import CourierLog
import Foundation

/// Sends from an app extension (a share extension, a notification service or content
/// extension, a widget, an App Intent): messages go to a folder shared with the app, and the
/// app's `Courier` collects and delivers them (`Courier.Configuration.extensionOutboxDirectory`).
///
///     let shared = FileManager.default
///         .containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.app")!
///         .appendingPathComponent("ExtensionOutbox")
///     let outbox = try ExtensionOutbox(directory: shared)
///     let id = try outbox.send(["text": "hi"], to: serverURL)   // durable when this returns
///
/// An extension never delivers: it writes, and the app delivers, with its retry policy,
/// `prepareRequest` and background hand-off, exactly as its own messages. An extension lives
/// for seconds at the system's discretion; a second engine there would need its outcomes shared
/// with the app's to never send a message twice. The app collects when it opens, when it comes to
/// the foreground, when an extension wakes it (on Apple platforms, a Darwin notification), and
/// on `collectExtensionMessages()`. So a message sent while the app is not running waits until
/// the app next runs. Each message keeps the id `send` returned, so its `Idempotency-Key`.
///
/// Each `send` appends one checksummed record to this outbox's own file and syncs it as the app's
/// log does (`F_FULLFSYNC` on Apple platforms), under a lock on that file held only for the
/// append (`OutboxFiles`), and within an expiring activity on iOS, so the extension is not
/// suspended holding it (`0xdead10cc`): between sends the extension holds no lock and no open
/// file, so iOS may suspend or kill it at any moment, and a kill or a power cut at any byte loses
/// nothing `send` returned for. Outboxes never block each other.
public final class ExtensionOutbox: Sendable {
    /// The shared folder.
    public let directory: URL
    private let writer: OutboxWriter
    private let maximumMessageBytes = Courier.Configuration().maximumMessageBytes
    private let suspensionGuard: SuspensionGuard

    /// Opens this process's outbox in `directory`, a folder in the App Group container shared
    /// with the app (created if missing), whose files get `fileProtection` (the app's
    /// `Configuration.fileProtection` is the one to match; the folder and everything in it, never
    /// the folders above it). Throws `.storageFailed` if it cannot be created, and
    /// `.unsuitableDirectory` for tmp or Caches, which the system empties.
    public convenience init(
        directory: URL, fileProtection: Courier.FileProtection = .completeUntilFirstUserAuthentication
    ) throws(CourierError) {
        if let root = DirectoryPolicy.judge(directory).purgeable { throw DirectoryPolicy.error(directory, root: root) }
        try self.init(directory: directory, allowingPurgeable: true, fileProtection: fileProtection)
    }

    /// `init(directory:)` without the directory check (tests and tools, in tmp), on the file
    /// system and with the suspension guard given (tests).
    @_spi(CourierTesting) public convenience init(
        directory: URL, allowingPurgeable: Bool, fileSystem: any LogFileSystem = PosixFileSystem(),
        fileProtection: Courier.FileProtection = .completeUntilFirstUserAuthentication
    ) throws(CourierError) {
        try self.init(
            directory: directory, fileSystem: fileSystem, fileProtection: fileProtection,
            setProtection: Courier.setPlatformProtection, suspensionGuard: .platform)
    }

    init(
        directory: URL, fileSystem: any LogFileSystem, fileProtection: Courier.FileProtection,
        setProtection: (String, Courier.FileProtection) -> Void, suspensionGuard: SuspensionGuard
    ) throws(CourierError) {
        self.directory = directory
        self.suspensionGuard = suspensionGuard
        // Before the writer makes its folder and file: they take the outbox folder's class.
        Courier.protectDirectory(directory.path, fileProtection, fileSystem: fileSystem, set: setProtection)
        do {
            writer = try OutboxWriter(
                directory: directory.path, name: "w-" + UUID().uuidString.lowercased(), fileSystem: fileSystem,
                now: { UInt64(max(0, Date().timeIntervalSince1970 * 1000)) })
        } catch {
            throw CourierError(error, while: "opening the extension outbox")
        }
    }

    /// Writes a JSON message for the app to deliver, as `Courier.send` would (same rules for
    /// the values, URL, ordering key, headers and tags; the same errors). Returns with the
    /// message on stable storage: the extension may be killed the moment it returns. Throws
    /// `.storageFull` when the disk is full, and `.storageFailed`, with nothing written, when
    /// iOS is suspending the extension already. `replacing:` and `expiry:` act as `Courier.send`'s
    /// once the app collects the message (its expiry counts from this call).
    @discardableResult
    public func send(
        _ json: [String: Any], to url: URL, orderingKey: String? = nil, headers: [String: String] = [:],
        tags: Set<String> = [], replacing: String? = nil, expiry: Duration? = nil
    ) throws(CourierError) -> MessageID {
        let body = try JSONBody.serialize(json)
        let target = try Courier.validatedTarget(url)
        let state = try Courier.validatedState(
            id: MessageID(), target: target, body: body, contentType: "application/json",
            labels: Courier.Labels(
                orderingKey: orderingKey, headers: headers, tags: tags, replacing: replacing, expiry: expiry),
            nowMilliseconds: UInt64(max(0, Date().timeIntervalSince1970 * 1000)),
            maximumMessageBytes: maximumMessageBytes)
        let record = Event.enqueued(state).encoded()
        let refused = LogError(.io, "not written: the system is suspending this extension")
        do throws(LogError) {
            try suspensionGuard.run("Courier: ExtensionOutbox.send", refused: refused) {
                [writer] () throws(LogError) in try writer.append(record, kind: .enqueued)
            }
        } catch  where error.code == .diskFull {
            throw CourierError(.storageFull, "the disk is full: \(error)")
        } catch {
            throw CourierError(error, while: "writing to the extension outbox")
        }
        ExtensionWake.post(for: directory)
        return state.id
    }
}
