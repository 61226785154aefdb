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

    /// Why a header was rejected.
    enum Problem: Error { case short, badMagic, badChecksum, unsupportedVersion(UInt16) }

    /// Decodes and verifies the header at the start of `bytes`.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentHeader, Problem> {
        guard bytes.count >= Format.segmentHeaderSize else { return .failure(.short) }
        guard bytes.loadLE(UInt32.self, at: 0) == Format.segmentMagic,
            bytes.loadLE(UInt32.self, at: 4) == Format.segmentFrameSize,
            Array(bytes[8..<12]) == Format.tag
        else { return .failure(.badMagic) }
        let stored = bytes.loadLE(UInt32.self, at: 36)
        let actual = CRC32C.extend(0, UnsafeRawBufferPointer(rebasing: bytes[0..<36]))
        guard CRC32C.unmask(stored) == actual else { return .failure(.badChecksum) }
        let header = fields(bytes)
        guard header.version == Format.version else { return .failure(.unsupportedVersion(header.version)) }
        return .success(header)
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
