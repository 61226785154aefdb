import Foundation

extension Courier {
    /// Returns once message `id` is delivered (at once if it already was).
    /// Throws `.abandoned` if the retry policy gave up on it, `.closed` if the courier closes
    /// first, `.unknownMessage` for an id it never saw or resolved too long ago to remember.
    /// Cancelling the calling task does not end the wait (it ends when the message resolves
    /// or the courier closes).
    public func delivered(_ id: MessageID) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let immediate: Result<Void, CourierError>? = lock.withLock {
                if core.scheduler.entries[id] != nil {
                    guard !core.closed else { return .failure(CourierError(.closed, "the courier is closed")) }
                    core.waiters[id, default: []].append(continuation)
                    return nil
                }
                switch core.resolved[id] {
                case .delivered: return .success(())
                case .abandoned(let reason): return .failure(CourierError(.abandoned, reason))
                case nil: return .failure(CourierError(.unknownMessage, "no message \(id) is pending or recently resolved"))
                }
            }
            if let immediate { continuation.resume(with: immediate.mapError { $0 as any Error }) }
        }
    }

    /// Returns when no message is pending (or the courier is closed).
    public func waitUntilIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if core.scheduler.isEmpty || core.closed { return true }
                core.idleWaiters[core.nextWaiterKey] = continuation
                core.nextWaiterKey += 1
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// A new stream of everything that happens from now on. Each access makes its own stream;
    /// it keeps the newest 10,000 events if its reader falls behind, and finishes on `close()`.
    /// If opening the log found damage, every stream begins with a `.storageFailed` saying so
    /// (details in `recovery`).
    public var events: AsyncStream<CourierEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: CourierEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        let key = lock.withLock { () -> Int? in
            guard !core.closed else { return nil }
            // Yielding only buffers (no consumer code runs here), so it is safe under the lock,
            // and it orders this event before any the engine sends to the new subscriber.
            if let damage = core.openingDamage { continuation.yield(.storageFailed(damage)) }
            let key = core.nextSubscriber
            core.nextSubscriber += 1
            core.subscribers[key] = continuation
            return key
        }
        guard let key else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.lock.withLock { _ = self?.core.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    /// For tests (public as `settle()` in CourierTesting): returns once the engine has nothing
    /// runnable — no attempt in flight and no timer past its deadline waiting to run. With a
    /// manual clock, "advance, then settle" makes every step of the engine observable without
    /// sleeping.
    @_spi(CourierTesting)
    public func settleForTesting() async {
        let instant = currentInstant()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if isSettled(at: instant) { return true }
                core.settleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Under `lock`, with `instant` read before taking it.
    private func isSettled(at instant: EngineInstant) -> Bool {
        if core.closed { return true }
        guard core.inFlight.isEmpty else { return false }
        if !core.mayStartAttempts { return true }  // paused: nothing more will start
        if let timer = core.timer, timer.deadline <= instant.elapsed { return false }
        // A message may be due with no timer yet (the pump that arms it has not run).
        if let due = core.scheduler.earliestDueWithoutMutation, due <= instant.wallMilliseconds, core.timer == nil { return false }
        return true
    }

    /// Under `lock`: the settle waiters to resume, if the engine is settled at `instant`.
    func takeSettleWaitersIfSettled(at instant: EngineInstant) -> [CheckedContinuation<Void, Never>] {
        guard !core.settleWaiters.isEmpty, isSettled(at: instant) else { return [] }
        defer { core.settleWaiters.removeAll() }
        return core.settleWaiters
    }
}
