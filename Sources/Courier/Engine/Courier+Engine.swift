import CourierLog
import Foundation
import Logging

/// The delivery engine. No thread polls: `pump` carries out the scheduler's plan (attempts
/// to start, uploads to hand off, one timer for the earliest message not yet due); sends,
/// finished attempts and passes, completions and that timer call `pump` again. **Only the
/// engine sleeps**, and only on the injected clock.
extension Courier {
    /// Starts what the scheduler says should start now and re-arms the timer. With
    /// `handOffAsked` (after an upload's completion), messages are handed off unless the app is
    /// known to be in the foreground (in the background they always are).
    /// - Returns: the hand-off pass this call started, if any (its value: how many it handed off).
    @discardableResult
    func pump(at now: EngineInstant? = nil, handOffAsked: Bool = false) -> Task<Int, Never>? {
        // Read the app's clock before taking a lock: no user code runs under one.
        let instant = now ?? currentInstant()
        let (scheduled, effects) = core.write { state, effects in
            schedule(&state, &effects, at: instant, handOffAsked: handOffAsked)
        }
        effects.run()
        return scheduled.pass
    }

    /// What `schedule` started.
    struct Scheduled {
        /// The hand-off pass it started, if any.
        var pass: Task<Int, Never>?
        /// The attempt the runner that asked (`freeing`) is to make next, in its own task.
        var next: Attempt?
    }

    /// Under the core's lock: asks the scheduler for a plan and carries it out in the same
    /// critical section (a task per attempt, a task for a hand-off pass, the timer: making a
    /// task runs no app code); then tells settle waiters if nothing is runnable, unless the
    /// caller has more to do first (`tellSettleWaiters`: a compaction to run).
    ///
    /// With `freeing`, the attempt runner of that token has ended its attempt: its slot is
    /// free, and if the plan starts attempts and the runner is `continuing` (its task was not
    /// cancelled), it makes the first itself (`next`), in the task it runs in, rather than
    /// ending while a new task starts: a runner per delivery slot, as a pool of workers would
    /// be, and a thread wake-up less per attempt.
    func schedule(
        _ state: inout CoreState, _ effects: inout Effects, at instant: EngineInstant,
        handOffAsked: Bool, freeing token: UInt64? = nil, continuing: Bool = true,
        tellSettleWaiters: Bool = true
    ) -> Scheduled {
        state.wallMilliseconds = max(state.wallMilliseconds, instant.wallMilliseconds)
        let runner = token.flatMap { state.scheduler.attempts.removeValue(forKey: $0) }
        let plan = Scheduler.plan(&state, at: instant, limits: schedulerLimits, handOffAsked: handOffAsked)
        var scheduled = Scheduled()
        for var planned in plan.attempts {
            planned.message = state.recentState(of: planned.id)
            let attempt = planned  // a `let`: the runner's task captures it
            // Yielded under the lock (yielding only buffers: no consumer code runs), so it
            // precedes anything the attempt itself emits.
            for subscriber in state.subscribers.values {
                subscriber.yield(.attempt(attempt.id, number: attempt.number))
            }
            if continuing, let token, let runner, scheduled.next == nil {
                state.scheduler.attempts[token] = runner
                scheduled.next = attempt
                continue
            }
            let token = state.scheduler.takeToken()
            state.scheduler.attempts[token] = startRunner(attempt, token: token)
        }
        if !plan.uploads.isEmpty, let uploads = configuration.backgroundUploads {
            let token = state.scheduler.takeToken()
            let task = Task { [self] in await handOffPass(plan.uploads, uploads, token: token) }
            state.scheduler.passes[token] = task
            scheduled.pass = task
        }
        if let deadline = plan.timerDeadline { armTimer(&state, deadline: deadline) }
        if tellSettleWaiters { effects.idle += takeSettleWaitersIfSettled(&state, at: instant) }
        return scheduled
    }

