import Dispatch

/// A segmented, checksummed, LZ4-framed write-ahead log in one directory.
///
///     let log = try WriteAheadLog(directory: path)        // locks, recovers, starts a segment
///     let report = try log.reader.read { view in … }      // every valid record, in order
///     let address = try log.append(body, kind: .enqueued) // returns once write(2) returned
///     try log.forget(below: floor)                        // deletes whole sealed segments
///     try log.close()
///
/// Single writer, many threads: appends are serialised by a lock, and are cheap enough
/// (encode + one `pwrite`) that callers on the main thread may append. Opening recovers the
/// newest segment (a torn tail is copied aside to `*.torn`, cut and reported) and always starts
/// a new segment, so nothing is ever appended after bytes of unknown provenance.
public final class WriteAheadLog: @unchecked Sendable {
    // Why it may be shared across threads: every mutable field (`state`) is only read or
    // written while holding `mutex`; `commit` guards itself; the rest is immutable.
    /// The log directory.
    public let directory: String
    /// The settings it was opened with.
    public let configuration: Configuration
    /// What opening found and repaired.
    public let recovery: RecoveryReport
    /// What the replay during opening found (when opened `replaying:`): every valid record was
    /// visited in the same pass that recovered the newest segment, so no segment is read twice.
    public let openingReplay: ReplayReport?
    package let fileSystem: any LogFileSystem
    let directoryLock: any DirectoryLock
    /// Guards `state`. Lock order: `mutex` before `commit`'s lock, never the reverse.
    let mutex = ConditionLock()
    var state: WriterState
    let commit: GroupCommit
    /// Where the next segment is made ahead (`SegmentPreparation.background`).
    let preparationQueue = DispatchQueue(label: "courier.log.prepare", qos: .utility)
    /// `forget(below:)` calls take turns (deletions in order, each synced before the next).
    let forgetting = Locked(())

    /// Opens the log in `directory` (creating it if needed), recovers it and starts a segment.
    /// With `visit`, replays it in the same pass: each valid record is visited (its body valid
    /// only during the call), and `openingReplay` holds what the reading found.
    /// Throws `.locked` if the directory is open elsewhere, in this process or another.
    public init(
        directory: String, configuration: Configuration = Configuration(),
        fileSystem: any LogFileSystem = PosixFileSystem(), replaying visit: ((RecordView) -> Void)? = nil
    ) throws(LogError) {
        if let problem = configuration.problem { throw LogError(.invalidArgument, problem) }
        self.directory = directory
        self.configuration = configuration
        self.fileSystem = fileSystem
        try fileSystem.createDirectory(atPath: directory)
        directoryLock = try fileSystem.lockDirectory(atPath: directory)
        do {
            var opener = Opener(directory: directory, configuration: configuration, fileSystem: fileSystem)
            let (state, report, replay) = try opener.open(replaying: visit)
            self.state = state
            self.recovery = report
            self.openingReplay = replay
            commit = GroupCommit(durableThrough: state.nextSequence - 1)
        } catch {
            directoryLock.unlock()
            throw error
        }
    }

    deinit { directoryLock.unlock() }

    /// A reader of this log's directory: the one way to read every record in order, the same
    /// reader `wal-dump` uses. Read after opening; records appended meanwhile may or may not
    /// be seen.
    public var reader: LogReader { LogReader(directory: directory, fileSystem: fileSystem) }

    /// The sequence number the next appended record will get.
    public var nextSequence: UInt64 { mutex.withLock { state.nextSequence } }

    /// The highest sequence number known to be on stable storage.
    public var durableSequence: UInt64 { commit.durable }

    /// Segment file names, oldest first; the last one is being appended to.
    public var segmentNames: [String] {
        mutex.withLock { state.sealed.map(\.name) + [state.active.name] }
    }

    /// How many segments there are, and the first sequence number of the one appended to (the
    /// last of `segmentNames`): what a compactor weighs, without building every name.
    public var segmentSummary: (count: Int, activeFirstSequence: UInt64) {
        mutex.withLock { (state.sealed.count + 1, state.active.firstSequence) }
    }

    /// Bytes on disk over all segments (headers included).
    public var sizeBytes: Int {
        mutex.withLock { state.sealed.reduce(state.active.sizeBytes) { $0 + $1.sizeBytes } }
    }

