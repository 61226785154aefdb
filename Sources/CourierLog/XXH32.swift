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
