import CourierLog

/// An in-memory file system that remembers what is durable, for crash and fault tests.
///
/// Model (the one the ALICE paper shows real file systems give, no better):
/// - a file's bytes are durable up to its last `sync()`; a crash reverts each file to that;
/// - a directory's entries (files created or removed) are durable up to its last
///   `syncDirectory`; a crash brings back removed files and makes new ones vanish;
/// - `crash(keepingUnsyncedBytes:)` may instead keep a prefix of each file's unsynced appends,
///   as a torn write does.
/// Faults are scheduled with `inject(_:on:)` or arise from `capacityBytes` (a full disk).
public final class SimulatedFileSystem: LogFileSystem {
    /// An operation a fault can be attached to.
    public enum Operation: Sendable, Hashable {
        case write, sync, syncDirectory, remove, rename, create, truncate, read
    }

    /// What an injected fault does.
    public enum Fault: Sendable, Hashable {
        /// The call fails with this errno (ENOSPC = 28, EIO = 5, …) and changes nothing.
        case error(Int32)
        /// A write stores only its first `bytes` bytes and reports that (a short write).
        case shortWrite(bytes: Int)
    }

    let lock = ConditionLock()
    var nodes: [Int: Node] = [:]
    /// Path → node, as the running process sees it.
    var entries: [String: Int] = [:]
    /// Path → node, as a crash would leave it.
    var durableEntries: [String: Int] = [:]
    var directories: Set<String> = []
    var heldLocks: Set<String> = []
    /// File locks (`LogFile.lock`): node → the open file holding it.
    var fileLocks: [Int: ObjectIdentifier] = [:]
    /// Bumped by every crash or kill: locks taken before it are already released.
    var lockGeneration = 0
    var scheduled: [(operation: Operation, skip: Int, fault: Fault)] = []
    var nextNode = 1
    var capacity: Int?
    var counts: [Operation: Int] = [:]
    var operationsLeft: Int?
    var refusesUnderLocks = true
    var refusedUnderLocks = 0
    var syncsPaused = false
    var syncsWaiting = 0

    struct Node {
        var bytes: [UInt8] = []
        var durableBytes: [UInt8] = []
    }

    public init() {}

    /// Total bytes all files may hold; a write past it stores what fits, then fails ENOSPC.
    public var capacityBytes: Int? {
        get { lock.withLock { capacity } }
        set { lock.withLock { capacity = newValue } }
    }

    /// How many times each operation ran (faulted calls included).
    public func count(of operation: Operation) -> Int { lock.withLock { counts[operation, default: 0] } }

    /// Makes the (skip+1)-th next call of `operation` fail with `fault`.
    public func inject(_ fault: Fault, on operation: Operation, skip: Int = 0) {
        lock.withLock { scheduled.append((operation, skip, fault)) }
    }

    /// Makes every file fsync wait, before it changes anything, until `resumeSyncs()`: a test
    /// can look at what a caller shows, and a `crash()` cut power, while its record is written
    /// but not yet durable. Faults injected on `.sync` apply when the waiting calls go on.
    public func pauseSyncs() { lock.withLock { syncsPaused = true } }

    /// Lets the fsyncs that `pauseSyncs()` holds, and later ones, go on.
    public func resumeSyncs() {
        lock.withLock {
            syncsPaused = false
            lock.broadcast()
        }
    }

    /// File fsyncs waiting now (`pauseSyncs()`).
    public var waitingSyncs: Int { lock.withLock { syncsWaiting } }

    /// Returns true once an fsync waits (`pauseSyncs()`); false if none did within 10 s.
    public func waitForAPausedSync() async -> Bool {
        // Bounded: 10,000 turns of a millisecond.
        for _ in 0..<10_000 where waitingSyncs == 0 { try? await Task.sleep(for: .milliseconds(1)) }
        return waitingSyncs > 0
    }

    /// After `count` more mutating calls (writes, syncs, creates, removes, truncates), every
    /// mutating call fails with EIO, as if the machine had stopped there: follow with
    /// `crash()` to see what a power loss at that point leaves. `nil` turns it off.
    public func stopAfter(operations count: Int?) {
        lock.withLock { operationsLeft = count }
    }

    /// Mutating calls made so far, all kinds together.
    public var operationCount: Int { lock.withLock { counts.values.reduce(0, +) } }

