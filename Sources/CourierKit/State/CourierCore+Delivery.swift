import CourierLog
import Foundation

extension CourierCore {
    /// Message `id`'s full state if it is among the recently sent (no file work).
    func recentState(_ id: MessageID) -> MessageState? { read { $0.recentState(of: id) } }

    /// Reads message `id`'s full state back from the log (one positioned read, checksum
    /// verified), with the attempt count and due time the projection holds. Nil if the message
    /// is no longer pending. Blocking file work: never call it on the cooperative pool.
    func loadState(_ id: MessageID) throws(LogError) -> MessageState? {
        // A compaction may move the record between the lookup and the read (`.notFound`): look
        // again. It moves a record at most once per compaction, so three tries are plenty.
        var lastError = LogError(.notFound, "message \(id) kept moving")
        for _ in 0..<3 {
            guard let slot = read({ $0.projection.slot(of: id) }) else { return nil }
            var message: MessageState
            switch Result(catching: { () throws(LogError) in try log.readState(at: slot.address, of: id) }) {
            case .success(let read): message = read.state
            case .failure(let error) where error.code == .notFound:
                lastError = error
                continue
            case .failure(let error): throw error
            }
            message.attempts = slot.attempts
            message.nextDueMilliseconds = slot.dueMilliseconds
            return message
        }
        throw lastError
    }

    /// The one outcome path's critical section, for both runners: the outcome is logged and
    /// applied (`record`), a compaction started on the I/O queue if one is worth it (no slot
    /// waits for it; `settle()` does, and `close()`'s last file work queues behind it), the
    /// attempt's slot (or the hand-off) freed and the next plan carried out (`Effects.started`;
    /// under `.always`, once the record is durable: `write`).
    func recordOutcome(_ judged: JudgedEnding) -> (Recorded, Effects) {
        let ending = judged.ending
        var token: UInt64?, ticket: UInt64?
        switch ending.runner {
        case .engine(let t): token = t
        case .upload(let t): ticket = t
        }
        return write { state, effects -> Recorded in
            state.wallMilliseconds = max(state.wallMilliseconds, judged.instant.wallMilliseconds)
            let verdict = record(
                judged.facts, of: ending.attempt, probeRandom: judged.probeRandom, at: judged.instant.wallMilliseconds,
                handOff: ticket, in: &state, &effects)
            // A compaction now worth running is the core's to start, on the I/O queue: no
            // delivery slot waits for it (`settle()` does: it is under way).
            if limits.compacts, let plan = planCompaction(&state, force: false) {
                state.launcher?.startCompaction(plan)
            }
            effects.plan(at: judged.instant, handOffAsked: ticket != nil, freeing: token, continuing: judged.continuing)
            return Recorded(verdict: verdict, endedHandOff: ticket != nil)
        }
    }

    /// An attempt ended: the destination is told, the one rule (`NextDue`) decides what comes
    /// next, the verdict is logged, the projection updated, waiters released. Under the core's
    /// lock, inside a `write` that does more in the same critical section (the outcome path
    /// frees the attempt's slot or the hand-off and plans what runs next). Nil: the outcome was
    /// dropped (the message was cancelled while in flight, or its hand-off ended).
    /// With `handOff`, the attempt was a background upload task with that ticket: its outcome
    /// counts only while the message is still handed off to that task; the hand-off ends.
    func record(
        _ facts: NextDue.Facts, of attempt: Attempt, probeRandom: UInt64, at now: UInt64, handOff ticket: UInt64?,
        in state: inout CoreState, _ effects: inout Effects
    ) -> NextDue.Verdict? {
        let id = attempt.id, number = UInt32(attempt.number), outcome = facts.outcome
        // Cancelled while its attempt was in flight: the message is done, and its outcome is
        // dropped unlogged (cancel withdraws the message; it cannot unsend a POST under way).
        guard let slot = state.projection.slotIndex(of: id) else { return nil }
        if let ticket {
            guard state.handOffs[id]?.ticket == ticket else { return nil }
            state.handOffs[id] = nil
        }
        // The destination first: a recovery unparks the others before this one resolves.
        let change = state.projection.observe(
            outcome, ofSlot: slot, startedMilliseconds: facts.byUpload ? nil : attempt.startedMilliseconds,
            retryAfter: facts.retryAfter, random: probeRandom, nowMilliseconds: now)
        let order = state.projection.slots[Int(slot)].order
        let explained =
            outcome.isSuccess ? 0 : state.projection.governor(ofSlot: slot).explainedFailures(of: order, at: now)
        let verdict = NextDue.after(
            facts, destinationLimited: change == .limited, explainedFailures: explained, policy: limits.retry,
            nowMilliseconds: now)
        switch change {
        case .none, .limited: break
        case .wentDown(let origin, let failures):
            effects.emit(.destinationDown(OriginTable.url(of: origin), consecutiveFailures: failures))
        case .recovered(let origin, let downMilliseconds, let released):
            effects.emit(
                .destinationRecovered(
                    OriginTable.url(of: origin), downFor: .milliseconds(Int64(downMilliseconds)), released: released))
        }
        switch verdict {
        case .delivered(let status):
            effects.append(.delivered(id, attempt: number, status: status))
            state.resolve(id, .delivered, attempts: attempt.number, &effects)
        case .retry(let due, _, let foregroundOnly):
            effects.append(.attempted(id, attempt: number, outcome: outcome, nextDueMilliseconds: due))
            state.projection.retry(id, attempts: number, dueMilliseconds: due)
            if change == .limited { state.projection.notePacedRetry(id) }
            let next = Date(timeIntervalSince1970: Double(due) / 1000)
            effects.emit(.failed(id, attempt: attempt.number, outcome: outcome, nextAttemptAt: next))
            if foregroundOnly { state.foregroundOnly.insert(id) }  // no hand-off takes it again
        case .giveUp(let reason):
            effects.append(.abandoned(id, attempt: number, reason: reason.description))
            effects.emit(.failed(id, attempt: attempt.number, outcome: outcome, nextAttemptAt: nil))
            state.resolve(id, .abandoned(reason), attempts: attempt.number, &effects)
        }
        return verdict
    }
}

extension Event {
    /// The full state an `enqueued` or `snapshot` event carries.
    var fullState: MessageState? {
        switch self {
        case .enqueued(let s), .snapshot(let s): s
        default: nil
        }
    }
}
