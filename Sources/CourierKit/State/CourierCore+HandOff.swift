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
}
