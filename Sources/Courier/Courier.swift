import CourierLog
import Foundation

/// Guaranteed delivery of messages to HTTP servers.
///
///     let courier = try Courier(directory: url)
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
    public let directory: URL
    public let configuration: Configuration
    let log: WriteAheadLog
    let transport: any DeliveryTransport
    let clock: EngineClock
    let wallStartMilliseconds: UInt64
    let lock = NSLock()
    /// Everything mutable. Only touched while holding `lock`.
    var core: Core

    /// Opens (or creates) the log in `directory`, replays it, and starts delivering.
    /// Throws `.directoryLocked` if another `Courier` has the directory open.
    public init(directory: URL, configuration: Configuration = Configuration()) throws(CourierError) {
        guard configuration.maxConcurrentDeliveries >= 1 else {
            throw CourierError(.invalidConfiguration, "maxConcurrentDeliveries must be at least 1")
        }
        self.directory = directory
        self.configuration = configuration
        self.transport = configuration.transport ?? defaultTransport()
        self.clock = EngineClock(configuration.clock)
        let wallStart = UInt64(max(0, configuration.now().timeIntervalSince1970 * 1000))
        self.wallStartMilliseconds = wallStart
        var logConfiguration = WriteAheadLog.Configuration()
        logConfiguration.segmentSizeBytes = configuration.segmentSizeBytes
        // `.always` is applied by Courier itself, outside its lock, so concurrent senders
        // share fsyncs; the log only does `write(2)` under the lock.
        logConfiguration.syncPolicy = configuration.durability == .always ? .never : configuration.durability
        let clock = self.clock
        logConfiguration.now = { wallStart + UInt64(max(0, clock.elapsed().seconds * 1000)) }
        do {
            log = try WriteAheadLog(directory: directory.path, configuration: logConfiguration, fileSystem: configuration.fileSystem)
        } catch {
            throw CourierError(error)
        }
        core = Core(scheduler: Scheduler(fifoPerDestination: configuration.deliveryOrder == .fifoPerDestination),
                    resolved: ResolvedMemory(limit: configuration.resolvedMemoryCount))
        do {
            try replay()
        } catch {
            try? log.close()
            throw CourierError(.storageFailed, "replay failed: \(error)")
        }
        compactIfWorthIt()
        pump()
    }

    deinit {
        lock.withLock {
            core.timer?.task.cancel()
            for task in core.inFlight.values { task.cancel() }
        }
    }

    /// Messages sent and not yet delivered or abandoned (in flight included).
    public var pendingCount: Int { lock.withLock { core.scheduler.count } }

    /// What opening the log found: a torn tail cut away, and so on.
    public var recovery: RecoveryReport { log.recovery }

    /// Stops delivery (attempts in flight are cancelled and will run again after the next
    /// open), syncs the log and releases the directory. Waiters on `delivered(_:)` throw
    /// `.closed`; event streams finish. Calling it twice is harmless.
    public func close() async {
        let (tasks, timer) = lock.withLock { () -> ([Task<Void, Never>], Task<Void, Never>?) in
            core.closed = true
            return (Array(core.inFlight.values), core.timer?.task)
        }
        timer?.cancel()
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        await transport.shutdown()
        try? log.close()
        let effects = lock.withLock { () -> Effects in
            var effects = Effects()
            for (_, waiters) in core.waiters { effects.failures += waiters.map { ($0, CourierError(.closed, "the courier was closed")) } }
            core.waiters.removeAll()
            effects.idle = core.idleWaiters + core.settleWaiters
            core.idleWaiters.removeAll()
            core.settleWaiters.removeAll()
            effects.finishStreams = Array(core.subscribers.values)
            core.subscribers.removeAll()
            return effects
        }
        effects.run()
    }

    /// Rebuilds the scheduler from the log.
    private func replay() throws {
        var scheduler = core.scheduler
        var resolved = core.resolved
        var unknown = 0
        _ = try log.replay { record in
            guard let event = Event.decode(kind: record.kind, body: record.body) else {
                unknown += 1
                return
            }
            if scheduler.apply(event, sequence: record.sequence) == .ended {
                if case .abandoned(let id, _, let reason) = event { resolved.record(id, .abandoned(reason)) }
                if case .delivered(let id, _, _) = event { resolved.record(id, .delivered) }
            }
        }
        // A due time far in the future can only come from a wall clock that went backwards
        // since it was written: bring it within one maximum delay of now.
        let now = wallNowMilliseconds()
        let limit = now + UInt64(max(configuration.retry.maximumDelay, configuration.retry.retryAfterLimit).seconds * 1000)
        scheduler.clampDue(toAtMost: limit)
        core.scheduler = scheduler
        core.resolved = resolved
        core.unknownRecords = unknown
    }

    /// Wall time in ms since 1970: the wall time at open plus the injected clock's elapsed time.
    func wallNowMilliseconds() -> UInt64 {
        wallStartMilliseconds + UInt64(max(0, clock.elapsed().seconds * 1000))
    }
}

/// Why `Courier` is `Sendable`: its mutable state (`core`) is only read or written while
/// holding `lock`; every other stored property is immutable and itself thread-safe.
extension Courier: @unchecked Sendable {}
