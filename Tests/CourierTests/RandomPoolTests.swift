@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import Foundation
import Testing

/// The pool behind message ids and the default jitter source.
@Suite struct RandomPoolTests {
    @Test func theDefaultJitterSourceDrawsDistinctWords() {
        let random = Courier.Configuration().random
        // A repeat among 2,000 random 64-bit words has a chance of about 1 in 10^13.
        let words = (0..<2_000).map { _ in random() }
        #expect(Set(words).count == words.count)
        #expect(!words.contains(0))
    }

    /// Each thread's jitter generator is seeded on its own from the pool: threads that all
    /// started from one seed would draw the same sequence.
    @Test func eachThreadDrawsItsOwnJitterSequence() {
        let draws = Locked<[[UInt64]]>([])
        let finished = DispatchGroup()
        for _ in 0..<8 {
            finished.enter()
            Thread {
                let mine = (0..<16).map { _ in ThreadJitter.next() }
                draws.withLock { $0.append(mine) }
                finished.leave()
            }.start()
        }
        #expect(finished.wait(timeout: .now() + 10) == .success)
        let all = draws.withLock { $0 }
        #expect(all.count == 8)
        #expect(Set(all.flatMap { $0 }).count == 8 * 16, "no two threads drew the same value")
    }

    @Test func wordsFromThePoolAreNeverHandedOutTwiceAcrossRefills() {
        var pool = RandomPool()
        let words = (0..<2_000).map { _ in pool.takeWord() }
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
