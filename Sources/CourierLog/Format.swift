/// The on-disk format, byte for byte. ARCHITECTURE.md has the same tables with a worked hex
/// example; this file is the single source of the numbers.
///
/// A segment is a sequence of LZ4 frames, so the stock `lz4 -dc` decodes a whole segment (it
/// prints the record bodies and skips everything else):
///
///     segment header   skippable frame, magic 0x184D2A5E, 40 bytes
///     record header    skippable frame, magic 0x184D2A50, 36 bytes  ┐ one record,
///     record body      standard LZ4 frame (content size + checksum) ┘ repeated
///
/// Segment header (40 bytes):
///
///     0  u32 magic 0x184D2A5E      4 u32 frame size = 32     8 [4] tag "CWAL"
///     12 u16 format version = 1   14 u16 reserved = 0       16 u32 salt
///     20 u64 first sequence       28 u64 created, ms since 1970
///     36 u32 masked CRC32C (seed 0) of bytes 0..<36
///
/// Record header (36 bytes), followed by `length` bytes of LZ4 frame:
///
///     0  u32 magic 0x184D2A50      4 u32 frame size = 28
///     8  u32 masked CRC32C, seeded with the segment's salt, of bytes 12..<36+length
///     12 u32 length of the LZ4 frame that follows
///     16 u64 sequence number      24 u64 timestamp, ms since 1970
///     32 u8 kind                  33 u8 flags (bit 0: last record of a batch)
///     34 u16 reserved = 0
///
/// All integers are little-endian. The salt is random per segment, so a record can only verify
/// inside the segment it was written to (stale bytes from an old file never pass as a record).
public enum Format {
    /// The format version in every segment header.
    public static let version: UInt16 = 1
    /// First four bytes of a segment (an LZ4 skippable-frame magic, so `lz4` tools skip headers).
    public static let segmentMagic: UInt32 = 0x184D_2A5E
    /// First four bytes of every record header (also a skippable-frame magic).
    public static let recordMagic: UInt32 = 0x184D_2A50
    /// "CWAL": names the format inside the segment header.
    public static let tag: [UInt8] = Array("CWAL".utf8)
    /// Bytes of a segment header.
    public static let segmentHeaderSize = 40
    /// Bytes of a record header (before its LZ4 frame).
    public static let recordHeaderSize = 36
    static let segmentFrameSize: UInt32 = 32
    static let recordFrameSize: UInt32 = 28
    /// The smallest LZ4 frame the writer makes, an empty body's: magic 4, descriptor 2,
    /// header checksum 1, end mark 4, content checksum 4 (no content size: liblz4 omits it
    /// for 0, which it reads as "unknown").
    static let minimumBodyFrameSize = 15
    /// Frame bytes around a non-empty body's blocks: the above plus the 8-byte content size.
    static let bodyFrameOverhead = 23
    /// Suffix of segment files; names are the first sequence number, 16 decimal digits.
    public static let segmentSuffix = ".wal"
    /// The next segment's file while it waits, empty, for the roll that renames it into place
    /// (`WriteAheadLog.SegmentPreparation`). Not a `.wal` name: readers never see it, and
    /// opening removes one left behind.
    public static let spareSegmentName = "next-segment.spare"
    /// Suffix of the copy kept of a torn tail cut at open.
    public static let tornSuffix = ".torn"
    /// The lock file held (`flock`) while a log is open.
    public static let lockFileName = "LOCK"
    static let segmentNameDigits = 16

    // MARK: Limits of a valid record
    //
    // These belong to the format, not to a run's settings: the run that reads a log may use
    // other settings than the run that wrote it, and recovery must never call a record
    // invalid that the writer accepted (that would cut acknowledged data away as a "torn
    // tail"). The writer refuses, before writing anything, every record these reject.

    /// The largest body a record may hold, in bytes, before compression: 64 MiB. Readers
    /// reject larger declared sizes without allocating, so crafted input cannot exhaust memory.
    public static let maximumBodyBytes = 64 << 20
    /// The smallest segment size a writer may be configured with: 4 KiB.
    public static let minimumSegmentBytes = 4096
    /// The largest segment size a writer may be configured with: 1 GiB (a segment's offsets
    /// and a record's frame length must stay far inside 32 bits).
    public static let maximumSegmentBytes = 1 << 30

    /// The bytes a record of `bodyBytes` takes on disk (header + LZ4 frame) in the worst case,
    /// an incompressible body: LZ4 then stores each 64 KiB block raw, with a 4-byte header.
    public static func worstCaseRecordBytes(bodyBytes: Int) -> Int {
        let blocks = max(1, (bodyBytes + 65_535) / 65_536)
        return recordHeaderSize + bodyFrameOverhead + 4 * blocks + bodyBytes
    }
}

