/// One record to append as part of a batch.
public struct LogEntry: Sendable, Equatable {
    /// Its kind.
    public var kind: RecordKind
    /// Its body.
    public var body: [UInt8]
    /// An entry.
    public init(kind: RecordKind, body: [UInt8]) {
        self.kind = kind
        self.body = body
    }
}

/// Rolling ahead: the blocking part of starting a segment (creating its file, syncing the one
/// sealed) happens outside the log's lock, so an append never waits for the disk under it, nor
/// under a lock of its caller's (leveldb releases its mutex around the write and the sync for
/// the same reason).
///
/// 1. Right after the first append to a segment, the next segment's file is created, empty, as
///    `Format.spareSegmentName` (`prepareSpare`), where `SegmentPreparation` says: a whole
///    segment's worth of appends later it is needed.
/// 2. The append that does not fit rolls: under the lock it writes the new header into the spare
///    and renames it into place (`roll`), two system calls that do not wait for the disk. With
///    no spare ready, it appends to the active segment instead, which grows past its size.
/// 3. The sealed segment, the rename and the new segment are synced right after, in that order
///    (`WriteAheadLog.syncWritten()`); every later sync covers them first, so a record is never
///    reported durable while an earlier one is not.
///
/// A crash before step 3 ends leaves either name in the directory: a spare is removed at open
/// (its records, if any, were never reported durable), and a renamed segment whose bytes did
/// not reach the disk is recovered as any torn newest segment is.
///
/// What an append leaves to do: `prepareSpare`, create the next segment's file ahead of its
/// roll; `syncSealed`, sync the segment a roll sealed, the rename and the new segment.
typealias RollWork = (prepareSpare: Bool, syncSealed: Bool)

extension WriteAheadLog {
    // The one append: a record alone, or a batch. Each returns where its records lie, to read
    // them back with `read(_:)`; the sequence number is the address's.
    //
    // Each append may name its records' timestamp (ms since 1970): a caller that appends under
    // a lock of its own passes the time it read before taking it, so the log never calls a
    // clock under that lock. Without it, `configuration.now()` stamps the records.

    /// Appends one record. Returns once the bytes are handed to the kernel (they survive the
    /// process being killed); what else is waited for depends on `configuration.syncPolicy`.
    ///
    /// Throws `.diskFull` (nothing was written, the log stays usable), `.recordTooLarge`,
    /// `.failed`/`.io` (the log must be reopened), `.closed`.
    @discardableResult
    public func append(
        _ body: [UInt8], kind: RecordKind, timestampMilliseconds: UInt64? = nil
    ) throws(LogError) -> RecordAddress {
        let entry = CollectionOfOne(LogEntry(kind: kind, body: body))
        return try append(batch: entry, timestampMilliseconds: timestampMilliseconds)[0]
    }

    /// Appends several records with one `write(2)`, all-or-nothing across a crash: recovery
    /// discards a batch whose last record did not reach the disk. A batch never spans
    /// segments, so it must fit in one (`.recordTooLarge` otherwise); an empty one is
    /// `.invalidArgument`. Returns each record's address, in order.
    @discardableResult
    public func append(
        batch entries: some Collection<LogEntry>, timestampMilliseconds: UInt64? = nil
    ) throws(LogError) -> [RecordAddress] {
        guard !entries.isEmpty else { throw LogError(.invalidArgument, "empty batch") }
        let (addresses, work) = try mutex.withLock { () throws(LogError) -> ([RecordAddress], RollWork) in
            try encodeAndWrite(entries, timestamp: timestampMilliseconds)
        }
        try finish(work, through: addresses.last!.sequence)
        return addresses
    }

    /// Under `mutex`. Checks that the log is open, encodes the records, rolls if needed (and a
    /// spare segment is ready), writes. Returns where each record lies and the roll work to
    /// carry out once `mutex` is released.
    private func encodeAndWrite<C: Collection<LogEntry>>(_ entries: C, timestamp: UInt64?) throws(LogError)
        -> ([RecordAddress], RollWork)
    {
        try state.checkOpen()
        // A reader would reject a larger body: refuse it before anything is written.
        for entry in entries where entry.body.count > Format.maximumBodyBytes {
            throw LogError(
                .recordTooLarge,
                "a body of \(entry.body.count) bytes; the format allows at most \(Format.maximumBodyBytes)")
        }
        let timestamp = timestamp ?? configuration.now()
        let first = state.nextSequence
        var bytes: [UInt8] = [], records: [Range<Int>] = []
        let lastIndex = entries.count - 1
        for (i, entry) in entries.enumerated() {
            let record = RecordEncoding.append(
                entry.body, kind: entry.kind, sequence: first + UInt64(i), timestampMilliseconds: timestamp,
                flags: i == lastIndex ? .batchEnd : [], encoder: state.encoder, to: &bytes)
            records.append(record)
        }
        let total = bytes.count, room = configuration.segmentSizeBytes - Format.segmentHeaderSize
        guard total <= room else {
            throw LogError(.recordTooLarge, "\(total) bytes encoded; a segment holds at most \(room)")
        }
        var work: RollWork = (false, false)
        // Full, unless it holds no record yet (its first is the next sequence number).
        let full = state.active.sizeBytes + total > configuration.segmentSizeBytes && first > state.active.firstSequence
        if full, let spare = state.spare {
            try roll(onto: spare, firstSequence: first, createdMilliseconds: timestamp)
            work.syncSealed = true
        } else if full {
            state.appendsPastSegmentSize += 1
        }
        // Each record's CRC depends on the salt of the segment it lands in.
        RecordEncoding.seal(&bytes, records, salt: state.active.salt)
        // At the end of the active segment. A full disk rolls the partial write back and leaves
        // the log usable; any other failure fails the log.
        let file = state.active.file, offset = state.active.sizeBytes
        do {
            try file.writeFully(bytes, at: offset)
        } catch {
            if error.code == .diskFull, (try? file.truncate(to: offset)) != nil { throw error }
            state.phase = .failed(error)
            throw error
        }
        state.active.sizeBytes += total
        state.nextSequence += UInt64(entries.count)
        // Prepare the next segment now unless one is ready or being made, or a try failed since
        // the active segment last grew by a sixteenth of a segment.
        if state.spare == nil, !state.preparingSpare,
            state.spareFailedAtBytes.map({ state.active.sizeBytes >= $0 + configuration.segmentSizeBytes / 16 }) ?? true
        {
            state.preparingSpare = true
            work.prepareSpare = true
        }
        let addresses = records.enumerated().map { i, record in
            RecordAddress(
                sequence: first + UInt64(i), offset: UInt32(offset + record.lowerBound), length: UInt32(record.count))
        }
        return (addresses, work)
    }

