import CourierLog
import Foundation

/// How a background upload ended without an outcome to judge (an outcome is recorded as an
/// engine attempt's: `CoreInput.ended`).
enum UploadEnd: Sendable {
    /// Cancelled (by `appDidEnterForeground()` or the system): not an attempt. The message is
    /// the engine's again, due now at the latest (not logged, as `retryNow()`).
    case cancelled(MessageID, HandOff)
    /// A failure whose message cannot be read back: its age, which `expiry` needs, is
    /// unknown, so it is not judged; it is read again after `maximumDelay` (`NextDue`).
    case unreadable(MessageID, HandOff, LogError)
    /// A task that no longer carries its message (it ended while the app was dead and
    /// reconciliation gave it up, or the message was cancelled or handed off again): a 2xx
    /// still delivers a pending message; anything else is dropped, unlogged.
    case late(MessageID, attempt: UInt32, status: UInt16?)
}

/// The one outcome path, for both runners (`CoreInput.ended`), and the ends of uploads without
/// one (`CoreInput.uploadEnded`).
extension CoreState {
    /// An attempt ended (an engine attempt, or a background upload): the destination is told,
    /// the one rule (`NextDue`) decides what comes next, the verdict is logged, the projection
    /// updated, waiters released; the attempt's slot (or the hand-off) is freed, and the next
    /// plan asked for. `reply.verdict`: what the one rule decided (nil: the outcome was dropped,
    /// the message having been cancelled while in flight, or its hand-off ended);
    /// `reply.endedHandOff`: an upload's. An upload (a background task with the hand-off's
    /// ticket) counts only while the message is still handed off to that task; the hand-off ends.
    mutating func ended(_ ending: Ending, at instant: EngineInstant, _ effects: inout Effects) -> PlanRequest {
        let token: UInt64? = if case .engine(let t) = ending.runner { t } else { nil }
        let ticket: UInt64? = if case .upload(let t) = ending.runner { t } else { nil }
        let now = instant.wallMilliseconds
        wallMilliseconds = max(wallMilliseconds, now)
        effects.reply.endedHandOff = ticket != nil
        let plan = PlanRequest(
            instant: instant, handOffAsked: ticket != nil, freeing: token, continuing: ending.continuing)
        let id = ending.attempt.id, outcome = ending.outcome
        // Cancelled while its attempt was in flight (or being withdrawn by a send waiting for its
        // fsync): the message is done, and its outcome is dropped unlogged (cancel withdraws the
        // message; it cannot unsend a POST under way).
        // Being withdrawn: no longer in flight (if the send's fsync fails, it stays pending).
        if withdrawing.contains(id) { projection.release(id) }
        guard let slot = projection.slotIndex(of: id), !withdrawing.contains(id) else {
            judgeRiders(of: ending, limited: false, explainedFailures: 0, nowMilliseconds: now, &effects)
            return plan
        }
        if let ticket {
            guard handOffs[id]?.ticket == ticket else { return plan }
            handOffs[id] = nil
        }
        // The destination first: a recovery unparks the others before this one resolves.
        let change = projection.observe(ending, ofSlot: slot, nowMilliseconds: now)
        let order = projection.slots[Int(slot)].order
        let explained = outcome.isSuccess ? 0 : projection.governor(ofSlot: slot).explainedFailures(of: order, at: now)
        // In a batch whose answer says how each message went, the message's own outcome is judged.
        var judged = ending
        if let own = ending.itemOutcome { judged.outcome = own }
        let verdict = NextDue.after(
            judged, destinationLimited: change == .limited, explainedFailures: explained, policy: retry,
            nowMilliseconds: now)
        effects.reply.verdict = verdict
        let origin = projection.origin(ofSlot: slot)
        switch change {
        case .none, .limited: break
        case .wentDown(let failures):
            effects.emit(.destinationDown(projection.origins.url(origin), consecutiveFailures: failures))
        case .recovered(let downMilliseconds):
            effects.emit(
                .destinationRecovered(
                    projection.origins.url(origin), downFor: .milliseconds(Int64(downMilliseconds)),
                    released: projection.origins[origin].parkedCount))
        }
        apply(verdict, of: judged, paced: change == .limited, &effects)
        judgeRiders(
            of: ending, limited: change == .limited, explainedFailures: explained, nowMilliseconds: now, &effects)
        return plan
    }

