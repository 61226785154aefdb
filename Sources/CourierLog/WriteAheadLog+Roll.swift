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
///    (`WriteAheadLog.sync(_:)`); every later sync covers them first, so a record is never
///    reported durable while an earlier one is not.
///
/// A crash before step 3 ends leaves either name in the directory: a spare is removed at open
/// (its records, if any, were never reported durable), and a renamed segment whose bytes did
/// not reach the disk is recovered as any torn newest segment is.
struct RollWork: OptionSet {
    let rawValue: UInt8
    /// Create the next segment's file ahead of its roll.
    static let prepareSpare = RollWork(rawValue: 1)
    /// Sync the segment a roll sealed, the rename and the new segment.
    static let syncSealed = RollWork(rawValue: 2)
}

extension WriterState {
    /// Whether to prepare the next segment now: none is ready or being made, and no try failed
    /// since the active segment last grew by a sixteenth of a segment.
    func wantsSpare(segmentSizeBytes: Int) -> Bool {
        guard spare == nil, !preparingSpare else { return false }
        if let failed = spareFailedAtBytes, active.sizeBytes < failed + segmentSizeBytes / 16 { return false }
        return true
    }
}

extension WriteAheadLog {
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
        let old = state.active
        state.sealed.append(
            SegmentInfo(
                name: old.name, firstSequence: old.firstSequence, sizeBytes: old.sizeBytes, salt: old.salt,
                reader: old.reader))
        state.unsyncedSealed.append(old.file)
        state.unsyncedRenames += 1
        state.active = ActiveSegment(
            name: name, firstSequence: firstSequence, file: spare.file, sizeBytes: Format.segmentHeaderSize,
            salt: spare.salt)
        state.spare = nil
    }

    /// Carries out what an append left to do, outside `mutex`: on this thread (`.inline`: a
    /// failed sync is thrown, after the log is marked failed) or on the log's queues
    /// (`.background`: the next append reports a failed sync). A spare is made on a queue of its
    /// own: behind the syncs (milliseconds each) it came too late for a burst of appends.
    func carryOut(_ work: RollWork) throws(LogError) {
        switch configuration.segmentPreparation {
        case .inline:
            if work.contains(.prepareSpare) { prepareSpare() }
            if work.contains(.syncSealed) { try syncSealed() }
        case .background:
            if work.contains(.prepareSpare) { preparationQueue.async { [self] in prepareSpare() } }
            if work.contains(.syncSealed) { commit.queue.async { [self] in try? syncSealed() } }
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

    private func syncSealed() throws(LogError) { try commit.waitUntilDurable(nextSequenceForSync, log: self) }

    /// Creates the next segment's file, empty. Its directory entry needs no sync of its own:
    /// the sync after the roll that renames it covers the directory. A failure is not an
    /// error of any append: the active segment grows meanwhile, and a later append tries again.
    private func prepareSpare() {
        assert(!BlockingIO.isForbidden, "a file created under a lock that forbids blocking I/O (a courier's core)")
        // Closed meanwhile (`close()` waits for a preparation already running): nothing to make.
        guard isOpenElseEndPreparation() else { return }
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
        mutex.withLock {
            state.preparingSpare = false
            mutex.broadcast()
        }
    }

    /// Whether the log is open; if not, the preparation under way ends here.
    private func isOpenElseEndPreparation() -> Bool {
        mutex.withLock {
            guard case .open = state.phase else {
                state.preparingSpare = false
                mutex.broadcast()  // `close()` may wait for it
                return false
            }
            return true
        }
    }
}
