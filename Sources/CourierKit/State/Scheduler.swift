/// How the courier delivers now, as one value in the core's state: the engine's pause,
/// `deliverPending`'s runs, the start gate at open and where the app is (for background
/// hand-off). The engine and the hand-off read the same mode: background delivery is the same
/// path in another mode, not a second engine.
struct DeliveryMode {
    /// The courier's life. At open with background hand-off on, it reconciles the log with the
    /// session's tasks first, and starts no attempt meanwhile (a message could be in flight
    /// twice).
    enum Phase { case reconciling, running, closed }

    /// Where the app is, for hand-off: unknown until `appDidEnterBackground()` or
    /// `appDidEnterForeground()` says (a process iOS launched to report uploads hears completions
    /// before anything tells it where the app is).
    enum Place { case unknown, foreground, background }

    var phase = Phase.running
    var place = Place.unknown
    /// `pause()` was called: no new attempt until `resume()`.
    var paused = false
    /// `deliverPending(within:)` calls under way: they deliver even while paused.
    var forcedRuns = 0
    /// `deliverPending(within:)` calls stopping: no new attempt while one winds down.
    var stopping = 0

    /// Whether the engine may start attempts now.
    var mayStartAttempts: Bool { phase == .running && (!paused || forcedRuns > 0) && stopping == 0 }

    /// Whether messages go to the background session rather than the engine: unless the app is
    /// known to be in the foreground, an attempt the engine started could freeze when iOS
    /// suspends the app, and wait for the user to open it.
    var mayHandOff: Bool { place != .foreground }
}

/// The scheduler's part of the core's state: the mode and the work under way.
struct SchedulerState {
    var mode = DeliveryMode()
    /// Attempts under way, by a token unique to each (a message may be attempted again before
    /// the task of its previous attempt has removed itself). Bounded by
    /// `maximumConcurrentDeliveries`.
    var attempts: [UInt64: Task<Void, Never>] = [:]
    /// Hand-off passes under way, by token; each returns how many messages it handed off.
    /// Bounded by `maximumOutstandingTasks` (a pass takes at least one message).
    var passes: [UInt64: Task<Int, Never>] = [:]
    var nextToken: UInt64 = 0
    /// The one timer, for the earliest message not yet due, on the injected clock.
    var timer: (task: Task<Void, Never>, deadline: Duration)?
    /// `settle()` calls waiting for nothing runnable.
    var settleWaiters: [CheckedContinuation<Void, Never>] = []
    /// `.always`: sections that appended and whose records are not committed yet
    /// (`CourierCore.write`). **While it is not 0, nothing is planned**: a plan asked for
    /// meanwhile waits (`waitingPlan`) for the commit that brings it back to 0.
    var awaitingSync = 0
    var waitingPlan: PlanRequest?

    /// A fresh token for an attempt or a pass.
    mutating func takeToken() -> UInt64 {
        defer { nextToken += 1 }
        return nextToken
    }
}

/// What the scheduler decided in one critical section, for the core to carry out before it
/// lets the lock go (`CourierCore+Plan.swift`: making a task runs no app code).
struct Plan {
    /// Messages to attempt now, taken (in flight in the projection).
    var attempts: [Attempt] = []
    /// Messages to hand off to the background session, taken and counted as starting.
    var uploads: [Projection.Taken] = []
    /// A timer to arm for this deadline (on the injected clock), replacing a later one; nil if
    /// none is needed or the armed one is soon enough.
    var timerDeadline: Duration?
}

/// The one place that decides what runs next, from the core's state and the time alone: no
/// clock is read, no file touched, no task made. The core calls it when a critical section
/// ends (`CourierCore.carryOutPlan`) and carries the plan out under its lock. Tested on states
/// built by hand (`SchedulerTests`).
enum Scheduler {
    struct Limits {
        var maximumConcurrentDeliveries: Int
        /// `BackgroundUploads.maximumOutstandingTasks`; 0 without background hand-off.
        var maximumHandOffs: Int
        /// Destinations that are never handed off (`BackgroundUploads.excludedHosts`).
        var isExcludedFromHandOff: @Sendable (String) -> Bool
    }

