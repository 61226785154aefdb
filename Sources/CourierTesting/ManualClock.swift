import Foundation

/// A clock that moves only when told to. Sleepers wake, in deadline order, when `advance`
/// passes their deadline; nothing ever waits for real time.
public final class ManualClock: Clock {
    public struct Instant: InstantProtocol {
        public var offset: Duration
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let lock = NSLock()
    private var current = Instant(offset: .zero)
    private var sleepers: [Int: Sleeper] = [:]
    private var nextKey = 0

    public init() {}

    public var now: Instant { lock.withLock { current } }
    public var minimumResolution: Duration { .zero }

    /// How many tasks are sleeping on this clock.
    public var sleeperCount: Int { lock.withLock { sleepers.count } }

    /// The earliest deadline a task sleeps until, if any: how far `advance(by:)` must go to wake
    /// one (a simulation that jumps from one timer to the next, not in fixed steps).
    public var nextDeadline: Instant? { lock.withLock { sleepers.values.map(\.deadline).min() } }

    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let key = lock.withLock { () -> Int in
            nextKey += 1
            return nextKey
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Result<Void, any Error>? = lock.withLock {
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= current { return .success(()) }
                    sleepers[key] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let resumeNow { continuation.resume(with: resumeNow) }
            }
        } onCancel: {
            let sleeper = lock.withLock { sleepers.removeValue(forKey: key) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward, wakes every sleeper whose deadline has come, and yields so the
    /// woken tasks get to run (as swift-clocks' `TestClock.advance` does). To wait until a
    /// `Courier` has acted on the new time, follow with `await courier.settle()`.
    public func advance(by duration: Duration) async {
        let due = lock.withLock { () -> [Sleeper] in
            current = current.advanced(by: duration)
            let due = sleepers.filter { $0.value.deadline <= current }
            for key in due.keys { sleepers[key] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
        // Bounded: a few turns of the executor, enough for woken tasks to start.
        for _ in 0..<8 { await Task.yield() }
    }
}

/// All state is guarded by `lock`.
extension ManualClock: @unchecked Sendable {}
