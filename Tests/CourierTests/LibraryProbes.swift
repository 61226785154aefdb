@testable @_spi(CourierTesting) import CourierKit
import CourierLog

// What only the tests read of the library's internals: kept here, not in the library, which
// never asks. Each reads state the library keeps for its own work.

extension InternTable {
    /// Keys interned now (`URLTable`: distinct URLs).
    var count: Int { indexByKey.count }
}

#if canImport(Observation)
@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
extension CourierModel {
    /// Whether it has read the courier's state once (tests: what happens after it is seen).
    var hasLoadedForTesting: Bool { board.hasLoaded }
}
#endif