    /// Syncs, then releases the directory. Appends after `close` throw `.closed`. Closing twice
    /// is harmless. Throws if the final sync fails (the directory is released all the same).
    public func close() throws(LogError) {
        defer { directoryLock.unlock() }
        let wasOpen = mutex.withLock { () -> Bool in
            guard case .open = state.phase else { return false }
            state.phase = .closed
            // A preparation under way (on any thread) ends first: it finds the log closed and
            // leaves no spare, before the directory is let go.
            while state.preparingSpare { mutex.wait() }
            return true
        }
        guard wasOpen else { return }
        waitForRollWork()
        let spare = mutex.withLock { () -> (any LogFile)? in
            defer { state.spare = nil }
            return state.spare?.file
        }
        if spare != nil { try? fileSystem.removeFile(atPath: joinPath(directory, Format.spareSegmentName)) }
        // Through the group commit, so the durable point says what the last sync covered.
        try sync(through: .max)
    }
}

/// What opening a log found and did about it.
public struct RecoveryReport: Sendable, Equatable {
    /// The invalid tail cut from the newest segment, if there was one.
    public var tornTail: DamagedSpan?
    /// Where the cut bytes were saved, for post-mortems.
    public var tornCopyPath: String?
    /// A newest segment that held no valid record and was removed.
    public var removedSegment: String?
    /// The segment this session appends to.
    public var activeSegment: String = ""
    /// The sequence number the next record will get.
    public var nextSequence: UInt64 = 1

    // What reading the log after opening found (filled in by `absorb(_:)`; the layer that
    // decodes bodies adds `undecodableRecords`).

    /// Spans that are not valid records, anywhere but a torn tail: each may have cost records.
    public var damaged: [DamagedSpan] = []
    /// Sequence numbers missing between the records read (lost to damage).
    public var missingSequences: UInt64 = 0
    /// Records whose checksums verify but whose bodies the reader could not interpret (damage
    /// the checksum cannot see, or a record written by a newer version). They were skipped.
    public var undecodableRecords: [RecordAddress] = []

    /// A clean report.
    public init() {}

    /// True when nothing was found but a torn tail (which is end of log, not damage).
    public var isClean: Bool { damaged.isEmpty && missingSequences == 0 && undecodableRecords.isEmpty }

    /// Adds what a read of the log found.
    public mutating func absorb(_ replay: ReplayReport) {
        damaged += replay.damaged
        missingSequences += replay.missingSequences
    }

    /// One line for people: what was lost and where, or that nothing was.
    public var summary: String {
        var parts: [String] = []
        if !damaged.isEmpty {
            parts.append(
                "\(damaged.count) damaged span(s): " + damaged.prefix(3).map(\.description).joined(separator: "; "))
        }
        if missingSequences > 0 { parts.append("\(missingSequences) sequence number(s) missing") }
        if !undecodableRecords.isEmpty {
            parts.append(
                "\(undecodableRecords.count) record(s) not understood: "
                    + undecodableRecords.prefix(3).map(\.description).joined(separator: ", "))
        }
        if let tornTail { parts.append("torn tail cut (\(tornTail))") }
        return parts.isEmpty ? "clean" : parts.joined(separator: "; ")
    }
}

/// A segment: its name, first sequence number and size.
struct SegmentInfo {
    var name: String
    var firstSequence: UInt64
    var sizeBytes: Int
    /// Its salt, once known (from the roll that sealed it, or its header's first read back).
    var salt: UInt32?
    /// Kept open for reads back, once one was made (a few segments at most: `read(_:)`).
    var reader: (any LogReadableFile)?
}

/// The segment being appended to.
struct ActiveSegment {
    var name: String
    var firstSequence: UInt64
    var file: any LogFile
    var sizeBytes: Int
    var salt: UInt32
    /// Kept open for reads back, once one was made; the segment keeps it when sealed.
    var reader: (any LogReadableFile)?

    /// The segment as the list of segments holds it (once sealed, or to read a record back).
    var info: SegmentInfo {
        SegmentInfo(name: name, firstSequence: firstSequence, sizeBytes: sizeBytes, salt: salt, reader: reader)
    }
}

