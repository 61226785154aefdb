/// Where a record's bytes lie: its segment file, the offset of its first header byte, and its
/// length on disk (header + LZ4 frame).
public struct RecordLocation: Sendable, Hashable, CustomStringConvertible {
    /// The segment's file name.
    public var segment: String
    /// Offset of the record header in the segment.
    public var offset: Int
    /// Header plus frame, in bytes.
    public var length: Int

    /// A location.
    public init(segment: String, offset: Int, length: Int) {
        self.segment = segment
        self.offset = offset
        self.length = length
    }

    public var description: String { "\(segment)@\(offset)+\(length)" }
}

/// One record as read back from the log.
public struct LogRecord: Sendable, Equatable {
    /// The record's sequence number (dense, increasing).
    public var sequence: UInt64
    /// Its kind (opaque to the log).
    public var kind: RecordKind
    /// Its flags (batch boundaries).
    public var flags: RecordFlags
    /// Wall time it was appended, in ms since 1970.
    public var timestampMilliseconds: UInt64
    /// Its body, decompressed and checksum-verified.
    public var body: [UInt8]
    /// Where it lies.
    public var location: RecordLocation
}

/// One record as the reader passes it to a visitor: the header's fields, and the body in the
/// reader's reusable buffer. `body` is valid only during the visit; `record()` copies it out.
public struct RecordView {
    /// The record's sequence number.
    public var sequence: UInt64
    /// Its kind.
    public var kind: RecordKind
    /// Its flags.
    public var flags: RecordFlags
    /// Wall time it was appended, in ms since 1970.
    public var timestampMilliseconds: UInt64
    /// Where it lies.
    public var location: RecordLocation
    /// Its body, valid only during the visit.
    public var body: UnsafeRawBufferPointer

    /// Where the record lies, compactly (for `WriteAheadLog.read(_:)`); nil if its offset or
    /// length does not fit 32 bits, which only a segment far over the format's 1 GiB can cause
    /// (damage: the caller treats the record as unreadable instead of trapping).
    public var address: RecordAddress? {
        guard let offset = UInt32(exactly: location.offset), let length = UInt32(exactly: location.length) else {
            return nil
        }
        return RecordAddress(sequence: sequence, offset: offset, length: length)
    }

    /// An owned copy.
    public func record() -> LogRecord {
        LogRecord(
            sequence: sequence, kind: kind, flags: flags, timestampMilliseconds: timestampMilliseconds,
            body: Array(body), location: location)
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
