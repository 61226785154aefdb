@_spi(CourierTesting) import CourierKit
import CourierLog
import Foundation

/// The real file system, counting the blocking calls (fsyncs, directory syncs, file
/// creations) made while the calling thread held a lock that forbids them: a courier's core.
/// `courier-bench --deliver N RATE courier SEGMENT_BYTES` reports the count (target: 0).
final class LockWatchingFileSystem: LogFileSystem {
    let base = PosixFileSystem()
    private let counts = Locked((underLock: 0, total: 0))

    /// Blocking calls made under a forbidding lock, and in all.
    var blockingCalls: (underLock: Int, total: Int) { counts.withLock { $0 } }

    fileprivate func noteBlockingCall() {
        let forbidden = BlockingIO.isForbidden
        counts.withLock {
            $0.total += 1
            if forbidden { $0.underLock += 1 }
        }
    }

    func createDirectory(atPath path: String) throws(LogError) { try base.createDirectory(atPath: path) }
    func contentsOfDirectory(atPath path: String) throws(LogError) -> [String] {
        try base.contentsOfDirectory(atPath: path)
    }
    func openFile(atPath path: String, create: Bool) throws(LogError) -> any LogFile {
        if create { noteBlockingCall() }
        return WatchedFile(base: try base.openFile(atPath: path, create: create), watch: self)
    }
    func removeFile(atPath path: String) throws(LogError) { try base.removeFile(atPath: path) }
    func renameFile(atPath path: String, toPath newPath: String) throws(LogError) {
        try base.renameFile(atPath: path, toPath: newPath)
    }
    func syncDirectory(atPath path: String) throws(LogError) {
        noteBlockingCall()
        try base.syncDirectory(atPath: path)
    }
    func lockDirectory(atPath path: String) throws(LogError) -> any DirectoryLock {
        try base.lockDirectory(atPath: path)
    }
    func openForReading(atPath path: String) throws(LogError) -> any LogReadableFile {
        try base.openForReading(atPath: path)
    }
    func status(atPath path: String) throws(LogError) -> FileStatus? { try base.status(atPath: path) }
    func removeDirectory(atPath path: String) throws(LogError) { try base.removeDirectory(atPath: path) }
}

/// Why `@unchecked Sendable`: `counts` is behind its lock; `base` is a stateless value.
extension LockWatchingFileSystem: @unchecked Sendable {}

private final class WatchedFile: LogFile {
    let base: any LogFile
    let watch: LockWatchingFileSystem

    init(base: any LogFile, watch: LockWatchingFileSystem) {
        self.base = base
        self.watch = watch
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(LogError) -> Int {
        try base.write(bytes, at: offset)
    }
    func sync() throws(LogError) {
        watch.noteBlockingCall()
        try base.sync()
    }
    func truncate(to size: Int) throws(LogError) { try base.truncate(to: size) }
    func status() throws(LogError) -> FileStatus { try base.status() }
    func lock(waiting: Bool) throws(LogError) -> Bool { try base.lock(waiting: waiting) }
    func unlock() { base.unlock() }
}

/// Why `@unchecked Sendable`: both properties are immutable and thread-safe.
extension WatchedFile: @unchecked Sendable {}

/// Prints what was seen of the core's lock in a `--deliver` run with a segment size.
func reportCoreLock(_ watch: LockWatchingFileSystem, appendsPastSegmentSize: Int) {
    let calls = watch.blockingCalls
    say(
        "blocking file calls (fsync, directory fsync, create): \(calls.total), "
            + "under the core's lock: \(calls.underLock); appends past a segment's size "
            + "(its successor not prepared yet): \(appendsPastSegmentSize)")
    #if COURIER_LOCK_PROBE
    let figures = CoreLockProbe.figures.withLock { $0 }
    func micros(_ d: Duration) -> String { String(format: "%.0f µs", seconds(d) * 1e6) }
    say(
        "core lock: \(figures.sections) critical sections, \(figures.sectionsWithRoll) with a segment roll; "
            + "hold with a roll: longest \(micros(figures.longestWithRoll)), mean "
            + "\(micros(figures.totalWithRoll / max(1, figures.sectionsWithRoll))); longest "
            + "without \(micros(figures.longestWithoutRoll)) (\(figures.slowWithoutRoll) over 1 ms)")
    #endif
}

#if COURIER_LOCK_PROBE
/// How long the core's lock is held, for `make lock-hold` only (`Courier.lockProbe`, compiled in
/// with `-Xswiftc -DCOURIER_LOCK_PROBE`: two clock reads and a log query per critical section,
/// which a shipped build must not pay).
enum CoreLockProbe {
    struct Figures: Sendable {
        /// Critical sections, and those in which the log rolled to a new segment.
        var sections = 0
        var sectionsWithRoll = 0
        /// The longest hold of the core's lock in a section with a roll, and in any other.
        var longestWithRoll: Duration = .zero
        var longestWithoutRoll: Duration = .zero
        /// The holds of sections with a roll, added up (their mean: this / `sectionsWithRoll`).
        var totalWithRoll: Duration = .zero
        /// Sections without a roll that held the lock over 1 ms.
        var slowWithoutRoll = 0
    }

    static let figures = Locked(Figures())

    /// Starts recording (before the courier opens).
    static func install() {
        Courier.lockProbe = { held, rolled in
            figures.withLock { f in
                f.sections += 1
                if rolled {
                    f.sectionsWithRoll += 1
                    f.longestWithRoll = max(f.longestWithRoll, held)
                    f.totalWithRoll += held
                } else {
                    f.longestWithoutRoll = max(f.longestWithoutRoll, held)
                    if held > .milliseconds(1) { f.slowWithoutRoll += 1 }
                }
            }
        }
    }
}
#endif
