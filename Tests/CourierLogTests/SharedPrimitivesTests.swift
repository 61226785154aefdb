import CourierLog
import CourierLogTesting
import Foundation
import Testing

/// The package's one lock box and one seeded generator, which every target shares.
@Suite struct SharedPrimitivesTests {
    @Test func splitMix64GivesTheReferenceSequence() {
        // The first outputs for seed 0 of the reference implementation (Vigna, splitmix64.c).
        var generator = SplitMix64(seed: 0)
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
        #expect(generator.next() == 0x06C4_5D18_8009_454F)
    }

    @Test func theSameSeedGivesTheSameUnitsInZeroToOne() {
        var a = SplitMix64(seed: 42), b = SeededRandom(seed: 42)
        for _ in 0..<1_000 {
            let unit = a.nextUnit()
            #expect(unit == b.nextUnit())
            #expect(unit >= 0 && unit < 1)
        }
    }

    @Test func lockedLosesNoUpdateUnderContention() {
        let counter = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 { counter.withLock { $0 += 1 } }
        }
        #expect(counter.value == 80_000)
    }

    @Test func lockedKeepsATypedErrorAndChangesNothingAfterIt() {
        struct Refused: Error {}
        let box = Locked([1])
        #expect(throws: Refused.self) {
            try box.withLock { (values: inout [Int]) throws(Refused) in throw Refused() }
        }
        #expect(box.value == [1])
        #expect(box.withLock { $0.append(2); return $0.count } == 2)
    }

    @Test func aLockKnowsItIsHeldOnlyByItsHolderAndOnlyInside() async {
        let box = Locked(0)
        #expect(!box.isHeldByCurrentThread)
        let inside = box.withLock { _ in box.isHeldByCurrentThread }
        #expect(inside)
        #expect(!box.isHeldByCurrentThread)
        let other = Locked(0)
        let nested = box.withLock { _ in
            other.withLock { _ in (box.isHeldByCurrentThread, other.isHeldByCurrentThread) }
        }
        #expect(nested == (true, true))
        // Another thread (a real one: `DispatchQueue.sync` may run its block on this thread).
        let seenElsewhere = Locked<Bool?>(nil)
        box.withLock { _ in
            let done = DispatchSemaphore(value: 0)
            Thread {
                let held = box.isHeldByCurrentThread
                seenElsewhere.withLock { $0 = held }
                done.signal()
            }.start()
            done.wait()
        }
        #expect(seenElsewhere.value == false)
    }
}
