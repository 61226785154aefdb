@testable @_spi(CourierTesting) import CourierKit
import Foundation
import Testing

/// The pool behind message ids and the default jitter source.
@Suite struct RandomPoolTests {
    @Test func theDefaultJitterSourceDrawsDistinctWordsAcrossRefills() {
        let random = Courier.Configuration().random
        // 2,000 draws span four refills of the 512-word pool; a repeat among 2,000 random 64-bit
        // words has a chance of about 1 in 10^13, and a pool that handed out zeroed (used) words
        // or the same word twice would repeat at once.
        let words = (0..<2_000).map { _ in random() }
        #expect(Set(words).count == words.count)
        #expect(!words.contains(0))
    }

    @Test func wordsAndIdsNeverShareBytes() {
        var pool = RandomPool()
        var seen = Set<UInt64>()
        // Alternating draws of both kinds, over more than one refill.
        for _ in 0..<400 {
            let word = pool.takeWord()
            let id = pool.take16()
            let halves = withUnsafeBytes(of: id) {
                ($0.load(as: UInt64.self), $0.load(fromByteOffset: 8, as: UInt64.self))
            }
            for value in [word, halves.0, halves.1] {
                #expect(seen.insert(value).inserted, "a random word was handed out twice")
            }
        }
    }
}
