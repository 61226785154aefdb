import CourierLog

/// What the core is told: the intents of the app, the engine and the platform (the core as one
/// state machine: issue 44). `CoreState.handle` applies one as a function of the state and the
/// time alone: it changes the state, collects what to tell and whom to resume (`Effects`), the
/// records to append (`Effects.append`: `CourierCore.write` appends them in the same critical
/// section, in order, so log order is projection order) and the plan to carry out when the
/// section ends. What an input answers its caller is in `Effects.reply`. Fed by
/// `CoreInputTests`; `CourierCore.handle` runs one in one critical section.
///
/// The inputs that can make something runnable plan at the instant given with them; the others
/// are given none.
enum CoreInput {
    // MARK: The app's intents
    /// `pause()`: no new attempt until `resume`.
    case pause
    /// `resume()`: due messages start at once.
    case resume
    /// `retryNow()`: every waiting message due now at the latest.
    case retryNow
    /// `cancel(_:)`: a `cancelled` record, then the message resolves as cancelled
    /// (`reply.count` 1), unless it is not pending (unknown, resolved, or the courier closed:
    /// 0). An attempt in flight finishes; its outcome is dropped.
    case cancel(MessageID)
    /// `cancel(tagged:)`: a `cancelled` record for each pending message with the tag, in as few
    /// batches as fit a segment (each lands whole or not at all), then each resolves as for
    /// `cancel`. `reply.count`: how many.
    case cancelTagged(String)
    /// `cancelAll()`: as `cancelTagged`, for every pending message, in arrival order.
    case cancelAll
    /// `hold(tagged:)`: a `held` record (once: holding a held tag logs nothing); the tag's
    /// messages leave the schedule. `reply.count`: the pending messages with the tag.
    case hold(tag: String)
    /// `release(tagged:)`: a `released` record if the tag was held; its messages that no other
    /// held tag keeps are scheduled again. `reply.count` as for `hold`.
    case release(tag: String)
    /// `deliverPending(within:)` begins (delivers even while paused; `reply.count`: delivered so
    /// far), stops (no new attempt meanwhile; `reply.attempts`: those under way, to cancel), or
    /// ends (the courier carries on as before it; `reply.count`, `pending`, `handedOff`).
    case forcedRun(ForcedRun)

    // MARK: Waiting
    /// `delivered(_:)`: `waiter` is resumed when message `id` resolves, at once if it has (or if
    /// the courier is closed, or `cancelled()` says the waiting task is).
    case waitForDelivery(MessageID, key: ObjectIdentifier, DeliveryWaiter, cancelled: () -> Bool)
    /// Resumed when nothing is pending (see `IdleWaiter`), at once if so already, if the courier
    /// is closed or if `cancelled()` says the waiting task is.
    case waitUntilIdle(key: ObjectIdentifier, IdleWaiter, cancelled: () -> Bool)
    /// The waiting task under `key` was cancelled: resumed now, if it still waits (for
    /// message `id`'s delivery, or with nil, for idle).
    case stopWaiting(key: ObjectIdentifier, for: MessageID?)
    /// `settle()`: resumed once nothing is runnable (`Scheduler.isSettled`), at once if so.
    case settle(CheckedContinuation<Void, Never>)
    /// A subscriber, told the opening damage first (finished at once if the courier is closed);
    /// `reply.pendingIDs` with `pendingIDs`: the pending messages in arrival order, from the same
    /// section, so no event about them is missed or seen twice.
    case subscribe(EventBuffer, pendingIDs: Bool)
    /// A subscriber's stream ended.
    case unsubscribe(ObjectIdentifier)

    // MARK: The courier's life
    /// How plans start their tasks: given once, right after the core is made.
    case install(Launcher)
    /// The app-lifecycle wiring, given once right after open (`close` hands it back).
    case lifecycle(any PlatformIntegration)
    /// At open with background hand-off: no attempt starts until `.reconciliationEnded`;
    /// the task that reconciles is made under the lock, with the gate closed, so nothing sees
    /// one without the other.
    case beginReconciliation(() -> Task<Void, Never>)
    /// Reconciliation with the background session ended: the engine may start.
    case reconciliationEnded
    /// Where the app is, as hand-off sees it.
    case place(DeliveryMode.Place)
    /// `close()`: nothing starts any more; `reply` holds what is under way, for the caller to
    /// stop, and the lifecycle wiring, which the core lets go.
    case close
    /// `close()` closed the log: every waiter is released (`delivered(_:)` throws `.closed`),
    /// every event stream finished.
    case closeEnded
    /// A courier released without `close()`: `reply` holds its tasks, for the caller to cancel.
    case released

