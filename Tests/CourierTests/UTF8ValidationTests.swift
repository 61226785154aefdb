@testable @_spi(CourierTesting) import CourierKit
import CourierLogTesting
import Testing

/// `isWellFormedUTF8`, which replay, the sample's key decoder and wal-dump use where Swift 6's
/// `String(validating:as:)` cannot go (it is iOS 18+, Courier is iOS 16+), agrees with that
/// initializer, which Linux has, on every edge of the encoding and on random bytes.
@Suite struct UTF8ValidationTests {
    static func standardLibrarySays(_ bytes: [UInt8]) -> Bool {
        String(validating: bytes, as: UTF8.self) != nil
    }

    @Test(arguments: [
        [], [0x41], [0x7F], [0xC3, 0xA9], [0xE6, 0x97, 0xA5], [0xF0, 0x9F, 0x99, 0x82], [0xF4, 0x8F, 0xBF, 0xBF],
        [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xF0, 0x80, 0x80, 0x80],  // stray, overlong
        [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],  // surrogates
        [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF],  // past U+10FFFF
        [0xE2, 0x82], [0x41, 0xF0, 0x9F, 0x99],  // cut short
    ] as [[UInt8]])
    func agreesWithTheStandardLibraryOnEveryEdge(_ bytes: [UInt8]) {
        #expect(isWellFormedUTF8(bytes) == Self.standardLibrarySays(bytes), "bytes \(bytes)")
    }

    @Test func agreesWithTheStandardLibraryOnRandomBytes() {
        var rng = SeededRandom(seed: 23)
        var malformed = 0
        for _ in 0..<20_000 {
            // Mostly text-like bytes, so that both answers occur often.
            let bytes = (0..<Int.random(in: 0...12, using: &rng)).map { _ -> UInt8 in
                Bool.random(using: &rng)
                    ? UInt8.random(in: 0x20...0x7E, using: &rng) : UInt8.random(in: 0x80...0xFF, using: &rng)
            }
            let expected = Self.standardLibrarySays(bytes)
            if !expected { malformed += 1 }
            #expect(isWellFormedUTF8(bytes) == expected, "bytes \(bytes)")
        }
        #expect(malformed > 1_000 && malformed < 19_000, "both answers were tried")
    }

    @Test func aStoredStringThatIsNotUTF8IsRejectedByTheReader() {
        var writer = ByteWriter()
        writer.u16(2)
        writer.bytes += [0xC0, 0x80]
        writer.bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            #expect(reader.string() == nil)
        }
    }
}