struct WriterState {
    enum Phase { case open, failed(LogError), closed }
    var phase: Phase = .open
    var active: ActiveSegment
    var sealed: [SegmentInfo]
    var nextSequence: UInt64
    let encoder = LZ4Encoder()
    /// The next segment's file (`Format.spareSegmentName`, empty) and salt, prepared ahead
    /// of the roll that renames it into place.
    var spare: (file: any LogFile, salt: UInt32)?
    /// A spare is being prepared (at most one at a time).
    var preparingSpare = false
    /// The active segment's size when preparing a spare last failed: no new try before it grew
    /// by a sixteenth of a segment (a full disk must not cost a try per append).
    var spareFailedAtBytes: Int?
    /// Sealed segments not synced since their last write, oldest first: a sync makes them
    /// durable before the active one. Each came with a roll, whose rename into place the
    /// directory's sync after them makes durable.
    var unsyncedSealed: [any LogFile] = []
    /// Appends that found the active segment full and no spare ready, so grew it instead.
    var appendsPastSegmentSize = 0

    func checkOpen() throws(LogError) {
        switch phase {
        case .open: return
        case .closed: throw LogError(.closed, "the log is closed")
        case .failed(let cause):
            throw LogError(
                .failed, "an earlier write or fsync failed (\(cause)); reopen the log", path: cause.path,
                errno: cause.errno)
        }
    }
}

/// Decides who fsyncs and when, for the `.always` and `.interval` policies.
///
/// `.always`: an appender that needs its record durable either finds it already durable,
/// waits for the fsync in flight, or becomes the leader: it fsyncs everything written so far
/// and wakes the others. N concurrent appenders thus share one fdatasync (group commit).
///
/// `.interval`: the first append after a quiet period schedules one background sync; later
/// appends within the interval ride on it. No thread polls: with no appends, nothing runs.
final class GroupCommit: @unchecked Sendable {  // every var is guarded by `lock`
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
            defer { syncScheduled = true }
            return !syncScheduled
        }
        guard schedule else { return }
        // At most 2^31 s (68 years): an interval meaning "never" (`.seconds(Int64.max)`) must not overflow.
        let seconds = Int(min(interval.components.seconds, 1 << 31))
        let nanoseconds = seconds * 1_000_000_000 + Int(interval.components.attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak log] in
            guard let log else { return }
            // Clear the flag first (appends from now on schedule a new sync), then read the
            // target: two separate critical sections, never the commit lock around `mutex`.
            log.commit.lock.withLock { log.commit.syncScheduled = false }
            // A failure is recorded in the log's state; the next append reports it.
            try? log.sync(through: .max)
        }
    }

    /// Syncs what was written (sealed segments first, then the directory, then the active
    /// segment), then publishes the new durable point.
    private func leadSync(log: WriteAheadLog) throws(LogError) {
        let result: Result<UInt64, LogError>
        do {
            result = .success(try log.syncWritten())
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

extension WriteAheadLog {
    /// Makes everything written so far durable, in the order that keeps the log without holes:
    /// the sealed segments not synced since their last write, oldest first; the directory, if a
    /// roll renamed a segment into place; then the active segment. Returns the last sequence
    /// number that is now durable. Never under the log's lock, nor under a lock that forbids
    /// blocking I/O.
    func syncWritten() throws(LogError) -> UInt64 {
        typealias Work = (sealed: [any LogFile], active: any LogFile, through: UInt64)
        let work = try mutex.withLock { () throws(LogError) -> Work in
            if case .failed = state.phase { try state.checkOpen() }
            return (state.unsyncedSealed, state.active.file, state.nextSequence - 1)
        }
        assert(!BlockingIO.isForbidden, "an fsync under a lock that forbids blocking I/O (a courier's core)")
        for file in work.sealed { try file.sync() }
        if !work.sealed.isEmpty { try fileSystem.syncDirectory(atPath: directory) }
        try work.active.sync()
        mutex.withLock {
            // Rolls since `work` was taken added to the ends: only what it covered is done.
            state.unsyncedSealed.removeFirst(min(work.sealed.count, state.unsyncedSealed.count))
        }
        return work.through
    }

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
        try commit.waitUntilDurable(min(sequence, nextSequence - 1), log: self)
    }
}