    // MARK: The engine's
    /// An attempt ended with an outcome (an engine attempt or a background upload): the one
    /// outcome path (`CoreState.ended`), with what was gathered of it outside the lock (the
    /// server's `Retry-After`, the random seeds: `Ending`). Told with its instant.
    case ended(Ending)
    /// A background upload ended without an outcome to judge (`CoreState.uploadEnded`).
    case uploadEnded(UploadEnd)
    /// A hand-off pass's messages begin (`CoreState.beginHandOffs`), or go back to the engine.
    case beginHandOffs(ready: [(id: MessageID, handOff: HandOff)], aborted: [(id: MessageID, foregroundOnly: Bool)])
    /// A hand-off pass's tasks exist: their records (`CoreState.recordHandOffs`).
    case recordHandOffs([(id: MessageID, ticket: UInt64, taskIdentifier: UInt64)])
    /// The session's outstanding tasks, at open: reconciled with the hand-offs
    /// (`CoreState.reconcile`).
    case reconcile([BackgroundUploadTask])
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
    /// A batch's other messages (`Attempt.riders`), once read back: those `going` start (their
    /// `.attemptStarted`); those `left` (over `Batching.maximumBytes`, or the attempt was not
    /// made) are schedulable again, as on disk; `unreadable` ones are said, and due at
    /// `dueMilliseconds` (as `unreadable`).
    case batchFormed(
        going: [Attempt], left: [MessageID], unreadable: [(MessageID, LogError)], dueMilliseconds: UInt64)
    /// A compaction ended, having forgotten what it planned to, or failing with `error` (then it
    /// forgot nothing, and subscribers are told): settle waiters may go.
    case compactionEnded(error: CourierError?)
    /// Something may have become runnable (an open, a cancel, a release, the app's place).
    case wake

    enum ForcedRun { case begin, stop, end }
}

/// What an input answers the caller that gave it (`CoreInput` says which field, for which input).
struct Reply: Sendable {
    /// The hand-off pass the plan started, if any.
    var pass: Task<Int, Never>?
    /// The attempt the runner that freed its slot (`PlanRequest.freeing`) makes next, in its
    /// own task, if the plan gave it one.
    var next: Attempt?
    /// `ended`: what the one rule decided (nil: the outcome was dropped, its message gone).
    var verdict: NextDue.Verdict?
    /// `ended`, `uploadEnded`: a background upload's hand-off ended (its body file can go).
    var endedHandOff = false
    /// `beginHandOffs`, `recordHandOffs`: which of the hand-offs given took effect.
    var taken: [Bool] = []
    /// `recordHandOffs`, `reconciliationEnded`: whether messages still go to the session.
    var mayHandOff = false
    var reconciliation = Reconciliation()
    var count = 0
    var pending = 0
    var handedOff = 0
    var pendingIDs: [MessageID] = []
    var attempts: [Task<Void, Never>] = []
    var passes: [Task<Int, Never>] = []
    var timer: Task<Void, Never>?
    var lifecycle: (any PlatformIntegration)?
}