    /// Takes what should start now and says when to look again.
    /// - Hand-off first, in the background (or when `handOffAsked`, as after an upload's
    ///   completion, unless the app is known to be in the foreground): the session takes up to
    ///   its bound, whatever the messages' due times (it waits for them).
    /// - Then attempts, while the mode allows: probes of down destinations (one each), then
    ///   messages parked by a destination's limit or pace (the oldest), then due messages, up
    ///   to the free delivery slots.
    /// - Then one timer, for the earliest message not yet due, if a slot is free.
    static func plan(_ state: inout CoreState, at now: EngineInstant, limits: Limits, handOffAsked: Bool) -> Plan {
        var plan = Plan()
        let mode = state.scheduler.mode
        guard mode.phase == .running else { return plan }
        if limits.maximumHandOffs > 0, mode.place == .background || (handOffAsked && mode.mayHandOff) {
            plan.uploads = takeUploads(
                &state, bound: limits.maximumHandOffs, nowMilliseconds: now.wallMilliseconds,
                isExcluded: limits.isExcludedFromHandOff)
        }
        guard mode.mayStartAttempts else { return plan }
        let free = limits.maximumConcurrentDeliveries - state.scheduler.attempts.count
        plan.attempts = takeAttempts(&state, nowMilliseconds: now.wallMilliseconds, limit: free)
        if free > plan.attempts.count, let due = state.projection.earliestDue {
            let deadline = now.elapsed + .milliseconds(Int64(due - min(due, now.wallMilliseconds)))
            if state.scheduler.timer.map({ $0.deadline > deadline }) ?? true { plan.timerDeadline = deadline }
        }
        return plan
    }

    /// Whether nothing is runnable at `now`: no attempt, pass or compaction under way, and no
    /// message due without a timer to wake for it (what `settle()` waits for).
    static func isSettled(_ state: CoreState, at now: EngineInstant) -> Bool {
        let scheduler = state.scheduler
        if scheduler.mode.phase == .closed { return true }
        guard scheduler.attempts.isEmpty, scheduler.passes.isEmpty, !state.compaction.compacting,
            scheduler.awaitingSync == 0
        else { return false }
        if !scheduler.mode.mayStartAttempts { return true }  // paused: nothing more will start
        if let timer = scheduler.timer { return timer.deadline > now.elapsed }
        // A message may be due with no timer yet (the plan that arms it has not run).
        if let due = state.projection.earliestDue, due <= now.wallMilliseconds { return false }
        return true
    }

    private static func takeAttempts(_ state: inout CoreState, nowMilliseconds now: UInt64, limit: Int) -> [Attempt] {
        state.projection.take(.now, limit: max(0, limit), nowMilliseconds: now).map { taken in
            Attempt(id: taken.slot.id, number: Int(taken.slot.attempts) + 1, startedMilliseconds: now)
        }
    }

    /// Up to `bound` handed off or starting in all; messages sent back to the foreground (a
    /// 401) and excluded destinations stay with the engine.
    private static func takeUploads(
        _ state: inout CoreState, bound: Int, nowMilliseconds now: UInt64,
        isExcluded: (String) -> Bool
    ) -> [Projection.Taken] {
        let free = bound - state.handOffs.count - state.handOffsStarting
        guard free > 0 else { return [] }
        let foregroundOnly = state.foregroundOnly
        // The engine's selection, each message to begin when it may.
        let taken = state.projection.take(.whenAllowed, limit: free, nowMilliseconds: now) { slot, url in
            foregroundOnly.contains(slot.id) || isExcluded(url)
        }
        state.handOffsStarting += taken.count
        return taken
    }
}
