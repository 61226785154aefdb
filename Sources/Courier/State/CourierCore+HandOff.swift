import CourierLog

/// The core's intents for background hand-off (`Courier.BackgroundUploads`). A handed-off
/// message is in flight in the projection, so the engine never attempts it, until its task's
/// completion is heard (or reconciliation finds the task gone).
extension CourierCore {
    /// Message `id` is about to be handed off: registered before its task is made, so a
    /// completion heard before the record finds it. False if it was resolved meanwhile.
    func beginHandOff(_ id: MessageID, _ handOff: HandOff) -> Bool {
        write { state, _ -> Bool in
            state.handOffsStarting -= 1
            guard !state.closed, state.projection.slot(of: id) != nil else {
                state.projection.release(id)
                return false
            }
            state.handOffs[id] = handOff
            return true
        }.0
    }

    /// The task of message `id`'s hand-off `ticket` exists: logs its `handed-off` record.
    /// False if the hand-off ended meanwhile (the message was cancelled, or the task's
    /// completion was heard already): the caller cancels the task.
    func recordHandOff(_ id: MessageID, ticket: UInt64, taskIdentifier: UInt64) -> (Bool, Effects) {
        write { state, effects -> Bool in
            guard !state.closed, var handOff = state.handOffs[id], handOff.ticket == ticket else { return false }
            handOff.taskIdentifier = taskIdentifier
            state.handOffs[id] = handOff
            append(.handedOff(id, handOff), state, &effects)
            effects.emit(.handedOff(id, attempt: Int(handOff.attempt)))
            return true
        }
    }

    /// A taken message was not handed off after all (its body could not be read or written,
    /// or `prepareRequest` threw): it is the engine's again, as on disk. With
    /// `foregroundOnly`, no hand-off takes it again in this process.
    func abortHandOff(_ id: MessageID, foregroundOnly: Bool) {
        _ = write { state, _ in
            state.handOffsStarting -= 1
            guard state.projection.slot(of: id) != nil else { return }  // cancelled meanwhile
            if foregroundOnly { state.foregroundOnly.insert(id) }
            state.projection.release(id)
        }
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

    /// All hand-offs (tests, foreground return).
    var handOffs: [MessageID: HandOff] { read(\.handOffs) }

    /// Message `id`'s task `ticket` ended without an attempt (cancelled): the message is the
    /// engine's again, due at `dueAtLatest` at the latest (the app is in the foreground, where
    /// waiting messages are retried at once; not logged, as `retryNow()`). False if that task
    /// no longer carried the message.
    func endHandOff(_ id: MessageID, ticket: UInt64, dueAtLatest: UInt64) -> Bool {
        write { state, _ -> Bool in
            guard state.handOffs[id]?.ticket == ticket, let slot = state.projection.slot(of: id) else { return false }
            state.handOffs[id] = nil
            state.projection.retry(id, attempts: slot.attempts, dueMilliseconds: min(slot.dueMilliseconds, dueAtLatest))
            return true
        }.0
    }

    /// A 2xx from a task that no longer carries message `id` (it completed while the app was
    /// dead, before reconciliation could adopt it): still a delivery. If another task or an
    /// attempt has the message in flight, its outcome is dropped when it comes (the message is
    /// resolved); a task is cancelled by the effects (`Effects.endedHandOffs`, run by `run()`).
    func recordLateSuccess(_ id: MessageID, attempt: UInt32, status: UInt16) -> Effects {
        write { state, effects in
            guard !state.closed, state.projection.slot(of: id) != nil else { return }
            append(.delivered(id, attempt: attempt, status: status), state, &effects)
            Self.resolve(id, .delivered, attempts: Int(attempt), &state, &effects)
        }.1
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
                state.projection.hold(id)
                let handOff = HandOff(
                    attempt: entry.attempt, ticket: entry.ticket,
                    taskIdentifier: UInt64(bitPattern: Int64(entry.task.identifier)),
                    earliestBeginMilliseconds: slot.dueMilliseconds)
                append(.handedOff(id, handOff), state, &effects)
                state.handOffs[id] = handOff
                result.adopted.append((id, handOff))
            }
            return result
        }
    }
}
