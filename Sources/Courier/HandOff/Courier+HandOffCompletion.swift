import CourierLog
import Foundation

/// Hearing how background uploads ended (`BackgroundUploadSession.deliverCompletions`).
extension Courier {
    /// One upload ended: logged as a foreground attempt's outcome is, judged by the same retry
    /// policy and destination backoff; the message's body file is removed. In the background
    /// a failed message is handed off again at once, to begin after its backoff (and the next
    /// message of its ordering key follows a delivery); in the foreground it is the engine's.
    func hear(_ completion: BackgroundUploadCompletion) async {
        // After reconciliation, which must not see a task whose end was heard meanwhile.
        await core.read(\.reconciliation)?.value
        guard configuration.backgroundUploads != nil, !core.read(\.closed) else { return }
        guard let (id, handOff) = core.handOff(carriedBy: completion.task) else {
            await hearLate(completion)
            return
        }
        let outcome = completion.outcome
        if case .failure(let failure) = outcome, failure.kind == .cancelled {
            // `returnToForeground()` (or the system) cancelled it: not an attempt.
            if core.endHandOff(id, ticket: handOff.ticket, dueAtLatest: currentInstant().wallMilliseconds) {
                await onIOQueue { [log] in log.removeBody(of: id, ticket: handOff.ticket) }
                await carryOn()
            }
            return
        }
        // A failure is judged by the message's age (`RetryPolicy.expiry`): known if this
        // process made the hand-off, read back otherwise; a 2xx is a delivery whatever its age.
        var created = handOff.createdMilliseconds ?? currentInstant().wallMilliseconds
        if !outcome.isSuccess, handOff.createdMilliseconds == nil {
            switch await readState(of: id) {
            case .success(let state?): created = state.createdMilliseconds
            case .success(nil): break  // cancelled meanwhile: recording drops the outcome
            case .failure(let error):
                await hearUnreadable(id, handOff, error: error, nowMilliseconds: currentInstant().wallMilliseconds)
                return
            }
        }
        let ending = Ending(
            attempt: Attempt(id: id, number: Int(handOff.attempt)), outcome: outcome,
            createdMilliseconds: created, runner: .upload(ticket: handOff.ticket))
        // The same outcome path as the engine's; the body file's removal is file work, so the
        // I/O queue has work to do anyway.
        let recorded = await onIOQueue { [self] in
            let recorded = record(ending, continuing: false)
            log.removeBody(of: id, ticket: handOff.ticket)
            return recorded
        }
        if let compaction = recorded.compaction { await runCompaction(compaction) }
        // In the background the message (or the next of its ordering key) was handed off
        // again: the completion is heard once that pass has ended.
        _ = await recorded.pass?.value
    }

    /// A failed upload whose message cannot be read back: its age is unknown, so the retry
    /// policy cannot judge it (it would be judged as if just sent, and `expiry` would never
    /// give up). As for an engine attempt whose message cannot be read, the message waits
    /// `maximumDelay` and is read again then; `.storageFailed` reports it.
    private func hearUnreadable(
        _ id: MessageID, _ handOff: HandOff, error: LogError,
        nowMilliseconds now: UInt64
    ) async {
        guard core.endHandOff(id, ticket: handOff.ticket, dueAtLatest: now) else { return }
        let due = NextDue.afterUnreadableRecord(policy: configuration.retry, nowMilliseconds: now)
        await onIOQueue { [self] in
            core.recordUnreadable(id, error: error, dueMilliseconds: due).run()
            log.removeBody(of: id, ticket: handOff.ticket)
        }
        await carryOn()
    }

    /// After a completion: in the background (or before anything said where the app is), hand
    /// off again (the message, or the next of its ordering key), and return once that pass
    /// ended; in the foreground, the engine takes it.
    private func carryOn() async {
        _ = await pump(handOffAsked: true)?.value
    }

    /// A completion of a task that does not carry its message (any more): it ended while the
    /// app was dead and reconciliation gave it up for lost, or the message was cancelled. A 2xx
    /// still delivers a pending message (a task or attempt that has it now is cancelled or its
    /// outcome dropped); anything else is dropped, unlogged.
    private func hearLate(_ completion: BackgroundUploadCompletion) async {
        guard let parsed = HandOff.parse(taskDescription: completion.task.taskDescription) else { return }
        let id = parsed.id
        await onIOQueue { [self] in
            if case .response(let status, _) = completion.outcome, (200..<300).contains(status) {
                // A hand-off the message has now (a later one) ends with it: the effects cancel
                // its task and remove its body file.
                runWhenDurable(core.recordLateSuccess(id, attempt: parsed.attempt, status: UInt16(clamping: status)))
            }
            log.removeBody(of: id, ticket: parsed.ticket)
        }
        pump()
    }
}
