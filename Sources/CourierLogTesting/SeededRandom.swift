import CourierLog

/// A deterministic random source for reproducible tests: same seed, same run. It is the log's
/// `SplitMix64`, the package's one seeded generator, under the name the tests know.
public typealias SeededRandom = SplitMix64
