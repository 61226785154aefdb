import CourierLog
import Foundation
import Logging

/// The delivery engine. No thread polls: `pump` carries out the scheduler's plan (attempts
/// to start, uploads to hand off, one timer for the earliest message not yet due); sends,
/// finished attempts and passes, completions and that timer call `pump` again. **Only the
/// engine sleeps**, and only on the injected clock.
extension Courier {
    /// Starts what the scheduler says should start now and re-arms the timer. With
    /// `handOffAsked` (after an upload's completion), messages are handed off unless the app is
    /// known to be in the foreground (in the background they always are).
    /// - Returns: the hand-off pass this call started, if any (its value: how many it handed off).
    @discardableResult
    func pump(at now: EngineInstant? = nil, handOffAsked: Bool = false) -> Task<Int, Never>? {
        // Read the app's clock before taking a lock: no user code runs under one.
        let instant = now ?? currentInstant()
        let limits = schedulerLimits
        // One critical section: what starts is taken, its tasks made (making a task runs no
        // app code) and the timer armed against the same state.
        let (pass, effects) = core.write { state, effects -> Task<Int, Never>? in
            let plan = Scheduler.plan(&state, at: instant, limits: limits, handOffAsked: handOffAsked)
            for attempt in plan.attempts {
                // Yielded under the lock (yielding only buffers: no consumer code runs), so it
                // precedes anything the attempt itself emits.
                for subscriber in state.subscribers.values {
                    subscriber.yield(.attempt(attempt.id, number: attempt.number))
                }
                let token = state.scheduler.takeToken()
                state.scheduler.attempts[token] = Task { [self] in await run(attempt, token: token) }
            }
            var pass: Task<Int, Never>?
            if !plan.uploads.isEmpty, let uploads = configuration.backgroundUploads {
                let token = state.scheduler.takeToken()
                let task = Task { [self] in await handOffPass(plan.uploads, uploads, token: token) }
                state.scheduler.passes[token] = task
                pass = task
            }
            if let deadline = plan.timerDeadline { armTimer(&state, deadline: deadline) }
            effects.idle += takeSettleWaitersIfSettled(&state, at: instant)
            return pass
        }
        effects.run()
        return pass
    }

    /// Under the core's lock: replaces the timer with one for `deadline`.
    private func armTimer(_ state: inout CoreState, deadline: Duration) {
        state.scheduler.timer?.task.cancel()
        let sleep = clock.sleep
        let task = Task { [weak self] in
            do { try await sleep(deadline) } catch { return }  // cancelled: a newer timer replaced it
            self?.timerFired(deadline)
        }
        state.scheduler.timer = (task, deadline)
    }

    private func timerFired(_ deadline: Duration) {
        _ = core.write { state, _ in
            if state.scheduler.timer?.deadline == deadline { state.scheduler.timer = nil }
        }
        pump()
    }

    /// One attempt: read the message back, POST it, log what happened.
    private func run(_ attempt: Attempt, token: UInt64) async {
        let read: Result<MessageState?, LogError>
        if let recent = core.recentState(attempt.id) {
            read = .success(recent)
        } else {
            read = await onIOQueue(readQueue) { [core] in
                Result { () throws(LogError) in try core.loadState(attempt.id) }
            }
        }
        let outcome: DeliveryOutcome
        let state: MessageState
        switch read {
        case .success(let loaded?):
            state = loaded
            configuration.logger.debug("attempt starting", metadata: Self.metadata(attempt, state))
            outcome = await deliver(request(for: state, attempt: attempt.number))
        case .success(nil):
            // Cancelled (`cancel(_:)`) before its state was read: nothing to send. The slot
            // is free for the next due message.
            end(token)
            pump()
            return
        case .failure(let error):
            let due = currentInstant().wallMilliseconds + UInt64(configuration.retry.maximumDelay.seconds * 1000)
            core.recordUnreadable(attempt.id, error: error, dueMilliseconds: due).run()
            end(token)
            pump()
            return
        }
        // Logging the outcome may fsync (a segment roll) or unlink (compaction): blocking work,
        // done on the I/O queue, not on the cooperative pool.
        await onIOQueue { [self] in finish(attempt, state: state, outcome: outcome, token: token) }
    }

