import CCRC32C

/// CRC-32C (Castagnoli): the CPU's instruction where there is one (SSE4.2, ARMv8 CRC), else a
/// slicing-by-8 table in Swift, several times slower and still cheaper than the record's LZ4
/// encode (figures: Courier's "Measured figures" article, `wal-bench`).
public enum CRC32C {
    /// Whether the hardware path is in use (decided once per process).
    public static let usesHardware = courier_crc32c_hardware_available() == 1

    /// Extends `crc` (a running, *unmasked* value; start with a seed or 0) over `bytes`.
    @inline(__always)
    public static func extend(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        if usesHardware, let base = bytes.baseAddress {
            return courier_crc32c_hardware(crc, base, bytes.count)
        }
        return software(crc, bytes)
    }

    /// The portable table version; `extend` uses it where there is no instruction.
    public static func software(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c = ~crc
        var i = 0
        let n = bytes.count
        Tables.shared.withUnsafeBufferPointer { t in
            while n - i >= 8 {
                let lo = bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self).littleEndian ^ c
                let hi = bytes.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self).littleEndian
                c =
                    t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                    ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((hi >> 16) & 0xFF)] ^ t[Int(hi >> 24)]
                i += 8
            }
            while i < n {
                c = t[Int((c ^ UInt32(bytes[i])) & 0xFF)] ^ (c >> 8)
                i += 1
            }
        }
        return ~c
    }

    /// The CRC-32C (Castagnoli) of `bytes`, continuing from `seed`.
    public static func checksum(_ bytes: [UInt8], seed: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { extend(seed, $0) }
    }

    /// leveldb's mask: a CRC stored next to data that itself contains CRCs (a log of logs, a
    /// record that embeds a checksum) must not be confused with one, so stored values are rotated
    /// and offset.
    public static func mask(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ 0xA282_EAD8
    }

    /// Undoes `mask`: the CRC as computed, before masking.
    public static func unmask(_ masked: UInt32) -> UInt32 {
        let rot = masked &- 0xA282_EAD8
        return (rot >> 17) | (rot << 15)
    }

    enum Tables {
        /// 8 × 256 entries, table k advancing the CRC over k further zero bytes.
        static let shared: [UInt32] = {
            let poly: UInt32 = 0x82F6_3B78  // Castagnoli, reflected
            var t = [UInt32](repeating: 0, count: 8 * 256)
            for i in 0..<256 {
                var c = UInt32(i)
                for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ poly : c >> 1 }
                t[i] = c
            }
            for k in 1..<8 {
                for i in 0..<256 {
                    let prev = t[(k - 1) * 256 + i]
                    t[k * 256 + i] = t[Int(prev & 0xFF)] ^ (prev >> 8)
                }
            }
            return t
        }()
    }
}
