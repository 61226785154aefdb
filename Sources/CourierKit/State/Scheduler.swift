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
/// lets the lock go (below: making a task runs no app code).
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
        // Up to `maximumHandOffs` handed off or starting in all (none without hand-off).
        let freeForHandOff = limits.maximumHandOffs - state.handOffs.count - state.handOffsStarting
        if freeForHandOff > 0, mode.place == .background || (handOffAsked && mode.mayHandOff) {
            // The engine's selection, each message to begin when it may; messages sent back to
            // the foreground (a 401) and excluded destinations stay with the engine.
            let foregroundOnly = state.foregroundOnly
            plan.uploads = state.projection.take(
                .whenAllowed, limit: freeForHandOff, nowMilliseconds: now.wallMilliseconds
            ) { slot, url in foregroundOnly.contains(slot.id) || limits.isExcludedFromHandOff(url) }
            state.handOffsStarting += plan.uploads.count
        }
        guard mode.mayStartAttempts else { return plan }
        let free = limits.maximumConcurrentDeliveries - state.scheduler.attempts.count
        let wall = now.wallMilliseconds
        plan.attempts = state.projection.take(.now, limit: max(0, free), nowMilliseconds: wall).map { taken in
            var attempt = Attempt(id: taken.slot.id, number: Int(taken.slot.attempts) + 1, startedMilliseconds: wall)
            attempt.riders = taken.riders.map { Attempt(id: $0.id, number: Int($0.attempts) + 1) }
            return attempt
        }
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
}

/// The core carries out its own plans. Every intent that can make something runnable (a send,
/// an outcome, a timer, a resume, …) asks the scheduler (`Scheduler.plan`, pure) in its own
/// critical section and starts what the plan says there: a task per attempt, a task for a
/// hand-off pass, the one timer. Making a task runs no app code, so it is made under the lock;
/// the tasks' bodies are the facade's, given once at open (`Launcher`).
///
/// **No pump outside the core:** the facade never reads or writes `CoreState`; it calls an
/// intent and runs the effects it returns.

/// How the core starts what its plans say. Given once by the facade, right after it is made;
/// its closures hold the facade weakly (the facade owns the core).
struct Launcher: Sendable {
    /// A runner for delivery slot `token` (a task), making `attempt` first.
    var startRunner: @Sendable (_ attempt: Attempt, _ token: UInt64) -> Task<Void, Never>
    /// A hand-off pass over `taken` (a task; it ends with `.passEnded(token:)`), returning how many
    /// it handed off.
    var startPass: @Sendable (_ taken: [Projection.Taken], _ token: UInt64) -> Task<Int, Never>
    /// The timer: a task that sleeps until `deadline` on the injected clock, then calls
    /// `handle(.timerFired(deadline:))`.
    var startTimer: @Sendable (_ deadline: Duration) -> Task<Void, Never>
    /// A compaction the core planned (and marked under way): run on the I/O queue, then
    /// `compact(_:)` ends it and tells settle waiters.
    var startCompaction: @Sendable (CompactionPlan) -> Void
}

/// A plan an intent asked for (`Effects.plan`), carried out when its section ends. With
/// `handOffAsked`, messages are handed off unless the app is known to be in the foreground
/// (after an upload's completion). With `freeing`, the runner of that delivery slot ended its
/// attempt: the slot is free, and if the plan starts attempts and the runner is `continuing`,
/// it makes the first itself (`Reply.next`).
struct PlanRequest {
    var instant: EngineInstant
    var handOffAsked = false
    var freeing: UInt64?
    var continuing = true

    /// One plan for two requests: the later instant, hand-off if either asked for it. The
    /// runner's slot is the section's own (`self`).
    func merged(with waiting: PlanRequest?) -> PlanRequest {
        guard let waiting else { return self }
        var merged = self
        if waiting.instant.elapsed > instant.elapsed { merged.instant = waiting.instant }
        merged.handOffAsked = handOffAsked || waiting.handOffAsked
        return merged
    }
}

extension CourierCore {
    /// At the end of a section (`write`, `commit`): the plan it asked for, merged with any that
    /// waited for an fsync. While a record waits for its fsync (`.always`), nothing is planned:
    /// the request waits for that record's commit, and a runner whose slot it frees ends.
    func carryOutPlan(_ state: inout CoreState, _ effects: inout Effects) {
        if state.scheduler.awaitingSync > 0 {
            guard var request = effects.plan else { return }
            if let token = request.freeing { state.scheduler.attempts[token] = nil }
            request.freeing = nil
            state.scheduler.waitingPlan = request.merged(with: state.scheduler.waitingPlan)
            return
        }
        guard let request = effects.plan ?? state.scheduler.waitingPlan else { return }
        schedule(request.merged(with: state.scheduler.waitingPlan), &state, &effects)
        state.scheduler.waitingPlan = nil
    }

    /// Under the core's lock: asks the scheduler for a plan and carries it out in the same
    /// critical section; then tells settle waiters if nothing is runnable.
    ///
    /// With `freeing`, the runner of that token has ended its attempt: its slot is free, and if
    /// the plan starts attempts and the runner is `continuing` (its task was not cancelled), it
    /// makes the first itself (`next`) rather than ending while a new task starts: a runner per
    /// delivery slot, as a pool of workers would be, and a thread wake-up less per attempt.
    private func schedule(_ request: PlanRequest, _ state: inout CoreState, _ effects: inout Effects) {
        guard let launcher = state.launcher else { preconditionFailure("a plan before the launcher was given") }
        let instant = request.instant, token = request.freeing
        state.wallMilliseconds = max(state.wallMilliseconds, instant.wallMilliseconds)
        let runner = token.flatMap { state.scheduler.attempts.removeValue(forKey: $0) }
        let plan = Scheduler.plan(&state, at: instant, limits: limits.scheduler, handOffAsked: request.handOffAsked)
        // What this critical section emitted so far (an `enqueued`, an outcome) comes first.
        if !plan.attempts.isEmpty { effects.yieldEventsSoFar(to: state.subscribers.values) }
        for var planned in plan.attempts {
            planned.message = state.recentState(of: planned.id)
            for r in planned.riders.indices { planned.riders[r].message = state.recentState(of: planned.riders[r].id) }
            let attempt = planned  // a `let`: the runner's task captures it
            // Yielded under the lock (yielding only buffers: no consumer code runs), so it
            // precedes anything the attempt itself emits.
            // (A batch's other messages are said to start once the runner knows which go.)
            for subscriber in state.subscribers.values {
                subscriber.yield(.attemptStarted(attempt.id, number: attempt.number))
            }
            if request.continuing, let token, let runner, effects.reply.next == nil {
                state.scheduler.attempts[token] = runner
                effects.reply.next = attempt
                continue
            }
            let token = state.scheduler.takeToken()
            state.scheduler.attempts[token] = launcher.startRunner(attempt, token)
        }
        if !plan.uploads.isEmpty {
            let token = state.scheduler.takeToken()
            let task = launcher.startPass(plan.uploads, token)
            state.scheduler.passes[token] = task
            effects.reply.pass = task
        }
        if let deadline = plan.timerDeadline {
            state.scheduler.timer?.task.cancel()
            state.scheduler.timer = (launcher.startTimer(deadline), deadline)
        }
        if !state.scheduler.settleWaiters.isEmpty, Scheduler.isSettled(state, at: instant) {
            effects.idle += state.scheduler.settleWaiters
            state.scheduler.settleWaiters.removeAll()
        }
        // A message handed off in this plan's section can leave only handed-off ones pending.
        state.tellIdleWaiters(&effects)
    }
}
