@_spi(CourierTesting) import CourierKit

/// What tests of an app's own code need from a `Courier`, without `@testable import`.
extension Courier {
    /// Returns once the engine has nothing runnable: no attempt in flight and no timer past its
    /// deadline. With a `ManualClock`, `await clock.advance(by:)` then `await courier.settle()`
    /// makes every step of the engine observable without sleeping.
    public func settle() async { await settleForTesting() }

    /// How many compactions ran since the courier opened.
    public var compactionCount: Int { compactionCountForTesting }
}