    /// The other messages of a batch (`Attempt.riders`): the same answer, each judged by the one
    /// rule for itself (its attempts, its age), as the destination judged the request.
    private mutating func judgeRiders(
        of ending: Ending, limited: Bool, explainedFailures: Int, nowMilliseconds now: UInt64, _ effects: inout Effects
    ) {
        for rider in ending.riders where projection.slotIndex(of: rider.attempt.id) != nil {
            guard !withdrawing.contains(rider.attempt.id) else {
                projection.release(rider.attempt.id)
                continue
            }
            let verdict = NextDue.after(
                rider, destinationLimited: limited, explainedFailures: explainedFailures, policy: retry,
                nowMilliseconds: now)
            apply(verdict, of: rider, paced: limited, &effects)
        }
    }

    /// What the one rule decided of an attempt of a pending message: logged, then applied.
    private mutating func apply(_ verdict: NextDue.Verdict, of ending: Ending, paced: Bool, _ effects: inout Effects) {
        let id = ending.attempt.id, number = UInt32(ending.attempt.number), outcome = ending.outcome
        switch verdict {
        case .delivered(let status):
            let headers = (ending.answer?.headers ?? [:]).sorted { $0.key < $1.key }.map {
                Header(name: $0.key, value: $0.value)
            }
            let body = Array(ending.answer?.body ?? Data())
            effects.append(.delivered(id, attempt: number, status: status, headers: headers, body: body))
            resolve(id, .delivered(status: status), attempts: ending.attempt.number, &effects)
        case .retry(let due, _, let foregroundOnly):
            effects.append(.attempted(id, attempt: number, outcome: outcome, nextDueMilliseconds: due))
            projection.retry(id, attempts: number, dueMilliseconds: due, paced: paced)
            let next = Date(timeIntervalSince1970: Double(due) / 1000)
            effects.emit(.failed(id, attempt: ending.attempt.number, outcome: outcome, nextAttemptAt: next))
            if foregroundOnly { self.foregroundOnly.insert(id) }  // no hand-off takes it again
        case .giveUp(let reason):
            effects.append(.abandoned(id, attempt: number, reason: reason.description))
            effects.emit(.failed(id, attempt: ending.attempt.number, outcome: outcome, nextAttemptAt: nil))
            resolve(id, .abandoned(reason), attempts: ending.attempt.number, &effects)
        }
    }

    /// How an upload ended without an outcome; then the next plan: in the background (or before
    /// anything said where the app is) messages are handed off again. `reply.endedHandOff`:
    /// whether the upload's hand-off ended here (its body file can go).
    mutating func uploadEnded(_ end: UploadEnd, at instant: EngineInstant, _ effects: inout Effects) -> PlanRequest {
        let now = instant.wallMilliseconds
        wallMilliseconds = max(wallMilliseconds, now)
        switch end {
        case .cancelled(let id, let handOff):
            effects.reply.endedHandOff = endHandOff(id, handOff, dueAtLatest: now)
        case .unreadable(let id, let handOff, let error):
            effects.reply.endedHandOff = endHandOff(id, handOff, dueAtLatest: now)
            let due = NextDue.afterUnreadableRecord(policy: retry, nowMilliseconds: now)
            if effects.reply.endedHandOff { recordUnreadable(id, error: error, dueMilliseconds: due, &effects) }
        case .late(let id, let attempt, let status):
            // Still an answer from its destination (or a failure to reach it): after a
            // relaunch, the first a new process hears of it, so its hand-off is not blind.
            projection.heardLate(of: id, status: status, nowMilliseconds: now)
            if let status, !closed, projection.slot(of: id) != nil, !withdrawing.contains(id) {
                // A hand-off the message has now (a later one) ends with it: the effects
                // cancel its task and remove its body file.
                effects.append(.delivered(id, attempt: attempt, status: status))
                resolve(id, .delivered(status: status), attempts: Int(attempt), &effects)
            }
            return PlanRequest(instant: instant)
        }
        return PlanRequest(instant: instant, handOffAsked: true)
    }

    /// Message `id`'s hand-off ends if it is still the one given; the message is the engine's
    /// again, due at `dueAtLatest` at the latest. False if that hand-off no longer carried it.
    private mutating func endHandOff(_ id: MessageID, _ handOff: HandOff, dueAtLatest: UInt64) -> Bool {
        guard handOffs[id]?.ticket == handOff.ticket, let slot = projection.slot(of: id) else { return false }
        handOffs[id] = nil
        projection.retry(id, attempts: slot.attempts, dueMilliseconds: min(slot.dueMilliseconds, dueAtLatest))
        return true
    }
}

