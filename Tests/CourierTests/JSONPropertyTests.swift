@testable @_spi(CourierTesting) import CourierKit
import CourierLogTesting
import Foundation
import Testing

/// `send`'s JSON writer on random nested values: what it accepts, Foundation reads back as
/// the same value; what JSON cannot hold (NaN, infinities, dates, data, other types, nesting
/// past the limit) is a typed `.invalidJSON` error naming the path, never a trap or a stack
/// overflow. Seeded, so a failure names the seed that reproduces it.
@Suite struct JSONPropertyTests {
    /// Strings that stress escaping and UTF-8: controls, quotes, backslashes, astral scalars.
    static let pieces = [
        "", "a", "\"", "\\", "\n\r\t", "\u{0}\u{1}\u{1F}", "é", "日本語",
        "🙂👩‍👩‍👧", "\u{7F}", "/", "\u{2028}",
    ]

    struct Generator {
        var rng: SeededRandom
        /// Whether this value may contain something JSON cannot hold.
        var poison: Bool
        var poisoned = false

        mutating func string() -> String {
            let count = Int.random(in: 0...6, using: &rng)
            var s = (0..<count).map { _ in JSONPropertyTests.pieces.randomElement(using: &rng)! }.joined()
            if Int.random(in: 0..<50, using: &rng) == 0 { s += String(repeating: "x", count: 70_000) }  // huge
            return s
        }

        /// A dictionary; a key drawn twice is skipped, so every value made is in the result.
        mutating func object(depth: Int) -> [String: Any] {
            var d: [String: Any] = [:]
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                let key = string()
                if d[key] == nil { d[key] = value(depth: depth) }
            }
            return d
        }

        mutating func value(depth: Int) -> Any {
            let roll = Int.random(in: 0..<(depth > 6 ? 7 : 10), using: &rng)
            if poison, !poisoned, Int.random(in: 0..<20, using: &rng) == 0 {
                poisoned = true
                return [
                    Double.nan, Double.infinity, -Double.infinity, Date(), Data([1]), NSObject(),
                    URL(string: "https://x")!,
                ]
                    .randomElement(using: &rng)!
            }
            switch roll {
            case 0: return string()
            // What a double holds exactly: Foundation reads larger ones as doubles.
            case 1: return Int.random(in: -(1 << 53)...(1 << 53), using: &rng)
            case 2: return Double.random(in: -1e300...1e300, using: &rng)
            case 3: return Bool.random(using: &rng)
            case 4: return NSNull()
            case 5: return Int.random(in: -1000...1000, using: &rng)
            case 6: return string()
            case 7, 8: return (0..<Int.random(in: 0...4, using: &rng)).map { _ in value(depth: depth + 1) }
            default:
                return object(depth: depth + 1)
            }
        }
    }

    @Test(arguments: 0..<8)
    func acceptedValuesReadBackAndRefusedOnesAreTypedErrors(seed: UInt64) throws {
        var generator = Generator(rng: SeededRandom(seed: 0x1503_0000 + seed), poison: seed % 2 == 1)
        for round in 0..<250 {
            generator.poisoned = false
            let object = generator.object(depth: 1)
            let result = Result { () throws(CourierError) in try JSONBody.serialize(object) }
            switch result {
            case .success(let bytes):
                #expect(!generator.poisoned, "seed \(seed) round \(round): a value JSON cannot hold was written")
                // Foundation parses it, and writing what it parsed gives the same bytes.
                let back = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
                let again = Result { () throws(CourierError) in try JSONBody.serialize(back) }
                let rewritten = (try? again.get()) ?? []
                if rewritten != bytes {
                    let at = zip(rewritten, bytes).prefix { $0 == $1 }.count
                    Issue.record("""
                        seed \(seed) round \(round): Foundation read back something else at byte \(at): \
                        wrote …\(String(decoding: bytes.dropFirst(max(0, at - 30)).prefix(60), as: UTF8.self)), \
                        read back …\(String(decoding: rewritten.dropFirst(max(0, at - 30)).prefix(60), as: UTF8.self))
                        """)
                }
            case .failure(let error):
                #expect(generator.poisoned, "seed \(seed) round \(round): refused a valid value: \(error)")
                #expect(error.code == .invalidJSON && error.message.contains("$"), "the error names the path: \(error)")
            }
        }
    }

    @Test func nestingFarPastTheLimitIsATypedErrorNotAStackOverflow() {
        var deep: Any = "bottom"
        for i in 0..<5_000 { deep = i % 2 == 0 ? [deep] as [Any] : ["k": deep] as [String: Any] }
        let result = Result { () throws(CourierError) in try JSONBody.serialize(["deep": deep]) }
        guard case .failure(let error) = result else {
            Issue.record("5,000 levels were written")
            return
        }
        #expect(error.code == .invalidJSON && error.message.contains("deeper than \(JSONWriter.maximumDepth)"))
    }
}
