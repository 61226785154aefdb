import CourierLog
import Foundation

/// The engine's runner: a task per delivery slot in use. It makes the attempt the scheduler
/// gave it (reads the message back, prepares and sends the request, records the outcome on the
/// thread that heard it, through the outcome path of `Courier+Outcome.swift`, shared with
/// background uploads), then the next one the scheduler gives it, until there is none. It hops
/// to the I/O queue only for blocking work: an append that could block (a segment roll, or
/// `durability: .always`), or a compaction.
extension Courier {
    /// Runs `first`, then each attempt the scheduler gives this runner as one ends. Ends when
    /// it gives none (nothing due, paused, stopping, closed), or when the task is cancelled:
    /// `close()` and `deliverPending` cancel runners, and the plan stops giving them attempts.
    func runAttempts(from first: Attempt, token: UInt64) async {
        var next: Attempt? = first
        var turns = 0
        // Each turn makes one attempt the scheduler took for this runner: the loop ends with them.
        while let attempt = next {
            next = await run(attempt, token: token)
            turns += 1
            // A transport that answers without suspending (a test double) would keep this
            // thread of the cooperative pool to itself: other work gets a turn now and then.
            if turns % Self.turnsBeforeYield == 0 { await Task.yield() }
        }
    }

    /// Attempts a runner makes in a row before it yields (every real transport suspends in
    /// each; a test double may not).
    static let turnsBeforeYield = 32

    /// One attempt: read the message back, POST it, record what happened.
    /// - Returns: the attempt this runner makes next, if the scheduler gave it one.
    private func run(_ attempt: Attempt, token: UInt64) async -> Attempt? {
        let state: MessageState
        switch await readState(of: attempt.id) {
        case .success(let loaded?):
            state = loaded
        case .success(nil):
            // Cancelled (`cancel(_:)`) before its state was read: nothing to send. The slot
            // is free for the next due message.
            return endAttempt(token)
        case .failure(let error):
            let due = currentInstant().wallMilliseconds + UInt64(configuration.retry.maximumDelay.seconds * 1000)
            core.recordUnreadable(attempt.id, error: error, dueMilliseconds: due).run()
            return endAttempt(token)
        }
        configuration.logger.debug("attempt starting", metadata: Self.metadata(attempt, url: state.url))
        let outcome: DeliveryOutcome
        switch await prepared(request(for: state, attempt: attempt.number)) {
        case .success(let request): outcome = await transport.deliver(request)
        case .failure(let failure): outcome = .failure(failure)
        }
        if case .failure(let f) = outcome, f.kind == .cancelled {
            // Cancelled by close(), or at the end of `deliverPending`: not an attempt. The
            // message is pending, exactly as on disk. The runner ends: a transport that says
            // "cancelled" of its own accord (a dead process's, in the simulation) would have
            // it take the same message again at once, in a loop.
            core.release(attempt.id)
            return endAttempt(token, continuing: false)
        }
        let ending = Ending(
            attempt: attempt, outcome: outcome, createdMilliseconds: state.createdMilliseconds,
            runner: .engine(token: token), url: state.url)
        let recorded = await record(ending)
        guard let compaction = recorded.compaction else { return recorded.next }
        // Its slot was kept for the compaction (blocking file work, on the I/O queue).
        await onIOQueue { [core] in core.compact(compaction).run() }
        return endAttempt(token)
    }

    /// An attempt ended without an outcome to record: its slot is free, and what the scheduler
    /// plans next starts, in one critical section (the first attempt in this runner, unless
    /// its task was cancelled).
    private func endAttempt(_ token: UInt64, continuing mayContinue: Bool = true) -> Attempt? {
        let instant = currentInstant()
        let continuing = mayContinue && !Task.isCancelled
        let (scheduled, effects) = core.write { state, effects in
            schedule(&state, &effects, at: instant, handOffAsked: false, freeing: token, continuing: continuing)
        }
        effects.run()
        return scheduled.next
    }
}
