/// The core's intents for the delivery mode and the courier's life: what `pause`, `resume`,
/// `deliverPending`, hand-off's place, reconciliation, the lifecycle wiring and `close` ask of
/// it. Each is one critical section; those that can make something runnable plan in it too.
extension CourierCore {
    /// `pause()`: no new attempt until `resume`.
    func pause() {
        _ = write { state, _ in state.scheduler.mode.paused = true }
    }

    /// Whether `pause()` holds the engine.
    var isPaused: Bool { read(\.scheduler.mode.paused) }

    /// `resume()`: due messages start at once.
    func resume(at instant: EngineInstant) -> Effects {
        write { state, effects in
            state.scheduler.mode.paused = false
            effects.plan(at: instant)
        }.1
    }

    /// `retryNow()`: every waiting message due at `instant` at the latest, then the plan.
    func makeAllDue(at instant: EngineInstant) -> Effects {
        write { state, effects in
            _ = state.projection.makeDue(atOrBefore: instant.wallMilliseconds)
            effects.plan(at: instant)
        }.1
    }

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

    /// Where the app is, for hand-off (`appDidEnterBackground()`, `appDidEnterForeground()`).
    func setPlace(_ place: DeliveryMode.Place) {
        _ = write { state, _ in state.scheduler.mode.place = place }
    }

    /// The hand-off passes under way.
    var passesUnderWay: [Task<Int, Never>] { read { Array($0.scheduler.passes.values) } }

    /// At open with background hand-off: the engine starts no attempt until `endReconciliation`;
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

    /// Reconciliation ended: the engine may start, and the plan runs.
    func endReconciliation(at instant: EngineInstant) -> Effects {
        write { state, effects in
            if state.scheduler.mode.phase == .reconciling { state.scheduler.mode.phase = .running }
            effects.plan(at: instant)
        }.1
    }

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
