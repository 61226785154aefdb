/// Where a record's bytes lie: its segment file, the offset of its first header byte, and its
/// length on disk (header + LZ4 frame).
public struct RecordLocation: Sendable, Hashable, CustomStringConvertible {
    public var segment: String
    public var offset: Int
    public var length: Int

    public init(segment: String, offset: Int, length: Int) {
        self.segment = segment
        self.offset = offset
        self.length = length
    }

    public var description: String { "\(segment)@\(offset)+\(length)" }
}

/// One record as read back from the log.
public struct LogRecord: Sendable, Equatable {
    public var sequence: UInt64
    public var kind: RecordKind
    public var flags: RecordFlags
    public var timestampMilliseconds: UInt64
    public var body: [UInt8]
    public var location: RecordLocation
}

/// One record as the reader passes it to a visitor: the header's fields, and the body in the
/// reader's reusable buffer. `body` is valid only during the visit; `record()` copies it out.
public struct RecordView {
    public var sequence: UInt64
    public var kind: RecordKind
    public var flags: RecordFlags
    public var timestampMilliseconds: UInt64
    public var location: RecordLocation
    public var body: UnsafeRawBufferPointer

    /// Where the record lies, compactly (for `WriteAheadLog.read(_:)`); nil if its offset or
    /// length does not fit 32 bits, which only a segment far over the format's 1 GiB can cause
    /// (damage: the caller treats the record as unreadable instead of trapping).
    public var address: RecordAddress? {
        guard let offset = UInt32(exactly: location.offset), let length = UInt32(exactly: location.length) else { return nil }
        return RecordAddress(sequence: sequence, offset: offset, length: length)
    }

    /// An owned copy.
    public func record() -> LogRecord {
        LogRecord(sequence: sequence, kind: kind, flags: flags, timestampMilliseconds: timestampMilliseconds,
                  body: Array(body), location: location)
    }
}

/// A run of bytes that is not a valid record. `reason` is for people.
public struct DamagedSpan: Sendable, Hashable, CustomStringConvertible {
    public var segment: String
    public var offset: Int
    public var length: Int
    public var reason: String

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
