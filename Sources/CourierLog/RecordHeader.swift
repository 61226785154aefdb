/// A record's 36-byte header (`Format`), and the one place that decides whether bytes are a
/// record: the scanner (recovery, replay, `LogReader`, `wal-dump`) and the read by address
/// (`WriteAheadLog.read`) both call `parse` and `checksumHolds`, so they accept exactly the same
/// records.
struct RecordHeader {
    /// Bytes of the LZ4 frame after the header.
    var frameLength: Int
    var sequence: UInt64
    var timestampMilliseconds: UInt64
    var kind: RecordKind
    var flags: RecordFlags

    /// Bytes of the whole record, header and frame.
    var recordLength: Int { Format.recordHeaderSize + frameLength }

    /// The header at the start of `raw` (at least `Format.recordHeaderSize` bytes), if its
    /// fixed fields are right: the record magic, the frame size, reserved bytes zero, and a
    /// frame no shorter than the smallest one the writer makes. The checksum is not checked
    /// here: it covers the frame too (`checksumHolds`).
    static func parse(_ raw: UnsafeRawBufferPointer) -> RecordHeader? {
        guard raw.count >= Format.recordHeaderSize,
            raw.loadLE(UInt32.self, at: 0) == Format.recordMagic,
            raw.loadLE(UInt32.self, at: 4) == Format.recordFrameSize,
            raw.loadLE(UInt16.self, at: 34) == 0
        else { return nil }
        let frameLength = Int(raw.loadLE(UInt32.self, at: 12))
        guard frameLength >= Format.minimumBodyFrameSize else { return nil }
        return RecordHeader(
            frameLength: frameLength, sequence: raw.loadLE(UInt64.self, at: 16),
            timestampMilliseconds: raw.loadLE(UInt64.self, at: 24), kind: RecordKind(rawValue: raw[32]),
            flags: RecordFlags(rawValue: raw[33]))
    }

    /// Whether the masked CRC32C in `record` (header and frame, exactly `recordLength` bytes)
    /// matches bytes 12 onwards, seeded with the segment's `salt`: a record verifies only in
    /// the segment it was written to.
    static func checksumHolds(_ record: UnsafeRawBufferPointer, salt: UInt32) -> Bool {
        let covered = UnsafeRawBufferPointer(rebasing: record[12...])
        return CRC32C.unmask(record.loadLE(UInt32.self, at: 8)) == CRC32C.extend(salt, covered)
    }
}
