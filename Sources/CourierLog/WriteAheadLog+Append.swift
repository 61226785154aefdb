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
        // Not `append(batch:)` of one: that would allocate an array on every append.
        let (address, work) = try mutex.withLock { () throws(LogError) -> (RecordAddress, RollWork) in
            try state.checkOpen()
            let (range, work) = try encodeAndWrite(
                CollectionOfOne(LogEntry(kind: kind, body: body)), timestamp: timestampMilliseconds)
            let address = RecordAddress(
                sequence: range.lowerBound, offset: UInt32(state.lastWriteOffset),
                length: UInt32(state.scratch.count))
            return (address, work)
        }
        if !work.isEmpty { try carryOut(work) }
        try waitAsPolicySays(for: address.sequence)
        return address
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
            try state.checkOpen()
            let (range, work) = try encodeAndWrite(entries, timestamp: timestampMilliseconds)
            let starts = state.recordStarts, total = state.scratch.count, base = state.lastWriteOffset
            let addresses = starts.indices.map { i in
                let end = i + 1 < starts.count ? starts[i + 1] : total
                return RecordAddress(
                    sequence: range.lowerBound + UInt64(i), offset: UInt32(base + starts[i]),
                    length: UInt32(end - starts[i]))
            }
            return (addresses, work)
        }
        if !work.isEmpty { try carryOut(work) }
        try waitAsPolicySays(for: addresses.last!.sequence)
        return addresses
    }

    private func waitAsPolicySays(for sequence: UInt64) throws(LogError) {
        switch configuration.syncPolicy {
        case .never: break
        case .always: try commit.waitUntilDurable(sequence, log: self)
        case .interval(let interval): commit.scheduleSync(after: interval, log: self)
        }
    }

    /// Under `mutex`. Encodes into the scratch buffer, rolls if needed (and a spare segment is
    /// ready), writes. Returns the sequence numbers written and the roll work to carry out
    /// once `mutex` is released.
    private func encodeAndWrite<C: Collection<LogEntry>>(_ entries: C, timestamp: UInt64?) throws(LogError)
        -> (ClosedRange<UInt64>, RollWork)
    {
        // A reader would reject a larger body: refuse it before anything is written.
        for entry in entries where entry.body.count > Format.maximumBodyBytes {
            throw LogError(
                .recordTooLarge,
                "a body of \(entry.body.count) bytes; the format allows at most \(Format.maximumBodyBytes)")
        }
        let timestamp = timestamp ?? configuration.now()
        let first = state.nextSequence
        state.scratch.removeAll(keepingCapacity: true)
        state.recordStarts.removeAll(keepingCapacity: true)
        let lastIndex = entries.count - 1
        for (i, entry) in entries.enumerated() {
            let start = RecordEncoding.append(
                entry.body, kind: entry.kind, sequence: first + UInt64(i), timestampMilliseconds: timestamp,
                flags: i == lastIndex ? .batchEnd : [], encoder: state.encoder, to: &state.scratch)
            state.recordStarts.append(start)
        }
        let total = state.scratch.count
        guard total <= configuration.segmentSizeBytes - Format.segmentHeaderSize else {
            throw LogError(
                .recordTooLarge,
                "\(total) bytes encoded; a segment holds at most "
                    + "\(configuration.segmentSizeBytes - Format.segmentHeaderSize)"
            )
        }
        var work = RollWork()
        if state.active.sizeBytes + total > configuration.segmentSizeBytes && state.active.recordCount > 0,
            let spare = state.spare
        {
            try roll(onto: spare, firstSequence: first, createdMilliseconds: timestamp)
            work.insert(.syncSealed)
        } else if state.active.sizeBytes + total > configuration.segmentSizeBytes && state.active.recordCount > 0 {
            state.appendsPastSegmentSize += 1
        }
        // Each record's CRC depends on the salt of the segment it lands in.
        RecordEncoding.seal(&state.scratch, starts: state.recordStarts, salt: state.active.salt)
        try writeScratch()
        state.active.sizeBytes += total
        state.active.recordCount += entries.count
        state.nextSequence += UInt64(entries.count)
        if state.wantsSpare(segmentSizeBytes: configuration.segmentSizeBytes) {
            state.preparingSpare = true
            work.insert(.prepareSpare)
        }
        return (first...(first + UInt64(entries.count) - 1), work)
    }

    /// Writes the scratch buffer at the end of the active segment. A full disk rolls the
    /// partial write back and leaves the log usable; any other failure fails the log.
    private func writeScratch() throws(LogError) {
        let file = state.active.file
        let offset = state.active.sizeBytes
        state.lastWriteOffset = offset
        do {
            try file.writeFully(state.scratch, at: offset)
        } catch {
            if error.code == .diskFull, (try? file.truncate(to: offset)) != nil {
                throw error
            }
            state.phase = .failed(error)
            throw error
        }
    }
}

extension WriterState {
    func checkOpen() throws(LogError) {
        switch phase {
        case .open: return
        case .closed: throw LogError(.closed, "the log is closed")
        case .failed(let cause):
            throw LogError(
                .failed, "an earlier write or fsync failed (\(cause)); reopen the log", path: cause.path,
                errno: cause.errno)
        }
    }
}
