/// One writer's appends to its file in a shared outbox folder (`OutboxFiles` has the layout and
/// the rules). Each append opens the file, locks it, checks that a collection has not claimed it
/// meanwhile (else starts a new one), writes one record, syncs it as the log does (`LogFile.sync`:
/// `F_FULLFSYNC` on Darwin), and unlocks and closes: a writer between appends holds no lock and
/// no descriptor, so iOS may suspend or kill it at any moment, and a kill, or a power cut, at any
/// byte loses nothing an append returned for.
///
/// Memory: one LZ4 encoder (a few KiB) and one record's bytes at a time.
public final class OutboxWriter: @unchecked Sendable {
    // Sendable: its mutable state (`current`, and the encoder's buffers, which a class of
    // their own keeps) is reached only inside `current.withLock`; `path`, `writers`,
    // `fileSystem` and `now` are immutable.
    /// What this writer knows of its current file (only it appends there).
    private struct Current {
        var file: FileStatus
        var salt: UInt32
        var nextSequence: UInt64
    }

    private let path: String
    /// The writers' folder `path` is in.
    private let writers: String
    private let fileSystem: any LogFileSystem
    /// The current file, and the turn to append: one append at a time per writer.
    private let current = Locked<Current?>(nil)
    private let encoder = LZ4Encoder()
    private let now: @Sendable () -> UInt64

    /// A writer named `name` (unique per writer: one file each) in the outbox folder `directory`.
    public init(
        directory: String, name: String, fileSystem: any LogFileSystem = PosixFileSystem(),
        now: @escaping @Sendable () -> UInt64
    ) throws(LogError) {
        writers = OutboxFiles.writersPath(directory)
        try fileSystem.createDirectory(atPath: writers)
        path = writers + "/" + name + Format.segmentSuffix
        self.fileSystem = fileSystem
        self.now = now
    }

    /// Appends one record, on stable storage when this returns. `.diskFull` when the disk (or
    /// the user's quota) is full; `.io` for any other failure, a failed directory sync included.
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

    /// One try: false if the file was claimed (renamed) before it was open and locked.
    private func appendOnce(_ body: [UInt8], kind: RecordKind, _ current: inout Current?) throws(LogError) -> Bool {
        // The writer's file, opened or made.
        let file: any LogFile
        do throws(LogError) {
            file = try fileSystem.openFile(atPath: path, create: try fileSystem.status(atPath: path) == nil)
        } catch  where error.errno == 2 || error.errno == 17 {
            return false  // claimed after the look (ENOENT), or made after it (EEXIST): look again
        }
        _ = try file.lock(waiting: true)
        defer { file.unlock() }
        let opened = try file.status()
        guard let named = try fileSystem.status(atPath: path), named.isSameFile(as: opened) else {
            return false  // claimed: this file is a collection's now
        }
        var state = try prepare(file, opened, known: current)
        var bytes: [UInt8] = []
        let record = RecordEncoding.append(
            body, kind: kind, sequence: state.nextSequence, timestampMilliseconds: now(), flags: .batchEnd,
            encoder: encoder, to: &bytes)
        RecordEncoding.seal(&bytes, [record], salt: state.salt)
        try file.writeFully(bytes, at: state.file.sizeBytes)
        try file.sync()
        state.file.sizeBytes += bytes.count
        state.nextSequence += 1
        current = state
        return true
    }

    /// The file's state before an append: a new file gets its segment header (synced with its
    /// name); a file of ours with bytes past what we wrote (a failed write) is cut back.
    private func prepare(_ file: any LogFile, _ opened: FileStatus, known: Current?) throws(LogError) -> Current {
        if let known, known.file.isSameFile(as: opened), opened.sizeBytes >= known.file.sizeBytes {
            if opened.sizeBytes > known.file.sizeBytes { try file.truncate(to: known.file.sizeBytes) }
            return known
        }
        // New to this writer: made by this open (a claim took the last one), or left behind
        // with a header only. Either way it holds no record: start it afresh.
        let salt = UInt32.random(in: 0...UInt32.max)
        let header = SegmentHeader(salt: salt, firstSequence: 1, createdMilliseconds: now()).encoded()
        try file.truncate(to: 0)
        try file.writeDurably(header, listedIn: writers, fileSystem)
        var status = opened
        status.sizeBytes = header.count
        return Current(file: status, salt: salt, nextSequence: 1)
    }
}
