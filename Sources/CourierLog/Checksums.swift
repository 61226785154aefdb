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
        tables.withUnsafeBufferPointer { t in
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

    /// 8 × 256 entries, table k advancing the CRC over k further zero bytes.
    static let tables: [UInt32] = {
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

/// XXH32, the checksum of the LZ4 frame format (header checksum and content checksum), written
/// from its public specification (xxhash_spec.md) because Debian's liblz4 exports no XXH
/// symbols and Apple's Compression framework has none. One-shot over a whole buffer: frames
/// are checksummed whole.
public enum XXH32 {
    static let prime1: UInt32 = 0x9E37_79B1
    static let prime2: UInt32 = 0x85EB_CA77
    static let prime3: UInt32 = 0xC2B2_AE3D
    static let prime4: UInt32 = 0x27D4_EB2F
    static let prime5: UInt32 = 0x1656_67B1

    /// The XXH32 of `bytes` with `seed`.
    public static func digest(_ bytes: [UInt8], seed: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { digest($0, seed: seed) }
    }

    /// The XXH32 of `input` with `seed`.
    public static func digest(_ input: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        let count = input.count
        var p = 0
        var h: UInt32
        if count >= 16 {
            var v1 = seed &+ prime1 &+ prime2
            var v2 = seed &+ prime2
            var v3 = seed
            var v4 = seed &- prime1
            // Each turn consumes 16 bytes: bounded by count / 16.
            while p + 16 <= count {
                v1 = round(v1, input.loadLE(UInt32.self, at: p))
                v2 = round(v2, input.loadLE(UInt32.self, at: p + 4))
                v3 = round(v3, input.loadLE(UInt32.self, at: p + 8))
                v4 = round(v4, input.loadLE(UInt32.self, at: p + 12))
                p += 16
            }
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
        } else {
            h = seed &+ prime5
        }
        h = h &+ UInt32(truncatingIfNeeded: count)
        while p + 4 <= count {
            h = rotl(h &+ input.loadLE(UInt32.self, at: p) &* prime3, 17) &* prime4
            p += 4
        }
        while p < count {
            h = rotl(h &+ UInt32(input[p]) &* prime5, 11) &* prime1
            p += 1
        }
        h ^= h >> 15
        h = h &* prime2
        h ^= h >> 13
        h = h &* prime3
        h ^= h >> 16
        return h
    }

    @inline(__always) private static func round(_ acc: UInt32, _ lane: UInt32) -> UInt32 {
        rotl(acc &+ lane &* prime2, 13) &* prime1
    }

    @inline(__always) private static func rotl(_ x: UInt32, _ r: UInt32) -> UInt32 {
        (x << r) | (x >> (32 - r))
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny, fast, seedable generator whose every seed
/// gives a full-period, well-mixed sequence. The package's one deterministic random source:
/// the engine's jitter drawn from one value (`DestinationBackoff`), the test doubles' seeded
/// sources, the flaky server and the benchmarks' bodies. Not for anything secret.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The generator's whole state: the next value is a mix of it after one step.
    public private(set) var state: UInt64

    /// The same seed gives the same sequence, on every platform.
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits of the next value.
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) / Double(UInt64(1) << 53)
    }
}
