import CourierLog

/// The core's intents for background hand-off (`Courier.BackgroundUploads`). A handed-off
/// message is in flight in the projection, so the engine never attempts it, until its task's
/// completion is heard (or reconciliation finds the task gone).
extension CourierCore {
    /// A pass's messages, in one section: their full states where kept in memory (nil: read
    /// them back from the log), and whether messages go to the session now.
    func handOffStates(_ ids: [MessageID]) -> (states: [MessageState?], mayHandOff: Bool) {
        read { state in (ids.map { state.recentState(of: $0) }, state.scheduler.mode.mayHandOff) }
    }

    /// A pass's hand-offs begin, in one section. Each of `ready` is registered before its task
    /// is made (a completion heard before its record still finds it), unless its message was
    /// resolved meanwhile, or the app came back (then it is the engine's again). Each of
    /// `aborted` is the engine's again, as on disk (`foregroundOnly`: a 401 or a failed
    /// `prepareRequest`, which the engine prepares afresh; no hand-off takes it again in this
    /// process). Returns which of `ready` began.
    func beginHandOffs(
        _ ready: [(id: MessageID, handOff: HandOff)], aborted: [(id: MessageID, foregroundOnly: Bool)]
    ) -> ([Bool], Effects) {
        write { state, effects -> [Bool] in
            state.handOffsStarting -= ready.count + aborted.count
            let going = !state.closed && state.scheduler.mode.mayHandOff
            for (id, foregroundOnly) in aborted where state.projection.slot(of: id) != nil {
                if foregroundOnly { state.foregroundOnly.insert(id) }
                state.projection.release(id)
            }
            let begun = ready.map { id, handOff -> Bool in
                guard going, state.projection.slot(of: id) != nil else {
                    state.projection.release(id)  // no-op for a message resolved meanwhile
                    return false
                }
                state.handOffs[id] = handOff
                return true
            }
            state.tellIdleWaiters(&effects)
            return begun
        }
    }

    /// A pass's tasks exist: their `handed-off` records, in as few batches as fit a segment, for
    /// each hand-off that still holds (by ticket: not cancelled meanwhile, nor its completion
    /// heard already; the caller cancels the others' tasks). Returns which were recorded, and
    /// whether messages still go to the session (the app may have come back meanwhile).
    func recordHandOffs(
        _ made: [(id: MessageID, ticket: UInt64, taskIdentifier: UInt64)]
    ) -> (recorded: [Bool], mayHandOff: Bool, effects: Effects) {
        let ((recorded, mayHandOff), effects) = write { state, effects -> ([Bool], Bool) in
            var entries: [Event] = []
            let recorded = made.map { id, ticket, taskIdentifier -> Bool in
                guard !state.closed, var handOff = state.handOffs[id], handOff.ticket == ticket else { return false }
                handOff.taskIdentifier = taskIdentifier
                state.handOffs[id] = handOff
                entries.append(.handedOff(id, handOff))
                effects.emit(.handedOff(id, attempt: Int(handOff.attempt)))
                return true
            }
            effects.append(batch: entries)
            return (recorded, state.scheduler.mode.mayHandOff)
        }
        return (recorded, mayHandOff, effects)
    }

    /// The message task `task` carries, and its hand-off: by the task's description, or by its
    /// identifier if the description is not Courier's (the system may not keep it).
    func handOff(carriedBy task: BackgroundUploadTask) -> (MessageID, HandOff)? {
        read { state in
            if let parsed = HandOff.parse(taskDescription: task.taskDescription) {
                guard let handOff = state.handOffs[parsed.id], handOff.ticket == parsed.ticket else { return nil }
                return (parsed.id, handOff)
            }
            let identifier = UInt64(bitPattern: Int64(task.identifier))
            guard identifier != HandOff.unknownTask else { return nil }
            return state.handOffs.first { $0.value.taskIdentifier == identifier }.map { ($0.key, $0.value) }
        }
    }

    /// Whether a handed-off message goes to a destination that has said nothing yet since the
    /// courier opened (its hand-off was blind: its first limit's worth, 4 at first).
    /// Only hand-offs that may begin by `nowMilliseconds` count: one whose begin date is minutes
    /// away cannot answer while the app is still up.
    func awaitsFirstAnswers(nowMilliseconds now: UInt64) -> Bool {
        read { state in
            // Bounded by the hand-offs (at most `maximumOutstandingTasks`).
            state.handOffs.contains { id, handOff in
                guard handOff.earliestBeginMilliseconds <= now, let i = state.projection.slotIndex(of: id) else {
                    return false
                }
                return !state.projection.governor(ofSlot: i).hasReported
            }
        }
    }

    /// What reconciliation did.
    struct Reconciliation {
        /// Handed-off messages whose task is gone: pending again.
        var orphaned: [MessageID] = []
        /// Tasks the log did not know, now carrying their messages.
        var adopted: [(MessageID, HandOff)] = []
        /// Tasks of messages that are resolved, or carried by another task: to cancel.
        var stale: [BackgroundUploadTask] = []
    }

    /// Reconciles the hand-offs with the session's outstanding tasks (after a relaunch, or a
    /// kill between a task's creation and its record): a task the log does not know is adopted
    /// (its message must be pending and in nobody's hands); a handed-off message whose task is
    /// gone is pending again.
    func reconcile(with tasks: [BackgroundUploadTask]) -> (Reconciliation, Effects) {
        write { state, effects -> Reconciliation in
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
            for (id, handOff) in state.handOffs
            where outstanding[id]?.ticket != handOff.ticket && !undescribed.contains(handOff.taskIdentifier) {
                state.handOffs[id] = nil
                state.projection.release(id)
                result.orphaned.append(id)
            }
            for (id, entry) in outstanding where state.handOffs[id]?.ticket != entry.ticket {
                guard !state.closed, let slot = state.projection.slot(of: id), state.handOffs[id] == nil,
                    !slot.flags.contains(.inFlight)
                else {
                    result.stale.append(entry.task)
                    continue
                }
                state.projection.withhold(id)
                let handOff = HandOff(
                    attempt: entry.attempt, ticket: entry.ticket,
                    taskIdentifier: UInt64(bitPattern: Int64(entry.task.identifier)),
                    earliestBeginMilliseconds: slot.dueMilliseconds)
                effects.append(.handedOff(id, handOff))
                state.handOffs[id] = handOff
                result.adopted.append((id, handOff))
            }
            return result
        }
    }
}