    /// Runs `prepareRequest` (if any), then the transport. A throw from `prepareRequest` is a
    /// failed attempt that sent nothing; only the error's type is kept (it may hold secrets).
    private func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome {
        guard let prepare = configuration.prepareRequest else { return await transport.deliver(request) }
        var prepared = request
        do {
            try await prepare(&prepared)
        } catch {
            if Task.isCancelled || error is CancellationError { return .failure(TransportFailure(.cancelled, "cancelled")) }
            return .failure(TransportFailure(.requestPreparation, "prepareRequest threw \(type(of: error))"))
        }
        return await transport.deliver(prepared)
    }

    /// The engine's "now": the injected clock's elapsed time, and the wall time at open plus
    /// that. Calls the app's clock, so never while holding a lock (asserted in debug builds).
    func currentInstant() -> EngineInstant {
        #if DEBUG
        assert(!core.isHeldByCurrentThread, "the app's clock must not be called under the core's lock")
        #endif
        let elapsed = clock.elapsed()
        let wall = wallStartMilliseconds + UInt64(max(0, elapsed.seconds * 1000))
        wallTime.withLock { $0 = max($0, wall) }
        return EngineInstant(elapsed: elapsed, wallMilliseconds: wall)
    }

    /// Wall time in ms since 1970 (see `currentInstant()`).
    func wallNowMilliseconds() -> UInt64 { currentInstant().wallMilliseconds }

    func request(for state: MessageState, attempt: Int) -> DeliveryRequest {
        var headers: [String: String] = [:]
        for h in state.headers { headers[h.name] = h.value }
        headers["Idempotency-Key"] = state.id.description
        return DeliveryRequest(url: URL(string: state.url)!, headers: headers, body: Data(state.body),
                               timeout: configuration.requestTimeout, messageID: state.id, attempt: attempt)
    }

    /// An attempt ended: decide (the retry policy, outside any lock), then log the decision and
    /// update the projection (the core, in one critical section). Runs on `ioQueue`.
    private func finish(_ attempt: Attempt, state: MessageState, outcome: DeliveryOutcome, token: UInt64) {
        if case .failure(let f) = outcome, f.kind == .cancelled {
            // Cancelled by close(): not an attempt. The message is pending, as on disk.
            core.release(attempt.id)
            end(token)
            return
        }
        let now = wallNowMilliseconds()
        let (verdict, decision, random) = judge(outcome, attempt: attempt.number, createdMilliseconds: state.createdMilliseconds,
                                                nowMilliseconds: now)
        configuration.logger.debug("attempt ended: \(outcome) → \(decision)", metadata: Self.metadata(attempt, state))
        let report = destinationReport(outcome, nowMilliseconds: now, random: random,
                                       startedMilliseconds: attempt.startedMilliseconds)
        let effects = core.record(verdict, of: attempt, outcome: outcome, destination: report)
        effects.run()
        // The slot is free; settle waiters are told by the pump, after the compactor ran.
        end(token, tellSettleWaiters: false)
        compactIfWorthIt()
        pump()
    }

