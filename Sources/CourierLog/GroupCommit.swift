import Dispatch

/// Decides who fsyncs and when, for the `.always` and `.interval` policies.
///
/// `.always`: an appender that needs its record durable either finds it already durable,
/// waits for the fsync in flight, or becomes the leader: it fsyncs everything written so far
/// and wakes the others. N concurrent appenders thus share one fdatasync (group commit).
///
/// `.interval`: the first append after a quiet period schedules one background sync; later
/// appends within the interval ride on it. No thread polls: with no appends, nothing runs.
final class GroupCommit {
    private let lock = ConditionLock()
    private var durableThrough: UInt64
    private var syncing = false
    private var syncScheduled = false
    private var failure: LogError?
    /// Where `.interval` syncs run, and a roll's work (`SegmentPreparation.background`): a
    /// queue of the log's own. A serial queue made with a label
    /// targets libdispatch's *overcommit* pool, which starts a thread when none is idle; a
    /// global queue's work waits instead, and with every worker busy or blocked (an app's own
    /// code can do that) an interval sync ran seconds late on Linux (`IntervalSyncTests`;
    /// figures: Courier's "Measured figures" article).
    let queue = DispatchQueue(label: "courier.log.sync", qos: .utility)

    init(durableThrough: UInt64) {
        self.durableThrough = durableThrough
    }

    var durable: UInt64 { lock.withLock { durableThrough } }

    /// Returns once record `sequence` is on stable storage, or throws the fsync's failure.
    func waitUntilDurable(_ sequence: UInt64, log: WriteAheadLog) throws(LogError) {
        // Each turn either returns, throws, leads one fsync that covers `sequence` (the leader
        // syncs everything written before it looked, and our record was written before we got
        // here), or waits for the fsync in flight: at most two fsync rounds.
        while true {
            let lead: Bool = try lock.withLock { () throws(LogError) -> Bool in
                while true {
                    if let failure { throw failure }
                    if durableThrough >= sequence { return false }
                    if !syncing { syncing = true; return true }
                    lock.wait()
                }
            }
            guard lead else { return }
            try leadSync(log: log)
        }
    }

    /// Schedules one background sync `interval` from now unless one is already pending.
    func scheduleSync(after interval: Duration, log: WriteAheadLog) {
        let schedule = lock.withLock { () -> Bool in
            if syncScheduled { return false }
            syncScheduled = true
            return true
        }
        guard schedule else { return }
        let nanoseconds =
            Int(interval.components.seconds) * 1_000_000_000 + Int(interval.components.attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak log] in
            guard let log else { return }
            // Clear the flag first (appends from now on schedule a new sync), then read the
            // target: two separate critical sections, never the commit lock around `mutex`.
            log.commit.lock.withLock { log.commit.syncScheduled = false }
            let target = log.nextSequenceForSync
            // A failure is recorded in the log's state; the next append reports it.
            try? log.commit.waitUntilDurable(target, log: log)
        }
    }

    /// Syncs what was written (sealed segments first, then the directory, then the active
    /// segment), then publishes the new durable point.
    private func leadSync(log: WriteAheadLog) throws(LogError) {
        let result: Result<UInt64, LogError>
        do {
            let work = try log.syncTarget()
            try log.sync(work)
            result = .success(work.through)
        } catch {
            log.fail(error)
            result = .failure(error)
        }
        lock.withLock {
            syncing = false
            switch result {
            case .success(let target): durableThrough = max(durableThrough, target)
            case .failure(let error): failure = error
            }
            lock.broadcast()
        }
        if case .failure(let error) = result { throw error }
    }
}

extension GroupCommit: @unchecked Sendable {}  // every var is guarded by `lock`

extension WriteAheadLog {
    /// What a sync now must make durable (see `SyncWork`).
    func syncTarget() throws(LogError) -> SyncWork {
        try mutex.withLock { () throws(LogError) -> SyncWork in
            if case .failed = state.phase { try state.checkOpen() }
            // Everything written so far.
            return SyncWork(
                sealed: state.unsyncedSealed, renames: state.unsyncedRenames, active: state.active.file,
                through: state.nextSequence - 1)
        }
    }

    /// Makes `work` durable, in the order that keeps the log without holes: the sealed
    /// segments, oldest first; the directory, if a roll renamed a segment into place; then the
    /// active segment. Never under the log's lock, nor under a lock that forbids blocking I/O.
    func sync(_ work: SyncWork) throws(LogError) {
        assert(!BlockingIO.isForbidden, "an fsync under a lock that forbids blocking I/O (a courier's core)")
        for file in work.sealed { try file.sync() }
        if work.renames > 0 { try fileSystem.syncDirectory(atPath: directory) }
        try work.active.sync()
        mutex.withLock {
            // Rolls since `work` was taken added to the ends: only what it covered is done.
            state.unsyncedSealed.removeFirst(min(work.sealed.count, state.unsyncedSealed.count))
            state.unsyncedRenames -= min(work.renames, state.unsyncedRenames)
        }
    }

    /// The last written sequence number, read for a background sync.
    var nextSequenceForSync: UInt64 { mutex.withLock { state.nextSequence - 1 } }

    /// Puts the log in the failed state: no more appends until it is reopened.
    func fail(_ error: LogError) {
        mutex.withLock {
            if case .open = state.phase { state.phase = .failed(error) }
        }
    }

    /// Forces every record appended so far to stable storage, whatever the policy.
    public func sync() throws(LogError) {
        let target = try mutex.withLock { () throws(LogError) -> UInt64 in
            try state.checkOpen()
            return state.nextSequence - 1
        }
        try commit.waitUntilDurable(target, log: self)
    }

    /// Returns once record `sequence` (and every one before it) is on stable storage: at once
    /// if it already is, else after an fsync it shares with concurrent callers (group commit).
    /// Throws the fsync's failure (the log is then failed). After `close()`, which synced
    /// everything, it returns at once.
    public func sync(through sequence: UInt64) throws(LogError) {
        try commit.waitUntilDurable(min(sequence, nextSequenceForSync), log: self)
    }
}
