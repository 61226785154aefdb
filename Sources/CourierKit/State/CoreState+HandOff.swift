import CourierLog

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