    /// The retry policy's verdict on an attempt's outcome, decided outside any lock, with a
    /// random value for the destination's probe delay. The engine's attempts and background
    /// uploads' completions are judged alike.
    func judge(_ outcome: DeliveryOutcome, attempt: Int, createdMilliseconds: UInt64,
               nowMilliseconds now: UInt64) -> (AttemptVerdict, RetryPolicy.Decision, UInt64) {
        var random = ClosureRandom(source: configuration.random)
        let decision = configuration.retry.decide(
            outcome, attempt: attempt, sinceSend: .milliseconds(Int64(now - min(now, createdMilliseconds))),
            now: Date(timeIntervalSince1970: Double(now) / 1000), using: &random)
        let verdict: AttemptVerdict
        switch decision {
        case .delivered:
            let status = if case .response(let s, _) = outcome { UInt16(clamping: s) } else { UInt16(0) }
            verdict = .delivered(status: status)
        case .retry(let delay):
            verdict = .retry(dueMilliseconds: now + UInt64(max(0, delay.seconds * 1000)), delay: delay)
        case .giveUp(let reason):
            verdict = .giveUp(reason: reason)
        }
        return (verdict, decision, random.next())
    }

    /// What `outcome` says about its destination, with the probe delay ready to compute under
    /// the core's lock (the random value is drawn here, outside it).
    /// With `startedMilliseconds`, the outcome is an engine attempt's, taken then: its latency
    /// is measured (a background upload's is not: the system chose when it ran).
    func destinationReport(_ outcome: DeliveryOutcome, nowMilliseconds now: UInt64, random: UInt64,
                           startedMilliseconds: UInt64? = nil) -> DestinationReport {
        let backoff = configuration.destinationBackoff
        let policy = configuration.retry
        var retryAfter: UInt64?
        if case .response(let status, let header?) = outcome, DeliveryOutcome.honoursRetryAfter(status: status),
           let asked = RetryAfter.parse(header, now: Date(timeIntervalSince1970: Double(now) / 1000)) {
            retryAfter = UInt64(max(0, min(asked, policy.retryAfterLimit).seconds * 1000))
        }
        return DestinationReport(
            signal: DestinationBackoff.signal(for: outcome), nowMilliseconds: now,
            failuresBeforeDown: backoff.isEnabled ? backoff.failuresBeforeDown : 0,
            probeDelayMilliseconds: { failedProbes in
                let delay = DestinationBackoff.probeDelay(policy, failedProbes: failedProbes, outcome: outcome,
                                                          now: Double(now) / 1000, random: random)
                return UInt64(max(0, delay.seconds * 1000))
            },
            latencyMilliseconds: startedMilliseconds.map { now - min(now, $0) },
            startedMilliseconds: startedMilliseconds ?? 0, retryAfterMilliseconds: retryAfter,
            wasAnswered: { if case .response = outcome { true } else { false } }())
    }

    /// The metadata of an attempt's log lines (never headers or the body).
    private static func metadata(_ attempt: Attempt, _ state: MessageState) -> Logger.Metadata {
        ["courier.message-id": "\(attempt.id)", "courier.attempt": "\(attempt.number)", "courier.destination": "\(state.url)"]
    }

    /// An attempt's task is done: its delivery slot is free.
    private func end(_ token: UInt64, tellSettleWaiters: Bool = true) {
        let instant = currentInstant()
        core.write { state, effects in
            state.scheduler.attempts[token] = nil
            if tellSettleWaiters { effects.idle += takeSettleWaitersIfSettled(&state, at: instant) }
        }.1.run()
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

/// Compaction (the protocol is in `CourierCore+Compaction.swift`), run on the I/O queue.
extension Courier {
    /// Compactions run since open (public as `compactionCount` in CourierTesting).
    @_spi(CourierTesting)
    public var compactionCountForTesting: Int { core.compactionCount }

    /// One compaction now, whether or not it is worth it, on the calling thread (benchmarks
    /// time it). Blocking file work: never call it on the cooperative pool.
    @_spi(CourierTesting)
    public func compactNowForTesting() { compact(force: true) }

    func compactIfWorthIt() {
        guard configuration.isCompactionEnabled else { return }
        compact(force: false)
    }

    /// One compaction; `force` skips the "is it worth it" test (for tests).
    func compact(force: Bool) { core.compact(force: force).run() }
}
