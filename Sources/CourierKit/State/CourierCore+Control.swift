import CourierLog

/// What the core is told that appends no record (the first inputs of the core as one state
/// machine: issue 44). Each changes the state and says whether the scheduler plans next, as a
/// pure function of the state and the time (`CoreState.handle`, fed by `CoreInputTests`);
/// `CourierCore.handle` runs it in one critical section and carries the plan out as it ends.
enum CoreInput: Sendable {
    /// `pause()`: no new attempt until `resume`.
    case pause
    /// `resume()`: due messages start at once.
    case resume
    /// `retryNow()`: every waiting message due now at the latest.
    case retryNow
    /// Where the app is, as hand-off sees it.
    case place(DeliveryMode.Place)
    /// The timer for `deadline` fired: forgotten, unless a newer one replaced it.
    case timerFired(deadline: Duration)
    /// Hand-off pass `token` ended: its place is free.
    case passEnded(token: UInt64)
    /// The runner of slot `token` ended an attempt without an outcome to record: the slot is
    /// free, and unless it is not `continuing` it makes the plan's first attempt itself.
    case runnerFree(token: UInt64, continuing: Bool)
    /// The attempt of message `id` in slot `token` was cancelled (close, the end of
    /// `deliverPending`): not an attempt. The message is pending again, exactly as on disk; the
    /// slot is free and its runner ends.
    case attemptCancelled(MessageID, token: UInt64)
    /// The attempt in slot `token` could not read message `id` back: it is said, and tried again
    /// at `dueMilliseconds` (`NextDue.afterUnreadableRecord`); the slot is free, as for
    /// `runnerFree`.
    case unreadable(MessageID, LogError, dueMilliseconds: UInt64, token: UInt64, continuing: Bool)
    /// A compaction ended, having forgotten what it planned to, or failing with `error` (then it
    /// forgot nothing, and subscribers are told): settle waiters may go.
    case compactionEnded(error: CourierError?)
    /// `close()` closed the log: every waiter is released (`delivered(_:)` throws `.closed`),
    /// every event stream finished.
    case closeEnded
    /// Reconciliation with the background session ended: the engine may start.
    case reconciliationEnded
    /// Something may have become runnable (an open, a cancel, a release, the app's place); with
    /// `handOffAsked`, messages are handed off unless the app is known to be in the foreground.
    case wake(handOffAsked: Bool)
}

extension CoreState {
    /// Applies `input` at `instant`: what it emits goes into `effects`, and the plan to carry
    /// out when the section ends (if any) into `effects.plan`.
    mutating func handle(_ input: CoreInput, at instant: EngineInstant, _ effects: inout Effects) {
        effects.plan = handle(input, at: instant, emitting: &effects)
    }

    private mutating func handle(
        _ input: CoreInput, at instant: EngineInstant, emitting effects: inout Effects
    ) -> PlanRequest? {
        switch input {
        case .pause:
            scheduler.mode.paused = true
            return nil
        case .place(let place):
            scheduler.mode.place = place
            return nil
        case .attemptCancelled(let id, let token):
            projection.release(id)
            return PlanRequest(instant: instant, freeing: token, continuing: false)
        case .unreadable(let id, let error, let due, let token, let continuing):
            recordUnreadable(id, error: error, dueMilliseconds: due, &effects)
            return PlanRequest(instant: instant, freeing: token, continuing: continuing)
        case .closeEnded:
            for (_, waiters) in waiters {
                effects.failures += waiters.values.map { ($0, CourierError(.closed, "the courier was closed")) }
            }
            waiters.removeAll()
            effects.idle = idleWaiters.values.map(\.continuation) + scheduler.settleWaiters
            idleWaiters.removeAll()
            scheduler.settleWaiters.removeAll()
            effects.finishStreams = Array(subscribers.values)
            subscribers.removeAll()
            return nil
        case .compactionEnded(let error):
            compaction.compacting = false
            if let error {
                effects.emit(.storageFailed(error))
            } else {
                compaction.compactions += 1
                compaction.segmentsAtLastCheck = 0  // the forget changes the count: look again next time
            }
        case .resume:
            scheduler.mode.paused = false
        case .retryNow:
            _ = projection.makeDue(atOrBefore: instant.wallMilliseconds)
        case .timerFired(let deadline):
            if scheduler.timer?.deadline == deadline { scheduler.timer = nil }
        case .passEnded(let token):
            scheduler.passes[token] = nil
        case .runnerFree(let token, let continuing):
            return PlanRequest(instant: instant, freeing: token, continuing: continuing)
        case .reconciliationEnded:
            if scheduler.mode.phase == .reconciling { scheduler.mode.phase = .running }
        case .wake(let handOffAsked):
            return PlanRequest(instant: instant, handOffAsked: handOffAsked)
        }
        return PlanRequest(instant: instant)
    }

