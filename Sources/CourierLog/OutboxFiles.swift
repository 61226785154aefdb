/// Files that other processes (app extensions) append records to, in a folder they share with
/// the process that collects them (the app). Each file is one segment in the log's format
/// (`Format`: checksummed LZ4-framed records after a segment header), so `LogReader` reads it,
/// with the log's rules for a torn tail and damage. Every call goes through a `LogFileSystem`,
/// so the outbox syncs as the log does and the simulated file system can cut its power.
///
///     DIR/writers/<writer>.wal             one per writer: only that writer appends to it
///     DIR/claimed/<writer>-<hex>/0…01.wal  taken by a collection, read, then removed
///
/// Why this shape (iOS suspends and kills these processes at any moment):
/// - **No lock is held longer than one append or one claim**, never across suspension: a lock
///   held by a suspended process in a shared container gets it killed (`0xdead10cc`). The
///   `flock` of a writer's file orders its append against a claim's rename, nothing else.
/// - **Writers never block each other**: each has its own file. **A claim never waits for a
///   lock**: a file a writer holds is skipped, and claimed by a later collection.
/// - **A claim is a rename under the file's lock**: an append lands either before it (and is
///   claimed) or after it, in a new file (the writer finds its path renamed once it holds the
///   lock). No record is written to a file being read.
/// - **A collection crashed at any step loses nothing**: a claimed directory stays until its
///   messages are durable in the collector's log, and is read again (and its messages
///   recognised by id) otherwise.
public enum OutboxFiles {
    /// The folder of writers' files in `directory`.
    public static func writersPath(_ directory: String) -> String { directory + "/writers" }
    /// The folder of claimed files in `directory`.
    public static func claimedPath(_ directory: String) -> String { directory + "/claimed" }
    /// The name of the one segment in a claimed directory.
    static let claimedSegmentName = "0000000000000001" + Format.segmentSuffix

    /// What a claim found.
    public struct Claims: Sendable {
        /// Every claimed directory (claimed now, or left by a crashed collection), oldest name
        /// first: each a log directory for `LogReader`; remove it with `finish(_:)`.
        public var directories: [String]
        /// Writers' files skipped because a writer held their lock: claim again later.
        public var busy: Int
    }

    /// Claims every writer's file that holds a record and no writer holds now, and returns every
    /// claimed directory.
    public static func claim(in directory: String, fileSystem: any LogFileSystem) throws(LogError) -> Claims {
        let writers = writersPath(directory), claimed = claimedPath(directory)
        try fileSystem.createDirectory(atPath: claimed)
        var busy = 0
        // Bounded by the writers' files.
        for name in (try? fileSystem.contentsOfDirectory(atPath: writers)) ?? []
        where name.hasSuffix(Format.segmentSuffix) {
            if try !claimFile(name, in: writers, into: claimed, fileSystem) { busy += 1 }
        }
        let found = try fileSystem.contentsOfDirectory(atPath: claimed)
        return Claims(directories: found.sorted().map { claimed + "/" + $0 }, busy: busy)
    }

    /// Removes a claimed directory whose records are safe elsewhere.
    public static func finish(_ claim: String, fileSystem: any LogFileSystem) throws(LogError) {
        for name in try fileSystem.contentsOfDirectory(atPath: claim) {
            try fileSystem.removeFile(atPath: claim + "/" + name)
        }
        try fileSystem.removeDirectory(atPath: claim)
    }

    /// Under the file's lock, taken without waiting: moves writer's file `name` (in `writers`)
    /// with at least one record into a claimed directory of its own, synced in both places. A
    /// file a writer just created (a header, or nothing) stays. False if a writer holds the lock.
    private static func claimFile(
        _ name: String, in writers: String, into claimed: String, _ fileSystem: any LogFileSystem
    ) throws(LogError) -> Bool {
        let path = writers + "/" + name
        let file: any LogFile
        do throws(LogError) {
            file = try fileSystem.openFile(atPath: path, create: false)
        } catch  where error.errno == 2 {
            return true  // a writer's file that went meanwhile
        }
        guard try file.lock(waiting: false) else { return false }
        defer { file.unlock() }
        guard try file.status().sizeBytes > Format.segmentHeaderSize else { return true }
        let stem = String(name.dropLast(Format.segmentSuffix.count))
        let target = claimed + "/" + stem + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        try fileSystem.createDirectory(atPath: target)
        try fileSystem.syncDirectory(atPath: claimed)
        try fileSystem.renameFile(atPath: path, toPath: target + "/" + claimedSegmentName)
        // The new name first: a cut between the two syncs leaves the file under both names (its
        // messages are recognised by id), never under none.
        try fileSystem.syncDirectory(atPath: target)
        try fileSystem.syncDirectory(atPath: writers)
        return true
    }
}
