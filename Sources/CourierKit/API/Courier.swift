import Foundation

/// Guaranteed delivery of messages to HTTP servers.
///
///     let courier = try await Courier.open(directory: url)      // replays the log off the caller's thread
///     let id = try courier.send(["text": "hi"], to: serverURL)   // on disk when this returns
///     try await courier.delivered(id)                            // the server answered 2xx
///
/// `send` writes the message to a write-ahead log and returns at once; a background engine
/// POSTs it as JSON, with `Idempotency-Key: <id>`, retrying with exponential backoff until a
/// 2xx. Killing the app at any instant after `send` returned loses nothing: the next `Courier`
/// opened on the same directory replays the log and carries on, attempt counts included.
/// Delivery is at-least-once; the key lets the server make it effectively-once.
///
/// All methods are thread-safe; `send` never blocks on the network and may be called from the
/// main thread. Callbacks and events are delivered on background threads.
public final class Courier {
    /// The directory holding this courier's log.
    public let directory: URL
    /// The settings it was opened with.
    public let configuration: Configuration
    /// The one owner of everything mutable (`CoreState`: projection, waiters, engine, hand-off
    /// mode, lifecycle), behind one lock. Courier is the facade around it and stores no mutable
    /// state of its own.
    let core: CourierCore
    var log: MessageLog { core.log }
    /// The configuration's, or one Courier made (when that is nil), which `close()` shuts down:
    /// a transport the app injected belongs to the app.
    let transport: any DeliveryTransport
    let clock: EngineClock
    let wallStartMilliseconds: UInt64
    /// The largest event body one record holds, whatever its compression.
    let maximumRecordBytes: Int
    /// Blocking file work of the engine (appends after attempts, compaction's reads, fsync and
    /// unlink, the final sync) runs here, never on Swift's cooperative thread pool, so a slow
    /// disk cannot starve the app's other async work. Serial: it also orders that work.
    let ioQueue: DispatchQueue
    /// Attempts read their messages back from the log here (concurrently, and never behind a
    /// compaction's fsync on `ioQueue`); under `durability: .always`, outcomes are recorded and
    /// wait for their fsync here (concurrently, so that they share fsyncs).
    let readQueue = DispatchQueue(label: "courier.read", qos: .utility, attributes: .concurrent)
    /// What opening found: the log's recovery plus what replay found.
    public let recovery: Recovery
    /// Collecting what app extensions wrote (`Configuration.extensionOutboxDirectory`), if set.
    let extensionCollection: ExtensionCollection?

    /// Opens (or creates) the log in `directory`, replays it, and starts delivering.
    /// Throws `.invalidConfiguration` naming the first conflict in `configuration` (see
    /// `Configuration.problems`), `.unsuitableDirectory` if `directory` is in tmp or Caches,
    /// which the system empties (`Configuration.allowsPurgeableDirectory`), or in an iOS App
    /// Group container (a courier there would hold a lock in a shared container while suspended:
    /// `0xdead10cc`; extensions use an `ExtensionOutbox`), `.directoryLocked`
    /// if another `Courier` has the directory open, `.protectedDataUnavailable` on iOS before
    /// the first unlock since the device restarted, `.storageFailed` if the log cannot be read.
    ///
    /// Replay reads the whole log: with many pending messages, open with `Courier.open`, off
    /// the main thread.
    public init(directory: URL, configuration: Configuration = Configuration()) throws(CourierError) {
        if let problem = configuration.problems.first { throw CourierError(.invalidConfiguration, problem) }
        // Before the log is opened and locked: without a transport there is nothing to open it for.
        if configuration.transport == nil, let problem = Configuration.defaultTransportProblem { throw problem }
        let place = DirectoryPolicy.judge(directory)
        if let root = place.purgeable, !configuration.allowsPurgeableDirectory {
            throw DirectoryPolicy.error(directory, root: root)
        }
        if place.inAppGroupContainer { throw DirectoryPolicy.appGroupError(directory) }
        self.directory = directory
        self.configuration = configuration
        self.clock = EngineClock(configuration.clock)
        let wallStart = UInt64(max(0, configuration.now().timeIntervalSince1970 * 1000))
        self.wallStartMilliseconds = wallStart
        var logConfiguration = configuration.logConfiguration()
        // Records are stamped by their appenders (`CoreState.wallMilliseconds`); what is left to
        // stamp, the segments created at open, gets the time of the open.
        logConfiguration.now = { wallStart }
        self.maximumRecordBytes = logConfiguration.maximumRecordBytes
        self.extensionCollection = configuration.extensionOutboxDirectory.map(ExtensionCollection.init)
        let replayer = Replayer(configuration: configuration)
        let log = try Signposts.interval("open") { () throws(CourierError) -> MessageLog in
            try MessageLog(
                directory: directory, configuration: configuration,
                logConfiguration: logConfiguration, replayer: replayer)
        }
        let ioQueue = DispatchQueue(label: "courier.io", qos: .utility)
        self.ioQueue = ioQueue
        // A hand-off that ends with its message: its task is cancelled (the session may still
        // be uploading it) and its body file removed, on the I/O queue, never the caller's thread.
        let session = configuration.backgroundUploads?.session
        let (core, report) = replayer.makeCore(log, configuration: configuration, nowMilliseconds: wallStart) {
            id, handOff in
            session?.cancel(handOff.task(of: id))
            ioQueue.async { log.removeBody(of: id, ticket: handOff.ticket) }
        }
        self.core = core
        recovery = Recovery(report)
        if !report.isClean {
            configuration.logger.warning(
                "opening the log found damage; messages may be missing (see Courier.recovery)",
                metadata: ["courier.recovery": "\(report.summary)", "courier.directory": "\(directory.path)"])
        }
        // Made last: a transport Courier creates must be shut down, and an init that threw
        // earlier never has to.
        self.transport = configuration.transport ?? configuration.makeDefaultTransport()
        core.handle(.install(launcher))
        // Planned here, run on the I/O queue: from now on `settle()` waits for it.
        if configuration.isCompactionEnabled, let plan = core.planCompaction(force: false) {
            launcher.startCompaction(plan)
        }
        if let uploads = configuration.backgroundUploads { startBackgroundUploads(uploads) }
        BackgroundDeliveryRegistry.shared.offer(self)
        pump()
        startExtensionCollection()
    }