    /// An attempt could not read message `id` back: says so, and it is due again at
    /// `dueMilliseconds`. The record says nothing about its destination; but if it was a down
    /// destination's probe, the next probe waits too (or an unreadable probe would be taken
    /// again at once, forever: found by the hand-off property test, a disk failing under a down
    /// destination).
    mutating func recordUnreadable(
        _ id: MessageID, error: LogError, dueMilliseconds: UInt64, _ effects: inout Effects
    ) {
        guard let i = projection.slotIndex(of: id), let slot = projection.slot(of: id) else { return }
        projection.unreadable(slot: i, dueMilliseconds: dueMilliseconds)
        projection.retry(id, attempts: slot.attempts, dueMilliseconds: dueMilliseconds)
        effects.emit(.storageFailed(CourierError(error, while: "reading message \(id) back from the log")))
    }
}

/// The core's intents for the delivery mode and the courier's life: what `deliverPending`,
/// reconciliation, the lifecycle wiring and `close` ask of it, and the inputs above. Each is
/// one critical section; those that can make something runnable plan in it too.
extension CourierCore {
    /// Tells the core `input`, in one critical section (`CoreState.handle`); `Effects.started`:
    /// what its plan started (a runner's next attempt, a hand-off pass).
    func handle(_ input: CoreInput, at instant: EngineInstant) -> Effects {
        write { state, effects in state.handle(input, at: instant, &effects) }.1
    }

    /// Whether `pause()` holds the engine.
    var isPaused: Bool { read(\.scheduler.mode.paused) }

    /// `deliverPending(within:)` begins: delivers even while paused. Returns the count of
    /// messages delivered so far, for its summary.
    func beginForcedRun() -> Int {
        write { state, _ -> Int in
            state.scheduler.mode.forcedRuns += 1
            return state.deliveredCount
        }.0
    }

    /// `deliverPending(within:)` winds down: no new attempt meanwhile; returns the attempts
    /// under way, for the caller to cancel.
    func stopForcedRun() -> [Task<Void, Never>] {
        write { state, _ in
            state.scheduler.mode.stopping += 1
            return Array(state.scheduler.attempts.values)
        }.0
    }

    /// `deliverPending(within:)` ended: the courier carries on as before it. Returns the
    /// messages delivered in all and those pending now.
    func endForcedRun(at instant: EngineInstant) -> (delivered: Int, pending: Int, handedOff: Int, effects: Effects) {
        let ((delivered, pending, handedOff), effects) = write { state, effects -> (Int, Int, Int) in
            state.scheduler.mode.stopping -= 1
            state.scheduler.mode.forcedRuns -= 1
            let counts = (state.deliveredCount, state.projection.count, state.handOffs.count)
            effects.plan(at: instant)
            return counts
        }
        return (delivered, pending, handedOff, effects)
    }

    /// The hand-off passes under way.
    var passesUnderWay: [Task<Int, Never>] { read { Array($0.scheduler.passes.values) } }

    /// At open with background hand-off: the engine starts no attempt until
    /// `.reconciliationEnded`;
    /// `makeTask` makes the task that reconciles (under the lock, with the gate closed, so
    /// nothing sees one without the other).
    func beginReconciliation(_ makeTask: () -> Task<Void, Never>) {
        _ = write { state, _ in
            state.scheduler.mode.phase = .reconciling
            state.reconciliation = makeTask()
        }
    }

    /// The reconciliation under way or done, if background hand-off is on (the engine, and
    /// completions, start after it).
    var reconciliation: Task<Void, Never>? { read(\.reconciliation) }

    /// Installs the app-lifecycle wiring (nil: none), returning the one it replaces.
    func replaceLifecycle(with integration: (any PlatformIntegration)?) -> (any PlatformIntegration)? {
        write { state, _ in
            defer { state.lifecycle = integration }
            return state.lifecycle
        }.0
    }

    /// What `close()` stops, taken in the critical section that closes the core.
    struct Closing {
        var attempts: [Task<Void, Never>]
        var passes: [Task<Int, Never>]
        var timer: Task<Void, Never>?
        var lifecycle: (any PlatformIntegration)?
    }

    /// `close()`: nothing starts any more; returns what is under way, for the caller to stop.
    func close() -> Closing {
        write { state, _ in
            state.scheduler.mode.phase = .closed
            defer { state.lifecycle = nil }
            return Closing(
                attempts: Array(state.scheduler.attempts.values), passes: Array(state.scheduler.passes.values),
                timer: state.scheduler.timer?.task, lifecycle: state.lifecycle)
        }.0
    }

    /// A courier released without `close()`: its tasks are cancelled.
    func cancelTasks() {
        _ = write { state, _ in
            state.scheduler.timer?.task.cancel()
            for task in state.scheduler.attempts.values { task.cancel() }
            for task in state.scheduler.passes.values { task.cancel() }
        }
    }

    /// `close()` was called.
    var isClosed: Bool { read(\.closed) }

    /// When the engine's one timer fires, on its clock (time since the courier opened); nil if
    /// none is armed.
    var timerDeadline: Duration? { read { $0.scheduler.timer?.deadline } }

    /// The pending messages' ids, oldest first.
    var pendingIDs: [MessageID] { read { $0.projection.liveSlotsInOrder().map(\.id) } }
}
