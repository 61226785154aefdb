@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import Foundation
import Testing

/// A message id's text is the `Idempotency-Key` a server dedupes by: it must be exactly the
/// UUID's, in lower case, and ids must sort as their texts do.
@Suite struct MessageIDTests {
    /// Ids from a seeded generator, with the all-zero and all-ones ids (every digit's edges).
    private func ids(_ count: Int) -> [MessageID] {
        var random = SplitMix64(seed: 25)
        var ids = [MessageID(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))]
        ids.append(MessageID(UUID(uuidString: "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF")!))
        for _ in 0..<count {
            var bytes = UUID().uuid
            withUnsafeMutableBytes(of: &bytes) { raw in
                for i in raw.indices { raw[i] = UInt8(truncatingIfNeeded: random.next()) }
            }
            ids.append(MessageID(UUID(uuid: bytes)))
        }
        return ids
    }

    @Test func theTextIsTheLowerCaseUUIDString() {
        for id in ids(2_000) {
            #expect(id.description == id.uuid.uuidString.lowercased())
            #expect(MessageID(id.description) == id)
        }
    }

    @Test func idsSortAsTheirTextsDo() {
        let all = ids(500)
        var random = SplitMix64(seed: 7)
        for (a, b) in zip(all, all.shuffled(using: &random)) {
            #expect((a < b) == (a.description < b.description))
            #expect((b < a) == (b.description < a.description))
        }
        #expect(!(all[0] < all[0]), "an id does not precede itself")
    }

    /// New ids are random: 2,000 of them are distinct, and each is a version 4 UUID.
    @Test func newIdsAreDistinctVersion4UUIDs() {
        let made = (0..<2_000).map { _ in MessageID() }
        #expect(Set(made).count == made.count)
        #expect(made.allSatisfy { $0.description.dropFirst(14).first == "4" })
    }

    @Test func theDefaultJitterSourceDrawsDistinctWords() {
        let random = Courier.Configuration().random
        // A repeat among 2,000 random 64-bit words has a chance of about 1 in 10^13.
        let words = (0..<2_000).map { _ in random() }
        #expect(Set(words).count == words.count)
    }
}