    /// A runner for delivery slot `token`, starting with `attempt` (making a task runs no app
    /// code, so this may run under the core's lock). It runs where the transport completes its
    /// requests if the transport says where (`AsyncHTTPClientTransport.runnerExecutor`: an
    /// event loop), so that each outcome is recorded, and the next request started, with no hop
    /// in between. Not when `prepareRequest` is set: app code runs in the runner then, and app
    /// code must never hold up an event loop.
    private func startRunner(_ attempt: Attempt, token: UInt64) -> Task<Void, Never> {
        #if canImport(AsyncHTTPClient)
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), configuration.prepareRequest == nil,
            let transport = transport as? AsyncHTTPClientTransport, let executor = transport.runnerExecutor
        {
            return Task(executorPreference: executor) { [self] in await runAttempts(from: attempt, token: token) }
        }
        #endif
        return Task { [self] in await runAttempts(from: attempt, token: token) }
    }

    /// Under the core's lock: replaces the timer with one for `deadline`.
    private func armTimer(_ state: inout CoreState, deadline: Duration) {
        state.scheduler.timer?.task.cancel()
        let sleep = clock.sleep
        let task = Task { [weak self] in
            do { try await sleep(deadline) } catch { return }  // cancelled: a newer timer replaced it
            self?.timerFired(deadline)
        }
        state.scheduler.timer = (task, deadline)
    }

    /// The timer fired: it is forgotten (unless a newer one replaced it) and the next plan is
    /// carried out, in one critical section.
    private func timerFired(_ deadline: Duration) {
        let instant = currentInstant()
        core.write { state, effects in
            if state.scheduler.timer?.deadline == deadline { state.scheduler.timer = nil }
            _ = schedule(&state, &effects, at: instant, handOffAsked: false)
        }.1.run()
    }

    /// The engine's "now": the injected clock's elapsed time, and the wall time at open plus
    /// that. Calls the app's clock, so never while holding a lock (asserted in debug builds).
    func currentInstant() -> EngineInstant {
        #if DEBUG
        assert(!core.isHeldByCurrentThread, "the app's clock must not be called under the core's lock")
        #endif
        let elapsed = clock.elapsed()
        let wall = wallStartMilliseconds + UInt64(max(0, elapsed.seconds * 1000))
        return EngineInstant(elapsed: elapsed, wallMilliseconds: wall)
    }
}

/// A moment as the engine sees it: the injected clock's elapsed time and the wall time.
struct EngineInstant {
    var elapsed: Duration
    var wallMilliseconds: UInt64
}

/// Compaction (the protocol is in `CourierCore+Compaction.swift`), run on the I/O queue.
extension Courier {
    /// Compactions run since open (public as `compactionCount` in CourierTesting).
    @_spi(CourierTesting)
    public var compactionCountForTesting: Int { core.compactionCount }

    /// Appends that found the active segment full and the next one not prepared yet, so grew
    /// it (`make lock-hold` reports it).
    @_spi(CourierTesting)
    public var appendsPastSegmentSizeForTesting: Int { log.appendsPastSegmentSize }

    /// One compaction now, whether or not it is worth it, on the calling thread (benchmarks
    /// time it). Blocking file work: never call it on the cooperative pool.
    @_spi(CourierTesting)
    public func compactNowForTesting() { compact(force: true) }

    /// One compaction; `force` skips the "is it worth it" test (for tests).
    func compact(force: Bool) {
        core.compact(force: force).run()
        tellSettleWaiters()
    }

    /// Carries out a compaction planned (and marked under way) by `planCompaction`, on the
    /// calling thread (blocking file work: the I/O queue), then tells settle waiters: `settle()`
    /// waits for a compaction under way.
    func compact(_ plan: CompactionPlan) {
        core.compact(plan).run()
        tellSettleWaiters()
    }

    /// Resumes settle waiters if nothing is runnable now.
    private func tellSettleWaiters() {
        let instant = currentInstant()
        core.write { state, effects in effects.idle += takeSettleWaitersIfSettled(&state, at: instant) }.1.run()
    }

    /// Runs a compaction an outcome's critical section planned, on the I/O queue (`compact(_:)`
    /// tells settle waiters, which the outcome did not: the compaction was still to run).
    func runCompaction(_ plan: CompactionPlan) async {
        await onIOQueue { [self] in compact(plan) }
    }
}
