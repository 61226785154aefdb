import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files that other processes (app extensions) append records to, in a folder they share with
/// the process that collects them (the app). Each file is one segment in the log's format
/// (`Format`: checksummed LZ4-framed records after a segment header), so `LogReader` reads it,
/// with the log's rules for a torn tail and damage.
///
///     DIR/writers/<writer>.wal             one per writer: only that writer appends to it
///     DIR/claimed/<writer>-<hex>/0…01.wal  taken by a collection, read, then removed
///
/// Why this shape (iOS suspends and kills these processes at any moment):
/// - **No lock is held longer than one append or one claim**, never across suspension: a lock
///   held by a suspended process in a shared container gets it killed (`0xdead10cc`). The
///   `flock` of a writer's file orders its append against a claim's rename, nothing else.
/// - **Writers never block each other**: each has its own file.
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

    /// Claims every writer's file that holds a record, and returns every claimed directory
    /// (those claimed now, and any a crashed collection left), oldest name first. Each is a
    /// log directory for `LogReader`; remove it with `finish(_:)` once its records are safe.
    public static func claim(in directory: String) throws(LogError) -> [String] {
        let writers = writersPath(directory), claimed = claimedPath(directory)
        try makeDirectory(claimed)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: writers)) ?? []
        // Bounded by the writers' files.
        for name in names where name.hasSuffix(Format.segmentSuffix) {
            try claimFile(writers + "/" + name, into: claimed, stem: String(name.dropLast(Format.segmentSuffix.count)))
        }
        let found = (try? FileManager.default.contentsOfDirectory(atPath: claimed)) ?? []
        return found.sorted().map { claimed + "/" + $0 }
    }

    /// Removes a claimed directory whose records are safe elsewhere.
    public static func finish(_ claim: String) throws(LogError) {
        do {
            try FileManager.default.removeItem(atPath: claim)
        } catch {
            throw LogError(.io, "removing the collected outbox file \(claim): \(error)")
        }
    }

    /// Under the file's lock: moves a writer's file with at least one record into a claimed
    /// directory of its own. A file a writer just created (a header, or nothing) stays.
    private static func claimFile(_ path: String, into claimed: String, stem: String) throws(LogError) {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return }  // a writer's file that went meanwhile
            throw LogError(.io, "opening outbox file \(path)", errno: errno)
        }
        defer { close(fd) }
        try lockExclusively(fd, path)
        defer { flock(fd, LOCK_UN) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw LogError(.io, "stat of outbox file \(path)", errno: errno) }
        guard Int(info.st_size) > Format.segmentHeaderSize else { return }
        let target = claimed + "/" + stem + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        try makeDirectory(target)
        guard rename(path, target + "/" + claimedSegmentName) == 0 else {
            throw LogError(.io, "claiming outbox file \(path)", errno: errno)
        }
        syncDirectory(claimed)
        syncDirectory((path as NSString).deletingLastPathComponent)
    }

    static func makeDirectory(_ path: String) throws(LogError) {
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw LogError(.io, "creating \(path): \(error)")
        }
    }

    /// `flock(LOCK_EX)`, retried when a signal interrupts it.
    static func lockExclusively(_ fd: Int32, _ path: String) throws(LogError) {
        // Bounded: an interrupted wait is retried at most 100 times.
        for _ in 0..<100 {
            if flock(fd, LOCK_EX) == 0 { return }
            if errno != EINTR { break }
        }
        throw LogError(.io, "locking outbox file \(path)", errno: errno)
    }

    /// Makes a rename or a new file in `path` durable (best effort: a failure only weakens
    /// durability of the name, which the file's own fsync does not cover).
    static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
