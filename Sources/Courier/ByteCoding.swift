/// Little-endian writer and bounds-checked reader for event bodies. The reader returns nil on
/// any short or malformed field instead of trapping: bodies come from disk.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { bytes.append(UInt8(v & 0xFF)); bytes.append(UInt8(v >> 8)) }
    mutating func u32(_ v: UInt32) { for s in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8((v >> UInt32(s)) & 0xFF)) } }
    mutating func u64(_ v: UInt64) { for s in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8((v >> UInt64(s)) & 0xFF)) } }
    mutating func raw(_ b: [UInt8]) { bytes += b }
    /// A string of at most 65,535 UTF-8 bytes (callers validate lengths first).
    mutating func string(_ s: String) {
        let utf8 = Array(s.utf8.prefix(Int(UInt16.max)))
        u16(UInt16(utf8.count))
        bytes += utf8
    }
    mutating func blob(_ b: [UInt8]) {
        u32(UInt32(b.count))
        bytes += b
    }
}

struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func take(_ n: Int) -> ArraySlice<UInt8>? {
        guard n >= 0, n <= bytes.count - offset else { return nil }
        defer { offset += n }
        return bytes[offset..<(offset + n)]
    }

    mutating func u8() -> UInt8? { take(1)?.first }
    mutating func u16() -> UInt16? { take(2).map { UInt16($0[$0.startIndex]) | UInt16($0[$0.startIndex + 1]) << 8 } }
    mutating func u32() -> UInt32? {
        take(4).map { s in s.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << UInt32(8 * $1.offset) } }
    }
    mutating func u64() -> UInt64? {
        take(8).map { s in s.enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << UInt64(8 * $1.offset) } }
    }
    mutating func string() -> String? {
        guard let n = u16(), let b = take(Int(n)) else { return nil }
        return String(validating: b, as: UTF8.self)
    }
    mutating func blob() -> [UInt8]? {
        guard let n = u32(), let b = take(Int(n)) else { return nil }
        return Array(b)
    }
}
