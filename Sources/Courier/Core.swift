import Foundation

/// The mutable state of a `Courier`, guarded by its lock.
struct Core {
    var scheduler: Scheduler
    var resolved: ResolvedMemory
    var callbacks: [MessageID: Callbacks] = [:]
    var waiters: [MessageID: [CheckedContinuation<Void, any Error>]] = [:]
    /// Waiters for "nothing pending", by key (so a cancelled wait can remove its own).
    var idleWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
    var nextWaiterKey = 0
    var settleWaiters: [CheckedContinuation<Void, Never>] = []
    var subscribers: [Int: AsyncStream<CourierEvent>.Continuation] = [:]
    var nextSubscriber = 0
    var inFlight: [MessageID: Task<Void, Never>] = [:]
    var timer: (task: Task<Void, Never>, deadline: Duration)?
    var closed = false
    /// `pause()` was called: start no new attempt (until `resume()`).
    var paused = false
    /// `deliverPending(within:)` calls under way: they deliver even while paused.
    var forcedRuns = 0
    /// `deliverPending(within:)` calls stopping: no new attempt while one winds down.
    var stopping = 0
    /// Messages delivered since open (for `deliverPending`'s summary).
    var deliveredCount = 0
    /// What opening found wrong, if anything: the first event of every `events` stream.
    var openingDamage: String?
    /// Messages resolved since the last compaction.
    var resolvedSinceCompaction = 0
    var compacting = false
    /// Segment count when the compactor last looked (it looks again after a roll).
    var segmentsAtLastCheck = 0
    var compactions = 0
}

extension Core {
    /// Whether the engine may start attempts now.
    var mayStartAttempts: Bool { (!paused || forcedRuns > 0) && stopping == 0 }
}

struct Callbacks {
    var onDelivered: (@Sendable (MessageID) -> Void)?
    var onAbandoned: (@Sendable (MessageID, CourierError) -> Void)?
}

enum Resolution: Equatable {
    case delivered
    case abandoned(String)
}

/// The most recent resolutions, for `delivered(_:)` on messages already done. Bounded: the
/// oldest are forgotten first.
struct ResolvedMemory {
    let limit: Int
    private var map: [MessageID: Resolution] = [:]
    private var order: [MessageID] = []
    private var head = 0

    init(limit: Int) { self.limit = max(0, limit) }

    subscript(id: MessageID) -> Resolution? { map[id] }

    mutating func record(_ id: MessageID, _ resolution: Resolution) {
        guard limit > 0 else { return }
        if map.updateValue(resolution, forKey: id) == nil { order.append(id) }
        // Evict one per insert past the limit: bounded work per call.
        if order.count - head > limit {
            map[order[head]] = nil
            head += 1
        }
        if head > 1024 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}

/// Side effects collected under the lock and run after it is released, so no user code
/// (callbacks, event consumers, resumed tasks) ever runs while the lock is held.
struct Effects {
    var events: [CourierEvent] = []
    var subscribers: [AsyncStream<CourierEvent>.Continuation] = []
    var delivered: [(@Sendable (MessageID) -> Void, MessageID)] = []
    var abandoned: [(@Sendable (MessageID, CourierError) -> Void, MessageID, CourierError)] = []
    var successes: [CheckedContinuation<Void, any Error>] = []
    var failures: [(CheckedContinuation<Void, any Error>, CourierError)] = []
    var idle: [CheckedContinuation<Void, Never>] = []
    var finishStreams: [AsyncStream<CourierEvent>.Continuation] = []

    func run() {
        for event in events { for s in subscribers { s.yield(event) } }
        for (callback, id) in delivered { callback(id) }
        for (callback, id, error) in abandoned { callback(id, error) }
        for c in successes { c.resume() }
        for (c, error) in failures { c.resume(throwing: error) }
        for c in idle { c.resume() }
        for s in finishStreams { s.finish() }
    }
}
