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

/// A plan an intent asked for (`Effects.plan(at:)`), carried out when its section ends.
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
            let attempt = planned  // a `let`: the runner's task captures it
            // Yielded under the lock (yielding only buffers: no consumer code runs), so it
            // precedes anything the attempt itself emits.
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
        effects.idle += takeSettleWaitersIfSettled(&state, at: instant)
        // A message handed off in this plan's section can leave only handed-off ones pending.
        state.tellIdleWaiters(&effects)
    }

    /// Under the core's lock: the settle waiters to resume, if the engine is settled at `instant`.
    func takeSettleWaitersIfSettled(
        _ state: inout CoreState, at instant: EngineInstant
    ) -> [CheckedContinuation<Void, Never>] {
        guard !state.scheduler.settleWaiters.isEmpty, Scheduler.isSettled(state, at: instant) else { return [] }
        defer { state.scheduler.settleWaiters.removeAll() }
        return state.scheduler.settleWaiters
    }
}
