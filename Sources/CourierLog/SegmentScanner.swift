/// Parses one segment, read through a `SegmentWindow` (in chunks, never whole). No repair. Both
/// the writer's recovery and the read-only `LogReader` are built on it, so they can never
/// disagree about what is valid.
///
/// Rules (the *why* is in ARCHITECTURE.md, "Recovery"):
/// - A record is valid when its header has the right magic and sizes, its CRC (seeded with the
///   segment's salt) matches, its LZ4 frame decodes to the declared size of at most
///   `Format.maximumBodyBytes`, its sequence number is above every earlier one, and it ends
///   within 4 GiB of the segment's start (where a `RecordAddress` can point). Nothing
///   else, and no setting of the reading process, enters into it: this is the one definition
///   of a valid record.
/// - Bytes that are not a valid record start a search for the next valid record header. If one
///   is found, the bytes between are a damaged span: reported, skipped, and nothing else is lost.
/// - If none is found, the rest of the segment is the trailing span. In the newest segment that
///   is a torn write (end of log, cut away by the writer); elsewhere it is damage.
/// - Valid records at the end not closed by a `batchEnd` record belong to a batch whose end
///   never reached the disk: they are part of the trailing span, so batches are all-or-nothing.
struct SegmentScanner {
    struct Result {
        var header: SegmentHeader?
        /// Set when the header is missing or fails its checks (`header` then holds the stored
        /// fields, used as a best effort to verify the records).
        var headerProblem: String?
        var damaged: [DamagedSpan] = []
        /// The bytes after the last valid, batch-complete record, when any are left.
        var trailing: DamagedSpan?
        var recordCount = 0
        var lastSequence: UInt64?
        var size = 0
        /// The header is missing in a way only an interrupted creation explains: the file is
        /// empty, zero-filled, or a prefix of a header (a header is written in one call, so a
        /// torn one is cut short, never scrambled).
        var tornHeader = false
    }

    /// Calls `visit` for each valid record in order. `after` is the highest sequence number
    /// seen in earlier segments; records at or below it are out of order and count as damage.
    /// The body in each view is valid only during the visit. `decoder` may be shared by the
    /// scans of one reading, one after the other.
    static func scan(
        _ window: SegmentWindow, segment: String, after: UInt64?, decoder: LZ4Decoder = LZ4Decoder(),
        visit: (RecordView) throws -> Void
    ) throws -> Result {
        var result = Result(size: window.size)
        guard window.size >= Format.segmentHeaderSize else {
            let bytes = try window.bytes(at: 0, count: window.size) ?? UnsafeRawBufferPointer(start: nil, count: 0)
            result.headerProblem = "segment shorter than its header"
            // Could it be the start of one? All zeros, or the magic, frame size and tag (bytes
            // 0..<12 of every header) as far as they go.
            let fixed = SegmentHeader(salt: 0, firstSequence: 0, createdMilliseconds: 0).encoded().prefix(12)
            result.tornHeader = bytes.allSatisfy { $0 == 0 } || zip(bytes, fixed).allSatisfy { $0 == $1 }
            if window.size > 0 {
                result.trailing = DamagedSpan(
                    segment: segment, offset: 0, length: window.size, reason: "torn segment header")
            }
            return result
        }
        let raw = try window.bytes(at: 0, count: Format.segmentHeaderSize)!
        // A damaged header's fields are still used, as a best effort, to verify the records.
        result.header = SegmentHeader.fields(raw)
        if let problem = SegmentHeader.problem(raw) {
            result.headerProblem = "bad segment header (\(problem))"
            result.tornHeader = try raw.allSatisfy { $0 == 0 } && window.isZero(from: 0)
        }
        var scanner = SegmentScanner(
            window: window, salt: result.header!.salt, segment: segment, decoder: decoder,
            resyncBudgetBytes: 4 * window.size + (1 << 20))
        try scanner.run(after: after, result: &result, visit: visit)
        result.size = window.size
        return result
    }

    // The scanning loop proper, over one segment's window.
    let window: SegmentWindow
    let salt: UInt32
    let segment: String
    let decoder: LZ4Decoder
    /// CRC bytes the resynchronising search may spend. Real damage costs one CRC per genuine
    /// header; only crafted input (many fake headers with long lengths) could exhaust this, and
    /// then the rest of the segment is reported as one span instead of taking quadratic time.
    var resyncBudgetBytes: Int

    /// A record that passed every check, and where it starts, without its body (which `parse`
    /// returns beside it, and which is decoded again from the segment for records of a batch
    /// held back).
    typealias Parsed = (header: RecordHeader, offset: Int)

