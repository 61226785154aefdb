import CourierLog
import Foundation

/// The delivery engine. No thread polls: `pump` starts what is due, then arms one timer for
/// the earliest message not yet due; sends, finished attempts and that timer call `pump`
/// again. **Only the engine sleeps**, and only on the injected clock.
extension Courier {
    /// Starts every due message the concurrency limit allows and re-arms the timer.
    func pump() {
        // Read the app's clock before taking the lock: no user code runs under it.
        let instant = currentInstant()
        let effects = lock.withLock { () -> Effects in
            var effects = Effects()
            guard !core.closed else { return effects }
            guard core.mayStartAttempts else {
                effects.idle = takeSettleWaitersIfSettled(at: instant)
                return effects
            }
            // Each turn starts one delivery: bounded by maxConcurrentDeliveries.
            while core.inFlight.count < configuration.maxConcurrentDeliveries,
                  let state = core.scheduler.takeDue(nowMilliseconds: instant.wallMilliseconds) {
                let attempt = Int(state.attempts) + 1
                effects.events.append(.attempt(state.id, number: attempt))
                core.inFlight[state.id] = Task { [self] in
                    let outcome = await transport.deliver(request(for: state, attempt: attempt))
                    // Logging the outcome may fsync (a segment roll) or unlink (compaction):
                    // blocking work, done on the I/O queue, not on the cooperative pool.
                    await onIOQueue { [self] in finish(state, attempt: attempt, outcome: outcome) }
                }
            }
            armTimer(at: instant)
            effects.subscribers = Array(core.subscribers.values)
            effects.idle = takeSettleWaitersIfSettled(at: instant)
            return effects
        }
        effects.run()
    }

    /// Under `lock`: one timer, for the earliest due message, if a delivery slot is free.
    private func armTimer(at instant: EngineInstant) {
        guard core.inFlight.count < configuration.maxConcurrentDeliveries,
              let due = core.scheduler.earliestDue() else { return }
        let deadline = instant.elapsed + .milliseconds(Int64(due - min(due, instant.wallMilliseconds)))
        if let timer = core.timer, timer.deadline <= deadline { return }
        core.timer?.task.cancel()
        let sleep = clock.sleep
        let task = Task { [weak self] in
            do { try await sleep(deadline) } catch { return }  // cancelled: a newer timer replaced it
            self?.timerFired(deadline)
        }
        core.timer = (task, deadline)
    }

    private func timerFired(_ deadline: Duration) {
        lock.withLock {
            if core.timer?.deadline == deadline { core.timer = nil }
        }
        pump()
    }

    /// The engine's "now": the injected clock's elapsed time, and the wall time at open plus
    /// that. Calls the app's clock, so never while holding `lock` (asserted in debug builds).
    func currentInstant() -> EngineInstant {
        #if DEBUG
        assert(!lock.isHeldByCurrentThread, "the app's clock must not be called under the courier's lock")
        #endif
        let elapsed = clock.elapsed()
        let wall = wallStartMilliseconds + UInt64(max(0, elapsed.seconds * 1000))
        wallTime.withLock { $0 = max($0, wall) }
        return EngineInstant(elapsed: elapsed, wallMilliseconds: wall)
    }

    /// Wall time in ms since 1970 (see `currentInstant()`).
    func wallNowMilliseconds() -> UInt64 { currentInstant().wallMilliseconds }

    private func request(for state: MessageState, attempt: Int) -> DeliveryRequest {
        var headers: [String: String] = [:]
        for h in state.headers { headers[h.name] = h.value }
        headers["Idempotency-Key"] = state.id.description
        return DeliveryRequest(url: URL(string: state.url)!, headers: headers, body: Data(state.body),
                               timeout: configuration.requestTimeout, messageID: state.id, attempt: attempt)
    }