    /// Whether an fsync, a directory fsync or a file creation made while the calling thread
    /// holds a lock that forbids blocking file work (a courier's core: `BlockingIO`) fails with
    /// EIO, as a test of that promise wants (default true). `blockingCallsRefused` counts them.
    public var refusesBlockingCallsUnderLocks: Bool {
        get { lock.withLock { refusesUnderLocks } }
        set { lock.withLock { refusesUnderLocks = newValue } }
    }

    /// Blocking calls refused because a lock that forbids them was held (see above).
    public var blockingCallsRefused: Int { lock.withLock { refusedUnderLocks } }

    /// Under `lock`: whether a blocking call must fail because the calling thread holds a lock
    /// that forbids it (checked by the caller before taking `lock`: `forbidden`).
    func refuses(_ forbidden: Bool) -> Bool {
        guard forbidden && refusesUnderLocks else { return false }
        refusedUnderLocks += 1
        return true
    }

    /// Forgets the scheduled faults.
    public func clearFaults() { lock.withLock { scheduled.removeAll() } }

    /// Simulates a power loss. With `keepingUnsyncedBytes`, each file keeps that many of its
    /// unsynced bytes (clamped), modelling a write that was half way to the disk.
    public func crash(keepingUnsyncedBytes: ((_ path: String, _ unsynced: Int) -> Int)? = nil) {
        lock.withLock {
            for (path, id) in entries {
                guard var node = nodes[id] else { continue }
                var kept = node.durableBytes
                if let keep = keepingUnsyncedBytes, node.bytes.count > node.durableBytes.count,
                    node.bytes.starts(with: node.durableBytes)
                {
                    let extra = node.bytes.count - node.durableBytes.count
                    let n = min(max(0, keep(path, extra)), extra)
                    kept = Array(node.bytes.prefix(node.durableBytes.count + n))
                }
                node.bytes = kept
                node.durableBytes = kept
                nodes[id] = node
            }
            for (path, id) in durableEntries where entries[path] != id {
                // a removed file comes back as it was last synced
                if var node = nodes[id] { node.bytes = node.durableBytes; nodes[id] = node }
            }
            entries = durableEntries
            heldLocks.removeAll()
            fileLocks.removeAll()
            lockGeneration += 1
            scheduled.removeAll()
            operationsLeft = nil
            syncsPaused = false
            lock.broadcast()
        }
    }

    /// Simulates the process being killed (SIGKILL, a crash, iOS ending a suspended app) while
    /// the machine keeps running: every byte a `write` stored survives in the page cache, synced
    /// or not; the directory lock is released; scheduled faults and `stopAfter` end. Objects of
    /// the "dead" process must not be used afterwards (a real dead process does nothing more).
    public func killProcess() {
        lock.withLock {
            heldLocks.removeAll()
            fileLocks.removeAll()
            lockGeneration += 1
            scheduled.removeAll()
            operationsLeft = nil
            lock.broadcast()
        }
    }

    /// The current bytes of a file (what a reader sees now), for assertions.
    public func contents(of path: String) -> [UInt8]? {
        lock.withLock { entries[path].flatMap { nodes[$0]?.bytes } }
    }

    /// Replaces a file's bytes, durably: for tests that damage a log on purpose.
    public func setContents(_ bytes: [UInt8], of path: String) {
        lock.withLock {
            let id = entries[path] ?? newNode()
            nodes[id] = Node(bytes: bytes, durableBytes: bytes)
            entries[path] = id
            durableEntries[path] = id
        }
    }

    /// Every file path, sorted.
    public func allPaths() -> [String] { lock.withLock { entries.keys.sorted() } }

    func newNode() -> Int {
        defer { nextNode += 1 }
        return nextNode
    }

    /// Under `lock`: counts the call and returns the fault due for it, if any.
    func takeFault(_ operation: Operation) -> Fault? {
        counts[operation, default: 0] += 1
        if let left = operationsLeft {
            if left <= 0 { return .error(5) }
            operationsLeft = left - 1
        }
        guard let i = scheduled.firstIndex(where: { $0.operation == operation }) else { return nil }
        if scheduled[i].skip > 0 {
            scheduled[i].skip -= 1
            return nil
        }
        return scheduled.remove(at: i).fault
    }
}

/// Why `@unchecked Sendable`: all mutable state is only touched under `lock`.
extension SimulatedFileSystem: @unchecked Sendable {}