    /// Under `mutex`: seals the active segment and makes the spare the active one, named for
    /// `firstSequence`. A full disk while writing the header leaves the log as it was (the
    /// append fails, the log stays usable); any other failure fails the log.
    func roll(
        onto spare: (file: any LogFile, salt: UInt32), firstSequence: UInt64, createdMilliseconds: UInt64
    ) throws(LogError) {
        let name = SegmentName.make(firstSequence: firstSequence)
        let header = SegmentHeader(
            salt: spare.salt, firstSequence: firstSequence, createdMilliseconds: createdMilliseconds)
        do {
            try spare.file.writeFully(header.encoded(), at: 0)
        } catch {
            if error.code != .diskFull { state.phase = .failed(error) }
            throw error
        }
        do {
            try fileSystem.renameFile(
                atPath: joinPath(directory, Format.spareSegmentName), toPath: joinPath(directory, name))
        } catch {
            state.phase = .failed(error)
            throw error
        }
        state.sealed.append(state.active.info)
        state.unsyncedSealed.append(state.active.file)
        state.active = ActiveSegment(
            name: name, firstSequence: firstSequence, file: spare.file, sizeBytes: Format.segmentHeaderSize,
            salt: spare.salt)
        state.spare = nil
    }

    /// Finishes an append outside `mutex`. First the roll work it left: on this thread
    /// (`.inline`: a failed sync is thrown, after the log is marked failed) or on the log's
    /// queues (`.background`: the next append reports a failed sync). A spare is made on a queue
    /// of its own: behind the syncs (milliseconds each) it came too late for a burst of appends.
    /// Then it waits for the records through `sequence` as `configuration.syncPolicy` says.
    private func finish(_ work: RollWork, through sequence: UInt64) throws(LogError) {
        switch configuration.segmentPreparation {
        case .inline:
            if work.prepareSpare { prepareSpare() }
            if work.syncSealed { try sync(through: .max) }
        case .background:
            if work.prepareSpare { preparationQueue.async { [self] in prepareSpare() } }
            if work.syncSealed { commit.queue.async { [self] in try? sync(through: .max) } }
        }
        switch configuration.syncPolicy {
        case .never: break
        case .always: try commit.waitUntilDurable(sequence, log: self)
        case .interval(let interval): commit.scheduleSync(after: interval, log: self)
        }
    }

    /// Appends that found the active segment full and its successor not prepared yet, and so
    /// grew it past `segmentSizeBytes` (what `make lock-hold` reports).
    package var appendsPastSegmentSize: Int { mutex.withLock { state.appendsPastSegmentSize } }

    /// Returns once the roll work queued so far (a spare's preparation, a sealed segment's
    /// sync) is done; at once with `.inline`, which leaves none. Blocks: for tests, and for a
    /// caller that settles.
    public func waitForRollWork() {
        guard configuration.segmentPreparation == .background else { return }
        preparationQueue.sync {}
        commit.queue.sync {}
    }

    /// Creates the next segment's file, empty. Its directory entry needs no sync of its own:
    /// the sync after the roll that renames it covers the directory. A failure is not an
    /// error of any append: the active segment grows meanwhile, and a later append tries again.
    private func prepareSpare() {
        assert(!BlockingIO.isForbidden, "a file created under a lock that forbids blocking I/O (a courier's core)")
        // Closed meanwhile (`close()` waits for a preparation already running): nothing to make.
        guard case .open = mutex.withLock({ state.phase }) else { return endPreparation() }
        let path = joinPath(directory, Format.spareSegmentName)
        let salt = configuration.makeSalt()
        let made = Result { () throws(LogError) -> any LogFile in
            // Left by a try that failed half way.
            if (try? fileSystem.fileSize(atPath: path)) != nil { try fileSystem.removeFile(atPath: path) }
            return try fileSystem.openFile(atPath: path, create: true)
        }
        let orphaned = mutex.withLock { () -> Bool in
            guard case .open = state.phase else { return true }  // still preparing: `close()` waits
            state.preparingSpare = false
            switch made {
            case .success(let file):
                state.spare = (file, salt)
                state.spareFailedAtBytes = nil
            case .failure:
                state.spareFailedAtBytes = state.active.sizeBytes
            }
            return false
        }
        guard orphaned else { return }
        // Closed meanwhile: the file goes before `close()` may let the directory go.
        if case .success = made { try? fileSystem.removeFile(atPath: path) }
        endPreparation()
    }

    /// Ends a preparation the log's closing stopped (`close()` may wait for it). The log never
    /// opens again once closed or failed, so the look at its phase needs no lock held till here.
    private func endPreparation() {
        mutex.withLock {
            state.preparingSpare = false
            mutex.broadcast()
        }
    }
}
