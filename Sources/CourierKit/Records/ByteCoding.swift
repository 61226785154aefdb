import Foundation

/// Little-endian writer and bounds-checked reader for event bodies. The reader returns nil on
/// any short or malformed field instead of trapping: bodies come from disk.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { bytes.append(UInt8(v & 0xFF)); bytes.append(UInt8(v >> 8)) }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func raw(_ b: [UInt8]) { bytes += b }
    mutating func id(_ id: MessageID) { withUnsafeBytes(of: id.uuid) { bytes.append(contentsOf: $0) } }
    /// A string of at most 65,535 UTF-8 bytes (callers validate lengths first).
    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            let count = min(utf8.count, Int(UInt16.max))
            u16(UInt16(count))
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[..<count]))
        }
    }
    mutating func blob(_ b: [UInt8]) {
        u32(UInt32(b.count))
        bytes += b
    }
}

/// Reads fields from a body in place (the caller keeps the bytes alive). Every accessor
/// returns nil instead of reading past the end.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func take(_ n: Int) -> UnsafeRawBufferPointer? {
        guard n >= 0, n <= bytes.count - offset else { return nil }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)])
    }

    mutating func u8() -> UInt8? { take(1)?.first }
    mutating func u16() -> UInt16? { take(2).map { $0.loadUnaligned(as: UInt16.self).littleEndian } }
    mutating func u32() -> UInt32? { take(4).map { $0.loadUnaligned(as: UInt32.self).littleEndian } }
    mutating func u64() -> UInt64? { take(8).map { $0.loadUnaligned(as: UInt64.self).littleEndian } }

    /// A string's UTF-8 bytes, checked to be valid UTF-8, without making a `String`.
    mutating func utf8() -> UnsafeRawBufferPointer? {
        guard let n = u16(), let b = take(Int(n)), isWellFormedUTF8(b) else { return nil }
        return b
    }

    mutating func string() -> String? {
        utf8().map { String(decoding: $0, as: UTF8.self) }
    }

    /// A blob's bytes, in place.
    mutating func blobBytes() -> UnsafeRawBufferPointer? {
        guard let n = u32() else { return nil }
        return take(Int(n))
    }

    mutating func id() -> MessageID? {
        guard let b = take(16) else { return nil }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: b) }
        return MessageID(UUID(uuid: uuid))
    }
}

/// Whether `bytes` are well-formed UTF-8: no stray continuation byte, overlong form, surrogate
/// or value past U+10FFFF. (`String(validating:as:)` answers the same from iOS 18 and macOS 15
/// on; Courier runs from iOS 16, and replay reads every stored string through this.)
package func isWellFormedUTF8<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
    // ASCII (nearly always) is well-formed: check that first, cheaply.
    if bytes.allSatisfy({ $0 < 0x80 }) { return true }
    var iterator = bytes.makeIterator()
    var decoder = Unicode.UTF8()
    // Each turn consumes at least one byte, so count + 1 turns reach the end.
    for _ in 0...bytes.count {
        switch decoder.decode(&iterator) {
        case .scalarValue: continue
        case .emptyInput: return true
        case .error: return false
        }
    }
    preconditionFailure("a UTF-8 decoder consumed no byte")
}
