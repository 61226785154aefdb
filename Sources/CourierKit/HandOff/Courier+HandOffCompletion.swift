import CourierLog
import Foundation

/// Hearing how background uploads ended (`BackgroundUploadSession.deliverCompletions`): one
/// path for every completion. It is classified once, into its recording: an outcome, judged
/// and recorded as an engine attempt's (`record(_:continuing:)`), or an end without one
/// (`UploadEnd`: a cancelled task, a message that cannot be read back, a task that
/// no longer carries its message); that is recorded with the next plan in one critical section
/// of the core, the upload's body file is removed, and in the background the hand-off pass that
/// follows is waited for.
extension Courier {
    /// One upload ended. An outcome is logged as a foreground attempt's is, judged by the same
    /// rule (`NextDue`) and destination backoff. In the background a failed message is handed
    /// off again at once, to begin after its backoff (and the next message of its ordering key
    /// follows a delivery); in the foreground it is the engine's. Returns once that is done.
    func hear(_ completion: BackgroundUploadCompletion) async {
        // After reconciliation, which must not see a task whose end was heard meanwhile.
        await core.status.reconciliation?.value
        guard configuration.backgroundUploads != nil, !core.status.isClosed else { return }
        guard let (recording, body) = await classify(completion) else { return }
        // Recording may wait for an fsync (`durability: .always`), and the body file's removal
        // is file work: the I/O queue has work to do anyway.
        let recorded = await onIOQueue { [self] in
            let recorded = recording()
            if recorded.endedHandOff || body.always { log.removeBody(of: body.id, ticket: body.ticket) }
            return recorded
        }
        // In the background the message (or the next of its ordering key) was handed off
        // again: the completion is heard once that pass has ended.
        _ = await recorded.pass?.value
    }

    /// How a completion is to be recorded, and the body file it leaves (`always`: removed
    /// whatever recording says, as a task that carries no message any more has no hand-off to
    /// end).
    private func classify(
        _ completion: BackgroundUploadCompletion
    ) async -> (@Sendable () -> Reply, body: (id: MessageID, ticket: UInt64, always: Bool))? {
        guard let (id, handOff) = core.handOff(carriedBy: completion.task) else {
            guard let parsed = HandOff.parse(taskDescription: completion.task.taskDescription) else { return nil }
            var status: UInt16?
            if case .response(let s, _) = completion.outcome, (200..<300).contains(s) { status = UInt16(clamping: s) }
            let end = UploadEnd.late(parsed.id, attempt: parsed.attempt, status: status)
            return ({ self.record(end) }, (parsed.id, parsed.ticket, true))
        }
        let body = (id: id, ticket: handOff.ticket, always: false)
        let outcome = completion.outcome
        if case .failure(let failure) = outcome, failure.kind == .cancelled {
            return ({ self.record(.cancelled(id, handOff)) }, body)
        }
        // A failure is judged by the message's age (`RetryPolicy.expiry`): known if this
        // process made the hand-off, read back otherwise; a 2xx is a delivery whatever its age.
        var (created, expiry) = (
            handOff.createdMilliseconds ?? currentInstant().wallMilliseconds, handOff.expiryMilliseconds
        )
        if !outcome.isSuccess, handOff.createdMilliseconds == nil {
            switch await readState(of: id) {
            case .success(let state?): (created, expiry) = (state.createdMilliseconds, state.expiryMilliseconds)
            case .success(nil): break  // cancelled meanwhile: recording drops the outcome
            case .failure(let error): return ({ self.record(.unreadable(id, handOff, error)) }, body)
            }
        }
        let ending = Ending(
            attempt: Attempt(id: id, number: Int(handOff.attempt)), outcome: outcome,
            createdMilliseconds: created, expiryMilliseconds: expiry, runner: .upload(ticket: handOff.ticket))
        return ({ self.record(ending) }, body)
    }
}
