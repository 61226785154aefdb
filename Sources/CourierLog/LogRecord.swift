/// Where one record lies: its sequence number (which also names its segment, the last one
/// starting at or below it), the offset of its header in that segment, and its length on disk
/// (header + LZ4 frame). The log's one location type: the writer returns it from `append`,
/// the reader puts it on every record, and `WriteAheadLog.read(_:)` takes it back. It is what
/// a caller keeps in memory instead of the record: 16 bytes.
public struct RecordAddress: Sendable, Hashable, CustomStringConvertible {
    /// The record's sequence number.
    public var sequence: UInt64
    /// Offset of the record's header in its segment. A record lies within the first 4 GiB of
    /// its segment, or it is not valid (`Format.maximumSegmentBytes` is 1 GiB).
    public var offset: UInt32
    /// Header plus LZ4 frame, in bytes.
    public var length: UInt32

    /// An address.
    public init(sequence: UInt64, offset: UInt32, length: UInt32) {
        self.sequence = sequence
        self.offset = offset
        self.length = length
    }

    /// The offset just past the record.
    public var end: Int { Int(offset) + Int(length) }

    public var description: String { "#\(sequence)@\(offset)+\(length)" }
}

/// One record as read back from the log.
public struct LogRecord: Sendable, Equatable {
    /// Its kind (opaque to the log).
    public var kind: RecordKind
    /// Its flags (batch boundaries).
    public var flags: RecordFlags
    /// Wall time it was appended, in ms since 1970.
    public var timestampMilliseconds: UInt64
    /// Its body, decompressed and checksum-verified.
    public var body: [UInt8]
    /// The file name of the segment it lies in.
    public var segment: String
    /// Where it lies in that segment.
    public var address: RecordAddress
    /// The record's sequence number (dense, increasing).
    public var sequence: UInt64 { address.sequence }
}

/// One record as the reader passes it to a visitor: the header's fields, and the body in the
/// reader's reusable buffer. `body` is valid only during the visit; `record()` copies it out.
public struct RecordView {
    /// Its kind.
    public var kind: RecordKind
    /// Its flags.
    public var flags: RecordFlags
    /// Wall time it was appended, in ms since 1970.
    public var timestampMilliseconds: UInt64
    /// The file name of the segment it lies in.
    public var segment: String
    /// Where it lies in that segment.
    public var address: RecordAddress
    /// Its body, valid only during the visit.
    public var body: UnsafeRawBufferPointer
    /// The record's sequence number.
    public var sequence: UInt64 { address.sequence }

    /// An owned copy.
    public func record() -> LogRecord {
        LogRecord(
            kind: kind, flags: flags, timestampMilliseconds: timestampMilliseconds, body: Array(body),
            segment: segment, address: address)
    }
}

/// A run of bytes that is not a valid record. `reason` is for people.
public struct DamagedSpan: Sendable, Hashable, CustomStringConvertible {
    /// The segment's file name.
    public var segment: String
    /// Where the damage starts.
    public var offset: Int
    /// How many bytes were skipped.
    public var length: Int
    /// What was wrong, in words for people.
    public var reason: String

    /// A damaged span.
    public init(segment: String, offset: Int, length: Int, reason: String) {
        self.segment = segment
        self.offset = offset
        self.length = length
        self.reason = reason
    }

    public var description: String { "\(segment) offset \(offset) length \(length): \(reason)" }
}

/// Segment file names: the first sequence number, 16 decimal digits, then `.wal`, so that
/// names sort in log order.
public enum SegmentName {
    /// The file name of the segment whose first record is `firstSequence`.
    public static func make(firstSequence: UInt64) -> String {
        let digits = String(firstSequence)
        return String(repeating: "0", count: max(0, Format.segmentNameDigits - digits.count)) + digits
            + Format.segmentSuffix
    }

    /// The first sequence number a segment name declares, or nil if it is not a segment name.
    public static func parse(_ name: String) -> UInt64? {
        guard name.hasSuffix(Format.segmentSuffix) else { return nil }
        let stem = name.dropLast(Format.segmentSuffix.count)
        guard stem.count == Format.segmentNameDigits, stem.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt64(stem)
    }
}

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

/// One record's bytes (the layout in `Format`): what the log's appends and an outbox file's
/// appends (`OutboxFile`) both write, so every reader checks them the same way.
enum RecordEncoding {
    /// Appends the record of `body` to `scratch` with its CRC left zero (it depends on the salt
    /// of the segment it lands in: `seal`). Returns where the record starts.
    @discardableResult
    static func append(
        _ body: [UInt8], kind: RecordKind, sequence: UInt64, timestampMilliseconds: UInt64, flags: RecordFlags,
        encoder: LZ4Encoder, to scratch: inout [UInt8]
    ) -> Int {
        let start = scratch.count
        scratch.append(contentsOf: zeroHeader)
        let frameLength = body.withUnsafeBytes { encoder.compress($0, appendingTo: &scratch) }
        scratch.storeLE(Format.recordMagic, at: start)
        scratch.storeLE(Format.recordFrameSize, at: start + 4)
        scratch.storeLE(UInt32(frameLength), at: start + 12)
        scratch.storeLE(sequence, at: start + 16)
        scratch.storeLE(timestampMilliseconds, at: start + 24)
        scratch[start + 32] = kind.rawValue
        scratch[start + 33] = flags.rawValue
        return start
    }

    /// Fills in the CRC of each record of `scratch` starting at `starts` (in order), seeded
    /// with `salt`.
    static func seal(_ scratch: inout [UInt8], starts: [Int], salt: UInt32) {
        let total = scratch.count
        scratch.withUnsafeMutableBytes { raw in
            for (i, start) in starts.enumerated() {
                let end = i + 1 < starts.count ? starts[i + 1] : total
                let crc = CRC32C.extend(salt, UnsafeRawBufferPointer(rebasing: raw[(start + 12)..<end]))
                raw.storeBytes(of: CRC32C.mask(crc).littleEndian, toByteOffset: start + 8, as: UInt32.self)
            }
        }
    }

    private static let zeroHeader = [UInt8](repeating: 0, count: Format.recordHeaderSize)
}