/// Flags of a record header.
public struct RecordFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The last record of a batch appended in one call. Recovery treats trailing records without
    /// it as a torn write, so a batch is all-or-nothing across a crash.
    public static let batchEnd = RecordFlags(rawValue: 1)
}

/// Decoded segment header.
public struct SegmentHeader: Sendable, Equatable {
    /// The format version.
    public var version: UInt16
    /// A random value per segment, mixed into record checksums so a stale record from a reused file never validates.
    public var salt: UInt32
    /// The sequence number of the segment's first record.
    public var firstSequence: UInt64
    /// Wall time the segment was created, in ms since 1970.
    public var createdMilliseconds: UInt64

    /// A header with these fields.
    public init(version: UInt16 = Format.version, salt: UInt32, firstSequence: UInt64, createdMilliseconds: UInt64) {
        self.version = version
        self.salt = salt
        self.firstSequence = firstSequence
        self.createdMilliseconds = createdMilliseconds
    }

    /// The header's bytes, checksum included.
    public func encoded() -> [UInt8] {
        var b = [UInt8]()
        b.reserveCapacity(Format.segmentHeaderSize)
        b.appendLE(Format.segmentMagic)
        b.appendLE(Format.segmentFrameSize)
        b.append(contentsOf: Format.tag)
        b.appendLE(version)
        b.appendLE(UInt16(0))
        b.appendLE(salt)
        b.appendLE(firstSequence)
        b.appendLE(createdMilliseconds)
        b.appendLE(CRC32C.mask(CRC32C.checksum(b)))
        assert(b.count == Format.segmentHeaderSize)
        return b
    }

    /// Why the header in `bytes` (`Format.segmentHeaderSize` of them) is rejected, in the words
    /// reports print (`badMagic`, `badChecksum`, `unsupportedVersion(N)`), or nil if it is valid.
    static func problem(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard bytes.loadLE(UInt32.self, at: 0) == Format.segmentMagic,
            bytes.loadLE(UInt32.self, at: 4) == Format.segmentFrameSize,
            Array(bytes[8..<12]) == Format.tag
        else { return "badMagic" }
        let stored = bytes.loadLE(UInt32.self, at: 36)
        let actual = CRC32C.extend(0, UnsafeRawBufferPointer(rebasing: bytes[0..<36]))
        guard CRC32C.unmask(stored) == actual else { return "badChecksum" }
        let version = bytes.loadLE(UInt16.self, at: 12)
        return version == Format.version ? nil : "unsupportedVersion(\(version))"
    }

    /// The fields as stored, checksum unchecked: used to salvage a segment whose header is
    /// damaged (if the salt bytes survived, its records still verify).
    static func fields(_ bytes: UnsafeRawBufferPointer) -> SegmentHeader {
        SegmentHeader(
            version: bytes.loadLE(UInt16.self, at: 12),
            salt: bytes.loadLE(UInt32.self, at: 16),
            firstSequence: bytes.loadLE(UInt64.self, at: 20),
            createdMilliseconds: bytes.loadLE(UInt64.self, at: 28)
        )
    }
}

/// Little-endian field access for the on-disk format. All integers on disk are little-endian.
extension Array where Element == UInt8 {
    @inline(__always) mutating func appendLE<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    @inline(__always) mutating func storeLE<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self) }
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always) func loadLE<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

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

/// One record as the reader passes it to a visitor: the header's fields, and the body in a
/// buffer of the reader's. `body` is valid only during the visit; `record()` copies it out.
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
    /// of the segment it lands in: `seal`). Returns where the record lies in `scratch`.
    static func append(
        _ body: [UInt8], kind: RecordKind, sequence: UInt64, timestampMilliseconds: UInt64, flags: RecordFlags,
        encoder: LZ4Encoder, to scratch: inout [UInt8]
    ) -> Range<Int> {
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
        return start..<scratch.count
    }

    /// Fills in the CRC of each record of `scratch` at `records` (in order), seeded with `salt`.
    static func seal(_ scratch: inout [UInt8], _ records: [Range<Int>], salt: UInt32) {
        scratch.withUnsafeMutableBytes { raw in
            for record in records {
                let crc = CRC32C.extend(salt, UnsafeRawBufferPointer(rebasing: raw[record].dropFirst(12)))
                raw.storeBytes(of: CRC32C.mask(crc).littleEndian, toByteOffset: record.lowerBound + 8, as: UInt32.self)
            }
        }
    }

    private static let zeroHeader = [UInt8](repeating: 0, count: Format.recordHeaderSize)
}
