extension WriteAheadLog {
    /// Reads back the record at `address` with one positioned read, and verifies it as the
    /// scanner does (magic, sizes, CRC with its segment's salt, sequence number, LZ4 frame).
    ///
    /// Throws `.notFound` if its segment was forgotten (compacted away) since the address was
    /// taken, `.corrupt` if the bytes there are not that record, `.io` if reading failed.
    public func read(_ address: RecordAddress) throws(LogError) -> LogRecord {
        let (name, salt) = try segment(holding: address.sequence)
        let path = joinPath(directory, name)
        let saltValue: UInt32
        if let salt {
            saltValue = salt
        } else {
            let header = try readSegment(path, offset: 0, count: Format.segmentHeaderSize)
            guard header.count == Format.segmentHeaderSize else {
                throw LogError(.corrupt, "segment header missing", path: path)
            }
            saltValue = header.withUnsafeBytes { SegmentHeader.fields($0).salt }
        }
        let bytes = try readSegment(path, offset: Int(address.offset), count: Int(address.length))
        guard let record = Self.verify(bytes, address: address, salt: saltValue, segment: name) else {
            throw LogError(.corrupt, "the record at \(address) does not verify", path: path)
        }
        return record
    }

    /// A positioned read; a segment that vanished (forgotten between the lookup and the read)
    /// is `.notFound`.
    private func readSegment(_ path: String, offset: Int, count: Int) throws(LogError) -> [UInt8] {
        switch Result(catching: { () throws(LogError) in try fileSystem.read(atPath: path, offset: offset, count: count)
        })
        {
        case .success(let bytes): return bytes
        case .failure(let error) where error.errno == 2:
            throw LogError(.notFound, "the segment was forgotten", path: path)
        case .failure(let error): throw error
        }
    }

    /// The name of the segment holding `sequence`, and its salt when known without a read (the
    /// active segment's).
    private func segment(holding sequence: UInt64) throws(LogError) -> (String, UInt32?) {
        try mutex.withLock { () throws(LogError) -> (String, UInt32?) in
            if sequence >= state.active.firstSequence {
                guard sequence < state.nextSequence else {
                    throw LogError(.invalidArgument, "no record \(sequence) yet")
                }
                return (state.active.name, state.active.salt)
            }
            // The last sealed segment starting at or below `sequence` (binary search).
            var low = 0, high = state.sealed.count
            while low < high {
                let mid = (low + high) / 2
                if state.sealed[mid].firstSequence <= sequence { low = mid + 1 } else { high = mid }
            }
            guard low > 0 else { throw LogError(.notFound, "record \(sequence) lies in a forgotten segment") }
            return (state.sealed[low - 1].name, nil)
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
