import CourierLog

/// The core's entry points besides the delivery path's: every intent is a `CoreInput`, told in
/// one critical section; and one read of what the facade shows.
extension CourierCore {
    /// Tells the core `input`, in one critical section (`CoreState.handle`), at `instant` if it
    /// can make something runnable (see `CoreInput`); the effects say what its plan started
    /// (`Effects.started`) and what it answers (`Effects.reply`).
    ///
    /// After an outcome, a compaction now worth running is the core's to start, on the I/O queue
    /// (`Launcher.startCompaction`): no delivery slot waits for it (`settle()` does, and
    /// `close()`'s last file work queues behind it).
    @discardableResult
    func handle(_ input: CoreInput, at instant: EngineInstant? = nil) -> Effects {
        write { state, effects in
            state.handle(input, at: instant, &effects)
            guard case .ended = input, limits.compacts else { return }
            appendRecords(state, &effects)  // first: the compactor weighs the log with them
            if let plan = planCompaction(&state, force: false) { state.launcher?.startCompaction(plan) }
        }.1
    }

    /// What the facade shows of the core, in one read: cheap values only.
    struct Status {
        var isPaused: Bool
        var isClosed: Bool
        var pendingCount: Int
        /// The hand-offs (tests, foreground return).
        var handOffs: [MessageID: HandOff]
        /// The hand-off passes under way.
        var passes: [Task<Int, Never>]
        /// The reconciliation under way or done, if background hand-off is on (the engine, and
        /// completions, start after it).
        var reconciliation: Task<Void, Never>?
        /// When the engine's one timer fires, on its clock (time since the courier opened); nil
        /// if none is armed.
        var timerDeadline: Duration?
        var heldTags: Set<String>
        var compactions: Int
    }

    var status: Status {
        read { state in
            Status(
                isPaused: state.scheduler.mode.paused, isClosed: state.closed, pendingCount: state.projection.count,
                handOffs: state.handOffs, passes: Array(state.scheduler.passes.values),
                reconciliation: state.reconciliation, timerDeadline: state.scheduler.timer?.deadline,
                heldTags: state.projection.tags.held, compactions: state.compaction.compactions)
        }
    }

    /// The pending messages' ids, oldest first.
    var pendingIDs: [MessageID] { read { $0.projection.liveSlotsInOrder().map(\.id) } }

    /// What tests and `courier-bench` read of the core's bookkeeping: one read of the lock, so
    /// nothing outside `State/` reaches into `CoreState` (`make format-check`, Tests included).
    struct Diagnostics {
        /// Critical sections so far, this read included.
        var criticalSections: UInt64
        var attemptsUnderWay: Int
        /// Messages taken for a delivery (an attempt or an upload) and not yet ended.
        var sending: Int
        /// Tasks in `delivered(_:)` and idle waiters.
        var waiters: Int
        /// How often an outcome looked for a compaction worth running.
        var compactionChecks: Int
        var compacting: Bool
        var hasLifecycle: Bool
    }

    var diagnostics: Diagnostics {
        read { state in
            Diagnostics(
                criticalSections: state.criticalSections, attemptsUnderWay: state.scheduler.attempts.count,
                sending: state.projection.slots.lazy.filter { $0.flags.contains(.sending) }.count,
                waiters: state.idleWaiters.count + state.waiters.values.map(\.count).reduce(0, +),
                compactionChecks: state.compaction.checks, compacting: state.compaction.compacting,
                hasLifecycle: state.lifecycle != nil)
        }
    }
}