    deinit {
        let tasks = core.handle(.released).reply
        tasks.timer?.cancel()
        for task in tasks.attempts { task.cancel() }
        for task in tasks.passes { task.cancel() }
        stopExtensionCollection()
    }

    /// Messages sent and not yet delivered or abandoned (in flight included).
    public var pendingCount: Int { core.status.pendingCount }

    /// Stops delivery (attempts in flight are cancelled and will run again after the next
    /// open), syncs the log and releases the directory. Waiters on `delivered(_:)` throw
    /// `.closed`; event streams finish. Shuts down the transport only if Courier made it.
    /// Calling it twice is harmless. (A courier released without `close()` lets its directory
    /// go when its last reference does, after the work it had queued: a moment later.)
    public func close() async {
        stopExtensionCollection()
        if let collection = extensionCollection { await onIOQueue(collection.queue) {} }  // one under way ends
        let closing = core.handle(.close).reply
        closing.timer?.cancel()
        if let integration = closing.lifecycle { await integration.stop() }
        for task in closing.attempts { task.cancel() }
        for task in closing.passes { task.cancel() }
        for task in closing.attempts { await task.value }
        for task in closing.passes { _ = await task.value }
        if configuration.transport == nil { await transport.shutdown() }  // Courier made it
        await onIOQueue { [log] in try? log.close() }
        core.handle(.closeEnded, at: currentInstant()).run()
    }

    /// Runs blocking file work on `queue` (the I/O queue unless told) and waits for it without
    /// holding a thread of the cooperative pool.
    func onIOQueue<T: Sendable>(_ queue: DispatchQueue? = nil, _ work: @escaping @Sendable () -> T) async -> T {
        await Self.onQueue(queue ?? ioQueue, work)
    }

    /// Runs `work` on `queue` and waits for it without holding a thread of the cooperative pool.
    static func onQueue<T: Sendable>(_ queue: DispatchQueue, _ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            queue.async {
                continuation.resume(returning: work())
            }
        }
    }
}

/// Why `Courier` is `Sendable`: it has no mutable stored property; every stored property is
/// immutable and itself thread-safe (the core's state is behind its lock), or `Sendable`.
extension Courier: @unchecked Sendable {}

extension Courier {
    /// Opens (or creates) the log in `directory`, replays it and starts delivering, like
    /// `init`, but does the file work off the caller's thread: replay reads the whole log,
    /// which takes a while with many pending messages, and an app must never do it on its main
    /// thread. Throws what `init` throws.
    ///
    ///     let courier = try await Courier.open(directory: outbox)
    public static func open(directory: URL, configuration: Configuration = Configuration()) async throws(CourierError)
        -> Courier
    {
        let result: Result<Courier, CourierError> = await onQueue(.global(qos: .userInitiated)) {
            Result { () throws(CourierError) in try Courier(directory: directory, configuration: configuration) }
        }
        return try result.get()
    }
}