/// Background hand-off's inputs (`Courier.BackgroundUploads`): a pass begins, its tasks are
/// recorded, and at open the hand-offs are reconciled with the session's tasks. A handed-off
/// message is in flight in the projection, so the engine never attempts it, until its task's
/// completion is heard (or reconciliation finds the task gone).
extension CoreState {
    /// A pass's hand-offs begin, in one section. Each of `ready` is registered before its task
    /// is made (a completion heard before its record still finds it), unless its message was
    /// resolved meanwhile, or the app came back (then it is the engine's again). Each of
    /// `aborted` is the engine's again, as on disk (`foregroundOnly`: a 401 or a failed
    /// `prepareRequest`, which the engine prepares afresh; no hand-off takes it again in this
    /// process). `reply.taken`: which of `ready` began.
    mutating func beginHandOffs(
        _ ready: [(id: MessageID, handOff: HandOff)], aborted: [(id: MessageID, foregroundOnly: Bool)],
        _ effects: inout Effects
    ) {
        handOffsStarting -= ready.count + aborted.count
        let going = !closed && scheduler.mode.mayHandOff
        for (id, foregroundOnly) in aborted where projection.slot(of: id) != nil {
            if foregroundOnly { self.foregroundOnly.insert(id) }
            projection.release(id)
        }
        let begun = ready.map { id, handOff -> Bool in
            guard going, projection.slot(of: id) != nil else {
                projection.release(id)  // no-op for a message resolved meanwhile
                return false
            }
            handOffs[id] = handOff
            return true
        }
        tellIdleWaiters(&effects)
        effects.reply.taken = begun
    }

    /// A pass's tasks exist: their `handed-off` records, in as few batches as fit a segment, for
    /// each hand-off that still holds (by ticket: not cancelled meanwhile, nor its completion
    /// heard already; the caller cancels the others' tasks). `reply.taken`: which were
    /// recorded; `reply.mayHandOff`: whether messages still go to the session (the app may have
    /// come back meanwhile).
    mutating func recordHandOffs(
        _ made: [(id: MessageID, ticket: UInt64, taskIdentifier: UInt64)], _ effects: inout Effects
    ) {
        var entries: [Event] = []
        let recorded = made.map { id, ticket, taskIdentifier -> Bool in
            guard !closed, var handOff = handOffs[id], handOff.ticket == ticket else { return false }
            handOff.taskIdentifier = taskIdentifier
            handOffs[id] = handOff
            entries.append(.handedOff(id, handOff))
            effects.emit(.handedOff(id, attempt: Int(handOff.attempt)))
            return true
        }
        effects.append(batch: entries)
        effects.reply.taken = recorded
        effects.reply.mayHandOff = scheduler.mode.mayHandOff
    }

    /// Reconciles the hand-offs with the session's outstanding tasks (after a relaunch, or a
    /// kill between a task's creation and its record): a task the log does not know is adopted
    /// (its message must be pending and in nobody's hands); a handed-off message whose task is
    /// gone is pending again.
    mutating func reconcile(with tasks: [BackgroundUploadTask], _ effects: inout Effects) {
        var result = Reconciliation()
        var outstanding: [MessageID: (attempt: UInt32, ticket: UInt64, task: BackgroundUploadTask)] = [:]
        // Tasks whose description the system did not keep are known by identifier only.
        var undescribed = Set<UInt64>()
        for task in tasks {
            guard let parsed = HandOff.parse(taskDescription: task.taskDescription) else {
                undescribed.insert(UInt64(bitPattern: Int64(task.identifier)))
                continue
            }
            if outstanding[parsed.id] != nil { result.stale.append(task); continue }
            outstanding[parsed.id] = (parsed.attempt, parsed.ticket, task)
        }
        for (id, handOff) in handOffs
        where outstanding[id]?.ticket != handOff.ticket && !undescribed.contains(handOff.taskIdentifier) {
            handOffs[id] = nil
            projection.release(id)
            result.orphaned.append(id)
        }
        for (id, entry) in outstanding where handOffs[id]?.ticket != entry.ticket {
            guard !closed, let slot = projection.slot(of: id), handOffs[id] == nil,
                !slot.flags.contains(.inFlight)
            else {
                result.stale.append(entry.task)
                continue
            }
            projection.withhold(id)
            let handOff = HandOff(
                attempt: entry.attempt, ticket: entry.ticket,
                taskIdentifier: UInt64(bitPattern: Int64(entry.task.identifier)),
                earliestBeginMilliseconds: slot.dueMilliseconds)
            effects.append(.handedOff(id, handOff))
            handOffs[id] = handOff
            result.adopted.append((id, handOff))
        }
        effects.reply.reconciliation = result
    }
}

/// What reconciliation did.
struct Reconciliation: Sendable {
    /// Handed-off messages whose task is gone: pending again.
    var orphaned: [MessageID] = []
    /// Tasks the log did not know, now carrying their messages.
    var adopted: [(MessageID, HandOff)] = []
    /// Tasks of messages that are resolved, or carried by another task: to cancel.
    var stale: [BackgroundUploadTask] = []
}