    /// An attempt ended: decide, log the decision, update the schedule, tell the app.
    /// Runs on `ioQueue`.
    func finish(_ state: MessageState, attempt: Int, outcome: DeliveryOutcome) {
        let id = state.id
        if case .failure(let f) = outcome, f.kind == .cancelled {
            // Cancelled by close(): not an attempt. The message is pending, as on disk.
            let instant = currentInstant()
            let effects = lock.withLock { () -> Effects in
                core.scheduler.release(id)
                core.inFlight[id] = nil
                var effects = Effects()
                effects.idle = takeSettleWaitersIfSettled(at: instant)
                return effects
            }
            effects.run()
            return
        }
        let now = wallNowMilliseconds()
        var random = ClosureRandom(source: configuration.random)
        let decision = configuration.retry.decide(
            outcome, attempt: attempt, sinceSend: .milliseconds(Int64(now - min(now, state.createdMilliseconds))),
            now: Date(timeIntervalSince1970: Double(now) / 1000), using: &random)
        let effects = lock.withLock { () -> Effects in
            var effects = Effects()
            switch decision {
            case .delivered:
                let status = if case .response(let s, _) = outcome { UInt16(clamping: s) } else { UInt16(0) }
                record(.delivered(id, attempt: UInt32(attempt), status: status), &effects)
                resolve(id, .delivered, attempts: attempt, &effects)
            case .retry(let delay):
                let due = now + UInt64(max(0, delay.seconds * 1000))
                record(.attempted(id, attempt: UInt32(attempt), outcome: outcome, nextDueMilliseconds: due), &effects)
                core.scheduler.retry(id, attempts: UInt32(attempt), dueMilliseconds: due)
                effects.events.append(.failed(id, attempt: attempt, outcome: outcome, retryIn: delay))
            case .giveUp(let reason):
                record(.abandoned(id, attempt: UInt32(attempt), reason: reason), &effects)
                effects.events.append(.failed(id, attempt: attempt, outcome: outcome, retryIn: .zero))
                resolve(id, .abandoned(reason), attempts: attempt, &effects)
            }
            core.inFlight[id] = nil
            effects.subscribers = Array(core.subscribers.values)
            return effects
        }
        effects.run()
        compactIfWorthIt()
        pump()
    }

    /// Under `lock`: appends an event. A failure to log is reported, and delivery goes on in
    /// memory (the worst case is a duplicate POST after a restart, which the key dedupes).
    private func record(_ event: Event, _ effects: inout Effects) {
        do {
            _ = try log.append(event.encoded(), kind: event.kind)
        } catch {
            effects.events.append(.storageFailed("could not log \(event.kind) of \(event.id): \(error)"))
        }
    }

    /// Under `lock`: the message is done; release everyone waiting for it.
    private func resolve(_ id: MessageID, _ resolution: Resolution, attempts: Int, _ effects: inout Effects) {
        core.scheduler.remove(id)
        core.resolved.record(id, resolution)
        core.resolvedSinceCompaction += 1
        let callbacks = core.callbacks.removeValue(forKey: id)
        let waiters = core.waiters.removeValue(forKey: id) ?? []
        switch resolution {
        case .delivered:
            core.deliveredCount += 1
            effects.events.append(.delivered(id, attempts: attempts))
            if let callback = callbacks?.onDelivered { effects.delivered.append((callback, id)) }
            effects.successes += waiters
        case .abandoned(let reason):
            let error = CourierError(.abandoned, reason)
            effects.events.append(.abandoned(id, attempts: attempts, reason: reason))
            if let callback = callbacks?.onAbandoned { effects.abandoned.append((callback, id, error)) }
            effects.failures += waiters.map { ($0, error) }
        }
        if core.scheduler.isEmpty {
            effects.idle += core.idleWaiters.values
            core.idleWaiters.removeAll()
        }
    }
}

/// A moment as the engine sees it: the injected clock's elapsed time and the wall time.
struct EngineInstant {
    var elapsed: Duration
    var wallMilliseconds: UInt64
}

/// A `RandomNumberGenerator` over the configuration's closure.
struct ClosureRandom: RandomNumberGenerator {
    let source: @Sendable () -> UInt64
    mutating func next() -> UInt64 { source() }
}
