import CourierLog
import Foundation

/// The messaging layer's log, in the role of leveldb's `log::Writer` under `DBImpl`: the
/// **only** caller of `WriteAheadLog` and of the configured file system in this module. It
/// speaks in events and message states; the core, which owns the state those records build,
/// calls it inside its critical sections, so log order is projection order.
///
/// What it holds: the log itself (appends, reads by address, sync, forget, close), opening it
/// with replay (`init`, fed by `Replayer` in `MessageLog+Replay.swift`), and the body files of
/// background hand-offs (below), the one thing written beside the log.
///
/// Thread safety: the log is thread-safe and every other property is immutable, so a
/// `MessageLog` is used from any thread (the core's lock, the I/O queue, attempts' reads).
/// Its file work blocks: callers keep it off the cooperative pool.
final class MessageLog: Sendable {
    private let log: WriteAheadLog
    /// What opening found: the log's own recovery (a torn tail cut, a damaged segment set aside).
    var recovery: RecoveryReport { log.recovery }
    /// What the replay during opening found (damaged spans it skipped, missing sequences).
    var openingReplay: ReplayReport? { log.openingReplay }

    /// Gives a folder of its own the log's protection class (`Configuration.protect`): the
    /// hand-off's body folder gets it before its first file.
    let protect: @Sendable (String) -> Void

    /// Opens (or creates) the log in `directory`, feeding every valid record to `replayer` in
    /// the same pass that recovers the newest segment, and applies the platform's data
    /// protection to the directory. Throws what `Courier.init` documents.
    init(
        directory: URL, configuration: Courier.Configuration, logConfiguration: WriteAheadLog.Configuration,
        replayer: Replayer
    ) throws(CourierError) {
        // Before the log makes its directory's first file (the lock, the first segment): files
        // inherit their directory's protection class.
        configuration.protect(directory.path)
        do {
            log = try WriteAheadLog(
                directory: directory.path, configuration: logConfiguration,
                fileSystem: configuration.fileSystem, replaying: replayer.visit)
        } catch {
            throw CourierError(opening: error, dataProtection: configuration.hasDataProtection)
        }
        // Again for the files an earlier version made in another class, and the spare segment.
        configuration.protect(directory.path)
        protect = configuration.protect
    }

    // MARK: - Appends (each one record, or one batch that is all-or-nothing)

    /// A message's `enqueued` record, already encoded by `send` outside any lock.
    func append(enqueued body: [UInt8], at timestampMilliseconds: UInt64) throws(LogError) -> RecordAddress {
        try log.append(body, kind: .enqueued, timestampMilliseconds: timestampMilliseconds)
    }

    /// Records that land together or not at all, in one segment (every append but `send`'s).
    func append(batch entries: [LogEntry], at timestampMilliseconds: UInt64) throws(LogError) -> [RecordAddress] {
        try log.append(batch: entries, timestampMilliseconds: timestampMilliseconds)
    }

    // MARK: - Reads

    /// The full state recorded at `address`, which must be message `id`'s `enqueued` or
    /// `snapshot` record (one positioned read, checksum verified), and the size of that
    /// record's body. `.notFound` if the address is gone (a compaction moved the record);
    /// `.corrupt` if it holds anything else.
    func readState(
        at address: RecordAddress,
        of id: MessageID
    ) throws(LogError) -> (state: MessageState, bodyBytes: Int) {
        let record = try log.read(address)
        guard let state = Event.decode(kind: record.kind, body: record.body)?.fullState, state.id == id else {
            throw LogError(.corrupt, "the record at \(address) is not message \(id)'s state")
        }
        return (state, record.body.count)
    }

    /// The record at `address` (one positioned read, checksum verified).
    func read(_ address: RecordAddress) throws(LogError) -> LogRecord { try log.read(address) }

    // MARK: - Size and lifecycle