    private mutating func run(after: UInt64?, result: inout Result, visit: (RecordView) throws -> Void) throws {
        var last = after
        var pos = Format.segmentHeaderSize
        var pending: [Parsed] = []  // records of a batch whose end is not seen yet
        var trailingReason: String?
        // Each turn advances `pos` by at least one byte, so this loop ends.
        while pos < window.size {
            // Bytes before `pos` are done with, unless a held-back batch starts earlier.
            window.keepFrom = pending.first?.offset ?? pos
            if let (record, body) = try parse(at: pos, after: last, resync: false) {
                last = record.header.sequence
                pos += record.header.recordLength
                if record.header.flags.contains(.batchEnd) && pending.isEmpty {
                    // The common case, a record appended alone: no buffering, no second decode.
                    try view(record, body, &result, visit)
                    continue
                }
                pending.append(record)
                if record.header.flags.contains(.batchEnd) { try flush(&pending, &result, visit) }
                continue
            }
            let why = try reason(at: pos)  // before the search moves the window on
            guard let next = try findRecord(from: pos + 1, after: last, keeping: pending.first?.offset) else {
                if pending.isEmpty { trailingReason = why }
                break
            }
            // Damage followed by a valid record is corruption, not a torn write: the records
            // before it were complete, so they count even if their batch end was lost.
            try flush(&pending, &result, visit)
            result.damaged.append(DamagedSpan(segment: segment, offset: pos, length: next - pos, reason: why))
            pos = next
        }
        let trailingStart = pending.first?.offset ?? pos
        if trailingStart < window.size {
            let why =
                pending.isEmpty ? try trailingReason ?? reason(at: trailingStart) : "batch without its last record"
            result.trailing = DamagedSpan(
                segment: segment, offset: trailingStart, length: window.size - trailingStart, reason: why)
        }
    }

    /// Visits `record`, whose body is `body`.
    private func view(
        _ record: Parsed, _ body: [UInt8], _ result: inout Result, _ visit: (RecordView) throws -> Void
    ) throws {
        let h = record.header
        try body.withUnsafeBytes { buffer in
            try visit(
                RecordView(
                    kind: h.kind, flags: h.flags, timestampMilliseconds: h.timestampMilliseconds,
                    segment: segment,
                    address: RecordAddress(
                        sequence: h.sequence, offset: UInt32(record.offset), length: UInt32(h.recordLength)),
                    body: buffer))
        }
        result.recordCount += 1
        result.lastSequence = h.sequence
    }

    private func flush(
        _ pending: inout [Parsed], _ result: inout Result, _ visit: (RecordView) throws -> Void
    ) throws {
        for record in pending {
            // Decoded again: a held-back batch keeps no bodies, so memory stays near the window's
            // (it verified once already; the window kept its bytes, `keepFrom` being at or before
            // the batch's start).
            let start = record.offset + Format.recordHeaderSize
            let frame = try window.bytes(at: start, count: record.header.frameLength)!
            try view(record, decoder.decompress(frame, limit: Format.maximumBodyBytes)!, &result, visit)
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// The next offset at or after `start` where a valid record begins, within the budget.
    /// Bytes behind the search are dropped, except a held-back batch's from `keeping` on.
    private mutating func findRecord(from start: Int, after: UInt64?, keeping: Int?) throws -> Int? {
        var p = start
        let end = window.size - Format.recordHeaderSize
        while p <= end && resyncBudgetBytes > 0 {
            window.keepFrom = keeping ?? p
            // Cheap filter first: the magic's first byte, then the whole header shape.
            if try window.byte(at: p) == 0x50, try parse(at: p, after: after, resync: true) != nil { return p }
            p += 1
        }
        return nil
    }

    /// The record at `pos` and its body, if it is valid in every respect.
    private mutating func parse(at pos: Int, after: UInt64?, resync: Bool) throws -> (Parsed, [UInt8])? {
        // A record must end within 4 GiB of its segment's start, where every address can
        // point (segments are at most 1 GiB): bytes beyond are damage, never records.
        guard let bytes = try window.bytes(at: pos, count: Format.recordHeaderSize),
            let header = RecordHeader.parse(bytes),
            header.frameLength <= window.size - pos - Format.recordHeaderSize,
            pos + header.recordLength <= Int(UInt32.max)
        else { return nil }
        let total = header.recordLength
        if resync { resyncBudgetBytes -= total }
        // The whole record (reading on if needed: `bytes` is not valid after this).
        guard let raw = try window.bytes(at: pos, count: total), RecordHeader.checksumHolds(raw, salt: salt) else {
            return nil
        }
        if let after, header.sequence <= after { return nil }
        let frame = UnsafeRawBufferPointer(rebasing: raw[Format.recordHeaderSize..<total])
        guard let body = decoder.decompress(frame, limit: Format.maximumBodyBytes) else { return nil }
        return ((header: header, offset: pos), body)
    }

    /// A short description of why the bytes at `pos` are not a record.
    private func reason(at pos: Int) throws -> String {
        let left = window.size - pos
        if try window.isZero(from: pos) { return "zero-filled" }
        guard let header = try window.bytes(at: pos, count: Format.recordHeaderSize) else {
            return "incomplete record header"
        }
        if header.loadLE(UInt32.self, at: 0) != Format.recordMagic { return "no record header" }
        let frameLength = Int(header.loadLE(UInt32.self, at: 12))
        if frameLength > left - Format.recordHeaderSize { return "incomplete record" }
        return "checksum mismatch"
    }
}
