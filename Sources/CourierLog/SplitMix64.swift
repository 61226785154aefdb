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