extension CoreState {
    /// Applies `input` at `instant`: what it emits, resumes and appends goes into `effects`, and
    /// the plan to carry out when the section ends (if any) into `effects.plan`.
    mutating func handle(_ input: CoreInput, at instant: EngineInstant?, _ effects: inout Effects) {
        let plan = instant.map { PlanRequest(instant: $0) }
        switch input {
        case .pause: scheduler.mode.paused = true
        case .resume:
            scheduler.mode.paused = false
            effects.plan = plan
        case .retryNow:  // every waiting message due now at the latest
            let now = instant?.wallMilliseconds ?? 0
            projection.clampDue(backoffAtMost: now, retryAfterAtMost: now, waitingOnly: true)
            effects.plan = plan
        case .place(let place): scheduler.mode.place = place
        // The app's intents that append (none once closed): each record is asked for before the
        // change it makes, so log order is projection order (replay: `Replayer.visit`).
        // A message being withdrawn (`withdrawing`) is gone already.
        case .cancel(let id) where !closed:
            cancel(projection.slotIndex(of: id) == nil || withdrawing.contains(id) ? [] : [id], &effects)
        case .cancelTagged(let tag) where !closed:
            cancel(projection.ids(tagged: tag).filter { !withdrawing.contains($0) }, &effects)
        case .cancelAll where !closed:
            cancel(projection.liveSlotsInOrder().map(\.id).filter { !withdrawing.contains($0) }, &effects)
        case .hold(let tag) where !closed:
            if !projection.tags.held.contains(tag) { effects.append(.held(tag: tag)) }
            effects.reply.count = projection.holdTag(tag)
            tellIdleWaiters(&effects)  // only held messages may be left
        case .release(let tag) where !closed:
            if projection.tags.held.contains(tag) {
                effects.append(.released(tag: tag))
                effects.plan = plan
            }
            effects.reply.count = projection.releaseTag(tag)  // not held: changes nothing
        case .cancel, .cancelTagged, .cancelAll, .hold, .release: break  // closed
        case .forcedRun(.begin):
            scheduler.mode.forcedRuns += 1
            effects.reply.count = deliveredCount
        case .forcedRun(.stop):
            scheduler.mode.stopping += 1
            effects.reply.attempts = Array(scheduler.attempts.values)
        case .forcedRun(.end):
            scheduler.mode.stopping -= 1
            scheduler.mode.forcedRuns -= 1
            effects.reply.count = deliveredCount
            (effects.reply.pending, effects.reply.handedOff) = (projection.count, handOffs.count)
            effects.plan = plan
        // The waits: a waiting call names itself by a key of its own (an object it keeps alive
        // while it waits), so a cancelled wait removes just its own.
        case .waitForDelivery(let id, let key, let waiter, let cancelled):
            if projection.slotIndex(of: id) == nil {
                effects.answered.append((waiter, Self.waiterResult(resolved[id], of: id)))
            } else if closed {
                effects.answered.append((waiter, .failure(CourierError(.closed, "the courier is closed"))))
            } else if cancelled() {
                effects.answered.append((waiter, .failure(CancellationError())))
            } else {
                waiters[id, default: [:]][key] = waiter
            }
        case .waitUntilIdle(let key, let waiter, let cancelled):
            if isIdle(exceptHandedOff: waiter.exceptHandedOff) || closed || cancelled() {
                effects.idle.append(waiter.continuation)
            } else {
                idleWaiters[key] = waiter
            }
        case .stopWaiting(let key, let id?):
            if let waiter = waiters[id]?.removeValue(forKey: key) {
                effects.answered.append((waiter, .failure(CancellationError())))
            }
            if waiters[id]?.isEmpty == true { waiters[id] = nil }
        case .stopWaiting(let key, nil):
            if let waiter = idleWaiters.removeValue(forKey: key) { effects.idle.append(waiter.continuation) }
        case .settle(let continuation):
            if let instant, !Scheduler.isSettled(self, at: instant) {
                scheduler.settleWaiters.append(continuation)
            } else {
                effects.idle.append(continuation)
            }
        case .subscribe(let buffer, let pendingIDs):
            if pendingIDs { effects.reply.pendingIDs = projection.liveSlotsInOrder().map(\.id) }
            guard !closed else { return effects.finishStreams.append(buffer) }
            if let damage = openingDamage { buffer.yield(.storageFailed(damage)) }
            subscribers[ObjectIdentifier(buffer)] = buffer
        case .unsubscribe(let key): subscribers[key] = nil
        case .install(let launcher):
            precondition(self.launcher == nil, "the launcher is given once")
            self.launcher = launcher
        case .lifecycle(let integration): lifecycle = integration
        case .beginReconciliation(let makeTask):
            scheduler.mode.phase = .reconciling
            reconciliation = makeTask()
        case .reconciliationEnded:
            if scheduler.mode.phase == .reconciling { scheduler.mode.phase = .running }
            effects.reply.mayHandOff = scheduler.mode.mayHandOff
            effects.plan = plan
        case .close, .released:
            effects.reply.attempts = Array(scheduler.attempts.values)
            effects.reply.passes = Array(scheduler.passes.values)
            effects.reply.timer = scheduler.timer?.task
            guard case .close = input else { break }
            scheduler.mode.phase = .closed
            (effects.reply.lifecycle, lifecycle) = (lifecycle, nil)
        case .closeEnded: releaseEveryone(&effects)
        case .timerFired(let deadline):
            if scheduler.timer?.deadline == deadline { scheduler.timer = nil }
            effects.plan = plan
        case .passEnded(let token):
            scheduler.passes[token] = nil
            effects.plan = plan
        case .compactionEnded(let error):
            compaction.compacting = false
            if let error { effects.emit(.storageFailed(error)) } else { compaction.succeeded() }
            effects.plan = plan
        case .runnerFree(let token, let continuing):
            effects.plan = instant.map { PlanRequest(instant: $0, freeing: token, continuing: continuing) }
        case .attemptCancelled(let id, let token):
            projection.release(id)
            effects.plan = instant.map { PlanRequest(instant: $0, freeing: token, continuing: false) }
        case .unreadable(let id, let error, let due, let token, let continuing):
            recordUnreadable(id, error: error, dueMilliseconds: due, &effects)
            effects.plan = instant.map { PlanRequest(instant: $0, freeing: token, continuing: continuing) }
        case .wake: effects.plan = plan
        case .batchFormed(let going, let left, let unreadable, let due):
            for a in going where projection.slot(of: a.id) != nil {
                effects.emit(.attemptStarted(a.id, number: a.number))
            }
            for id in left { projection.release(id) }  // no-op for one cancelled meanwhile
            for (id, error) in unreadable { recordUnreadable(id, error: error, dueMilliseconds: due, &effects) }
            if !left.isEmpty || !unreadable.isEmpty { effects.plan = plan }
        case .ended(let ending):
            guard let instant else { preconditionFailure("an attempt's end is told with its instant") }
            effects.plan = ended(ending, at: instant, &effects)
        case .uploadEnded(let end):
            guard let instant else { preconditionFailure("an upload's end is told with its instant") }
            effects.plan = uploadEnded(end, at: instant, &effects)
        case .beginHandOffs(let ready, let aborted): beginHandOffs(ready, aborted: aborted, &effects)
        case .recordHandOffs(let made): recordHandOffs(made, &effects)
        case .reconcile(let tasks): reconcile(with: tasks, &effects)
        }
    }

