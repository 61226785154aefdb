extension WriteAheadLog {
    /// Sealed segments kept open for reads back at once: a backlog drained from a few old
    /// segments reads each record with one `pread`, and file descriptors stay few.
    static let maximumOpenReaders = 4

    /// Reads back the record at `address` with one positioned read, and verifies it as the
    /// scanner does (magic, sizes, CRC with its segment's salt, sequence number, LZ4 frame).
    /// The segment is opened once and kept open (its salt read once), not opened per read.
    ///
    /// Throws `.notFound` if its segment was forgotten (compacted away) since the address was
    /// taken, `.corrupt` if the bytes there are not that record, `.io` if reading failed.
    public func read(_ address: RecordAddress) throws(LogError) -> LogRecord {
        let found = try segment(holding: address.sequence)
        let path = joinPath(directory, found.name)
        do throws(LogError) {
            // Opened outside the lock, unless kept; two readers racing both open, and one is kept.
            let reader = if let kept = found.reader { kept } else { try fileSystem.openForReading(atPath: path) }
            let salt: UInt32
            if let known = found.salt {
                salt = known
            } else {
                let header = try reader.read(at: 0, count: Format.segmentHeaderSize)
                guard header.count == Format.segmentHeaderSize else {
                    throw LogError(.corrupt, "segment header missing", path: path)
                }
                salt = header.withUnsafeBytes { SegmentHeader.fields($0).salt }
            }
            if found.reader == nil || found.salt == nil { keep(reader, salt: salt, for: found.name) }
            let bytes = try reader.read(at: Int(address.offset), count: Int(address.length))
            guard let record = Self.verify(bytes, address: address, salt: salt, segment: found.name) else {
                throw LogError(.corrupt, "the record at \(address) does not verify", path: path)
            }
            return record
        } catch  where error.errno == 2 {
            // The segment vanished: forgotten between the lookup and the open or a read.
            throw LogError(.notFound, "the segment was forgotten", path: path)
        }
    }

    /// The segment holding `sequence`: its name, and its salt and open reader when already known.
    private func segment(holding sequence: UInt64) throws(LogError) -> SegmentInfo {
        try mutex.withLock { () throws(LogError) -> SegmentInfo in
            if sequence >= state.active.firstSequence {
                guard sequence < state.nextSequence else {
                    throw LogError(.invalidArgument, "no record \(sequence) yet")
                }
                return state.active.info
            }
            // The last sealed segment starting at or below `sequence` (binary search).
            var low = 0, high = state.sealed.count
            while low < high {
                let mid = (low + high) / 2
                if state.sealed[mid].firstSequence <= sequence { low = mid + 1 } else { high = mid }
            }
            guard low > 0 else { throw LogError(.notFound, "record \(sequence) lies in a forgotten segment") }
            return state.sealed[low - 1]
        }
    }

    /// Keeps `reader` and `salt` for segment `name`, if it is still there; at most
    /// `maximumOpenReaders` sealed segments stay open (the others are closed as their readers
    /// go: a read in flight keeps its own open).
    private func keep(_ reader: any LogReadableFile, salt: UInt32, for name: String) {
        mutex.withLock {
            if state.active.name == name {
                if state.active.reader == nil { state.active.reader = reader }
                return
            }
            guard let i = state.sealed.firstIndex(where: { $0.name == name }) else { return }
            state.sealed[i].salt = salt
            guard state.sealed[i].reader == nil else { return }
            let open = state.sealed.indices.filter { state.sealed[$0].reader != nil }
            // Bounded by `maximumOpenReaders`: at most one is over it at a time.
            for j in open.prefix(max(0, open.count + 1 - Self.maximumOpenReaders)) { state.sealed[j].reader = nil }
            state.sealed[i].reader = reader
        }
    }

    static func verify(_ bytes: [UInt8], address: RecordAddress, salt: UInt32, segment: String) -> LogRecord? {
        bytes.withUnsafeBytes { raw -> LogRecord? in
            // The scanner's validation (`RecordHeader`), plus what the address promises.
            guard raw.count == Int(address.length), let header = RecordHeader.parse(raw),
                header.recordLength == raw.count, header.sequence == address.sequence,
                RecordHeader.checksumHolds(raw, salt: salt)
            else { return nil }
            let frame = UnsafeRawBufferPointer(rebasing: raw[Format.recordHeaderSize...])
            guard let body = LZ4Decoder().decompress(frame, limit: Format.maximumBodyBytes) else { return nil }
            return LogRecord(
                kind: header.kind, flags: header.flags,
                timestampMilliseconds: header.timestampMilliseconds, body: body, segment: segment,
                address: address)
        }
    }
}
