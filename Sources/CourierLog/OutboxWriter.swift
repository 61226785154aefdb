import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One writer's appends to its file in a shared outbox folder (`OutboxFiles` has the layout and
/// the rules). Each append opens the file, locks it, checks that a collection has not claimed it
/// meanwhile (else starts a new one), writes one record, fsyncs, and unlocks and closes: a
/// writer between appends holds no lock and no descriptor, so iOS may suspend or kill it at any
/// moment, and a kill at any byte loses nothing an append returned for.
///
/// Memory: one LZ4 encoder (a few KiB) and one record's bytes at a time.
public final class OutboxWriter {
    /// What this writer knows of its current file (only it appends there).
    private struct Current {
        var device: UInt64 = 0
        var inode: UInt64 = 0
        var sizeBytes = 0
        var salt: UInt32 = 0
        var nextSequence: UInt64 = 1
    }

    private let path: String
    /// The current file, and the turn to append: one append at a time per writer.
    private let current = Locked<Current?>(nil)
    private let encoder = LZ4Encoder()
    private let now: @Sendable () -> UInt64

    /// A writer named `name` (unique per writer: one file each) in the outbox folder `directory`.
    public init(directory: String, name: String, now: @escaping @Sendable () -> UInt64) throws(LogError) {
        try OutboxFiles.makeDirectory(OutboxFiles.writersPath(directory))
        path = OutboxFiles.writersPath(directory) + "/" + name + Format.segmentSuffix
        self.now = now
    }

    /// Appends one record, on stable storage when this returns.
    public func append(_ body: [UInt8], kind: RecordKind) throws(LogError) {
        guard body.count <= Format.maximumBodyBytes else {
            throw LogError(.recordTooLarge, "a body of \(body.count) bytes; at most \(Format.maximumBodyBytes)")
        }
        try current.withLock { (current: inout Current?) throws(LogError) in
            // Bounded: a claim can rename the file only between our open and our lock, and then
            // the next turn creates a new one that no claim takes before it has a record.
            for _ in 0..<8 {
                if try appendOnce(body, kind: kind, &current) { return }
            }
            throw LogError(.io, "outbox file \(path) kept being claimed while appending")
        }
    }

    /// One try: false if the file was claimed between the open and the lock.
    private func appendOnce(_ body: [UInt8], kind: RecordKind, _ current: inout Current?) throws(LogError) -> Bool {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LogError(.io, "opening outbox file \(path)", errno: errno) }
        defer { close(fd) }
        try OutboxFiles.lockExclusively(fd, path)
        defer { flock(fd, LOCK_UN) }
        var opened = stat(), named = stat()
        guard fstat(fd, &opened) == 0 else { throw LogError(.io, "stat of outbox file \(path)", errno: errno) }
        guard stat(path, &named) == 0, named.st_ino == opened.st_ino, named.st_dev == opened.st_dev else {
            return false  // claimed: this descriptor is a collection's file now
        }
        var file = try prepare(fd, opened, known: current)
        var bytes: [UInt8] = []
        let start = RecordEncoding.append(
            body, kind: kind, sequence: file.nextSequence, timestampMilliseconds: now(), flags: .batchEnd,
            encoder: encoder, to: &bytes)
        RecordEncoding.seal(&bytes, starts: [start], salt: file.salt)
        try write(fd, bytes, at: file.sizeBytes)
        guard fsync(fd) == 0 else { throw LogError(.io, "fsync of outbox file \(path)", errno: errno) }
        file.sizeBytes += bytes.count
        file.nextSequence += 1
        current = file
        return true
    }

    /// The file's state before an append: a new file gets its segment header (synced with its
    /// name); a file of ours with bytes past what we wrote (a failed write) is cut back.
    private func prepare(_ fd: Int32, _ info: stat, known: Current?) throws(LogError) -> Current {
        let device = UInt64(info.st_dev), inode = UInt64(info.st_ino)
        if let known, known.device == device, known.inode == inode, Int(info.st_size) >= known.sizeBytes {
            if Int(info.st_size) > known.sizeBytes, ftruncate(fd, off_t(known.sizeBytes)) != 0 {
                throw LogError(.io, "cutting a failed write from outbox file \(path)", errno: errno)
            }
            return known
        }
        // New to this writer: made by this open (a claim took the last one), or left behind
        // with a header only. Either way it holds no record: start it afresh.
        let salt = UInt32.random(in: 0...UInt32.max)
        let header = SegmentHeader(salt: salt, firstSequence: 1, createdMilliseconds: now()).encoded()
        guard ftruncate(fd, 0) == 0 else { throw LogError(.io, "resetting outbox file \(path)", errno: errno) }
        try write(fd, header, at: 0)
        guard fsync(fd) == 0 else { throw LogError(.io, "fsync of outbox file \(path)", errno: errno) }
        OutboxFiles.syncDirectory((path as NSString).deletingLastPathComponent)
        return Current(device: device, inode: inode, sizeBytes: header.count, salt: salt, nextSequence: 1)
    }

    private func write(_ fd: Int32, _ bytes: [UInt8], at offset: Int) throws(LogError) {
        var written = 0
        // Bounded: each turn writes at least one byte, or throws.
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                pwrite(fd, raw.baseAddress! + written, raw.count - written, off_t(offset + written))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let code: LogError.Code = errno == ENOSPC ? .diskFull : .io
                throw LogError(code, "writing outbox file \(path)", errno: errno)
            }
            written += n
        }
    }
}

/// Why `OutboxWriter` is `Sendable`: its mutable state (`current`, and the encoder's buffers,
/// which a class of their own keeps) is reached only inside `current.withLock`; `path` and
/// `now` are immutable.
extension OutboxWriter: @unchecked Sendable {}