    /// Pending messages `ids` are cancelled: their `cancelled` records (a single cancel is a batch
    /// of one, or of none if its message is not pending), then each resolves as cancelled.
    private mutating func cancel(_ ids: [MessageID], _ effects: inout Effects) {
        effects.append(batch: ids.map { .cancelled($0) })
        for id in ids {
            resolve(id, .cancelled, attempts: projection.slot(of: id).map { Int($0.attempts) } ?? 0, &effects)
        }
        effects.reply.count = ids.count
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

    /// Messages a send withdrew (replaced, or dropped at the bound), each resolved if still
    /// pending (under `.always`, an attempt may have resolved it while the send's fsync ran).
    mutating func withdraw(_ withdrawals: [(MessageID, Resolution)], _ effects: inout Effects) {
        for (id, resolution) in withdrawals {
            guard let slot = projection.slot(of: id) else { continue }
            resolve(id, resolution, attempts: Int(slot.attempts), &effects)
        }
    }

    /// The message is done: everyone waiting for it is released.
    mutating func resolve(_ id: MessageID, _ resolution: Resolution, attempts: Int, _ effects: inout Effects) {
        if let removed = projection.remove(id) { recent.remove(id, order: removed.order) }
        foregroundOnly.remove(id)
        if let handOff = handOffs.removeValue(forKey: id) { effects.endedHandOffs.append((id, handOff)) }
        resolved.record(id, resolution)
        compaction.resolvedSinceCompaction += 1
        let callbacks = callbacks.removeValue(forKey: id)
        let error = Self.waiterError(resolution, of: id)
        let result = Self.waiterResult(resolution, of: id)
        effects.answered += (waiters.removeValue(forKey: id) ?? [:]).values.map { ($0, result) }
        switch resolution {
        case .delivered:
            deliveredCount += 1
            effects.emit(.delivered(id, attempts: attempts))
            if let callback = callbacks?.onDelivered { effects.callbacks.append { callback(id) } }
        case .abandoned(let reason):
            effects.emit(.abandoned(id, attempts: attempts, reason: reason))
            if let callback = callbacks?.onAbandoned, let error { effects.callbacks.append { callback(id, error) } }
        case .abandonedEarlier:
            assertionFailure("only replay records an earlier run's resolution, never a live one")
        case .cancelled:
            // The app asked: its callbacks are dropped, not called; waiters learn why.
            effects.emit(.cancelled(id))
        }
        tellIdleWaiters(&effects)
    }
}