    /// Bytes on disk, every segment included.
    var sizeBytes: Int { log.sizeBytes }
    /// The segments' file names, oldest first (the last is the one appended to).
    var segmentNames: [String] { log.segmentNames }
    /// How many segments there are, and the first sequence of the one appended to.
    var segmentSummary: (count: Int, activeFirstSequence: UInt64) { log.segmentSummary }
    /// The sequence number the next record gets, and the last one on stable storage (what
    /// the durability tests watch).
    var nextSequence: UInt64 { log.nextSequence }
    var durableSequence: UInt64 { log.durableSequence }

    /// Appends that grew a full segment because its successor was not prepared yet.
    var appendsPastSegmentSize: Int { log.appendsPastSegmentSize }

    /// Returns once the log's queued roll work (the next segment's preparation, a sealed
    /// segment's sync) is done. Blocks.
    func waitForRollWork() { log.waitForRollWork() }

    /// Makes every append so far durable (an fsync, unless one already covered it).
    func sync() throws(LogError) { try log.sync() }

    /// Makes record `sequence` and those before it durable (an fsync shared with concurrent
    /// callers, unless one already covered it). Blocks: never under the core's lock.
    func sync(through sequence: UInt64) throws(LogError) { try log.sync(through: sequence) }

    /// Deletes the segments wholly below `sequence` (compaction's last step).
    func forget(below sequence: UInt64) throws(LogError) { _ = try log.forget(below: sequence) }

    /// Syncs and closes the log, and releases the directory.
    func close() throws(LogError) { try log.close() }
}

/// The body files of handed-off messages, in `bodies/` beside the log's segments, one per
/// hand-off (`<id>-<ticket>.body`): created `0600` in a `0700` directory by the configured file
/// system, with the log's data protection on iOS, and synced (with their directory) before
/// their task is made, so no upload can read a file that power loss cut short. **A body file
/// exists only while its hand-off lasts** (files a kill left behind are removed when the next
/// open reconciles). Blocking file work, every call: keep it off the cooperative pool.
extension MessageLog {
    var bodyDirectoryPath: String { log.directory + "/" + HandOff.directoryName }

    func bodyPath(of id: MessageID, ticket: UInt64) -> String {
        bodyDirectoryPath + "/" + HandOff.bodyFileName(id, ticket: ticket)
    }

    /// Writes a pass's bodies, each to its path, replacing what is there, and syncs each; then
    /// makes them part of their directory for good (one sync for the whole pass: no upload may
    /// read a file that power loss could unlink). Which were written (false: a failure).
    func writeBodies(_ bodies: [(body: [UInt8], path: String)]) -> [Bool] {
        protect(bodyDirectoryPath)  // before its first file
        let written = bodies.map { writeBody($0.body, to: $0.path) }
        try? log.fileSystem.syncDirectory(atPath: bodyDirectoryPath)
        return written
    }

    /// Writes `body` to `path`, replacing what is there, and syncs it. False on failure.
    private func writeBody(_ body: [UInt8], to path: String) -> Bool {
        guard (try? log.fileSystem.removeFile(atPath: path)) != nil,
            let file = try? log.fileSystem.openFile(atPath: path, create: true)
        else { return false }
        // The log's own loop over short writes: a write that fails or makes no progress stops it.
        return (try? file.writeFully(body, at: 0)) != nil && (try? file.sync()) != nil
    }

    func removeBody(at path: String) {
        try? log.fileSystem.removeFile(atPath: path)
    }

    func removeBody(of id: MessageID, ticket: UInt64) {
        removeBody(at: bodyPath(of: id, ticket: ticket))
    }

    /// Removes every body file whose hand-off is not among `handOffs`.
    func sweepBodies(keeping handOffs: [MessageID: HandOff]) {
        guard let names = try? log.fileSystem.contentsOfDirectory(atPath: bodyDirectoryPath) else { return }
        for name in names {
            if let (id, ticket) = HandOff.parse(bodyFileName: name), handOffs[id]?.ticket == ticket { continue }
            removeBody(at: bodyDirectoryPath + "/" + name)
        }
    }
}
