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
public final class WriteAheadLog {
    /// The log directory.
    public let directory: String
    /// The settings it was opened with.
    public let configuration: Configuration
    /// What opening found and repaired.
    public let recovery: RecoveryReport
    /// What the replay during opening found (when opened `replaying:`): every valid record was
    /// visited in the same pass that recovered the newest segment, so no segment is read twice.
    public let openingReplay: ReplayReport?
    let fileSystem: any LogFileSystem
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
        try commit.waitUntilDurable(nextSequenceForSync, log: self)
    }
}

/// What one sync makes durable: the sealed segments not yet synced, the renames that put
/// segments in place, and the active segment through `through`.
struct SyncWork {
    var sealed: [any LogFile]
    var renames: Int
    var active: any LogFile
    var through: UInt64
}

/// Why `WriteAheadLog` may be shared across threads: every mutable field (`state`) is only
/// read or written while holding `mutex`; `commit` guards itself; the rest is immutable.
extension WriteAheadLog: @unchecked Sendable {}

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
    var recordCount = 0
    /// Kept open for reads back, once one was made; the segment keeps it when sealed.
    var reader: (any LogReadableFile)?
}

struct WriterState {
    enum Phase { case open, failed(LogError), closed }
    var phase: Phase = .open
    var active: ActiveSegment
    var sealed: [SegmentInfo]
    var nextSequence: UInt64
    let encoder = LZ4Encoder()
    /// Reused encode buffer: one allocation for the life of the log, not one per append.
    var scratch: [UInt8] = []
    var recordStarts: [Int] = []
    /// Where the last write went in the active segment (for the addresses of its records).
    var lastWriteOffset = 0
    /// The next segment's file (`Format.spareSegmentName`, empty) and salt, prepared ahead
    /// of the roll that renames it into place.
    var spare: (file: any LogFile, salt: UInt32)?
    /// A spare is being prepared (at most one at a time).
    var preparingSpare = false
    /// The active segment's size when preparing a spare last failed: no new try before it grew
    /// by a sixteenth of a segment (a full disk must not cost a try per append).
    var spareFailedAtBytes: Int?
    /// Sealed segments not synced since their last write, oldest first: a sync makes them
    /// durable before the active one.
    var unsyncedSealed: [any LogFile] = []
    /// Renames into place (rolls) since the directory was last synced.
    var unsyncedRenames = 0
    /// Appends that found the active segment full and no spare ready, so grew it instead.
    var appendsPastSegmentSize = 0
}
