#if canImport(os)
import os
#endif

/// Intervals for Instruments' *Points of Interest*: opening a courier (the replay), each
/// `send`, and each attempt's request, on Apple platforms (`OSSignposter`, subsystem
/// `CourierKit`). Nothing elsewhere. On Apple platforms an interval costs next to nothing while
/// no trace records it (the signposter checks that first).
enum Signposts {
    #if canImport(os)
    // Why `nonisolated(unsafe)`: `OSSignposter` is made to be used from any thread (Apple's
    // documentation), but the SDK does not mark it `Sendable`. Written once, here.
    nonisolated(unsafe) static let signposter = OSSignposter(subsystem: "CourierKit", category: .pointsOfInterest)
    #endif

    /// Runs `body` inside an interval named `name`.
    static func interval<T, E: Error>(_ name: StaticString, _ body: () throws(E) -> T) throws(E) -> T {
        #if canImport(os)
        let state = signposter.beginInterval(name, id: signposter.makeSignpostID())  // overlapping: own ids
        defer { signposter.endInterval(name, state) }
        #endif
        return try body()
    }

    /// Runs `body` inside an interval named `name`, across its suspensions.
    static func interval<T>(_ name: StaticString, _ body: () async -> T) async -> T {
        #if canImport(os)
        let state = signposter.beginInterval(name, id: signposter.makeSignpostID())  // overlapping: own ids
        defer { signposter.endInterval(name, state) }
        #endif
        return await body()
    }
}
