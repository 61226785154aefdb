import CourierLog
import Foundation
import Logging

/// The delivery engine, as the facade sees it. No thread polls: the core carries out the
/// scheduler's plan (attempts to start, uploads to hand off, one timer for the earliest message
/// not yet due) in every intent that can make something runnable; `pump` asks for it
/// (`CoreInput.wake`) when nothing else did. **Only the engine sleeps**, and only on the injected
/// clock. The tasks the plans start are made here (`launcher`): a runner per delivery slot, a
/// hand-off pass, the timer, a compaction.
extension Courier {
    /// Starts what the scheduler says should start now and re-arms the timer.
    func pump() {
        // Read the app's clock before taking a lock: no user code runs under one.
        core.handle(.wake, at: currentInstant()).run()
    }

    /// How the core starts what its plans say: the tasks' bodies are the facade's (it holds
    /// the transport, the clock and the session), held weakly (the facade owns the core).
    var launcher: Launcher {
        Launcher(
            // A runner holds the facade while it runs (making a task runs no app code, so the core
            // does it under its lock).
            startRunner: { [weak self] attempt, token in
                guard let self else { return Task {} }
                return Task { [self] in await runAttempts(from: attempt, token: token) }
            },
            startPass: { [weak self] taken, token in
                Task { [weak self] in await self?.handOffPass(taken, token: token) ?? 0 }
            },
            startTimer: { [weak self, sleep = clock.sleep] deadline in
                Task { [weak self] in
                    do { try await sleep(deadline) } catch { return }  // cancelled: a newer timer replaced it
                    guard let self else { return }
                    core.handle(.timerFired(deadline: deadline), at: currentInstant()).run()
                }
            },
            startCompaction: { [weak self] plan in
                self?.ioQueue.async { [weak self] in self?.compact(plan) }
            })
    }

    /// The engine's "now": the injected clock's elapsed time, and the wall time at open plus
    /// that. Calls the app's clock, so never while holding a lock (asserted in debug builds).
    func currentInstant() -> EngineInstant {
        assert(!core.isHeldByCurrentThread, "the app's clock must not be called under the core's lock")
        let elapsed = clock.elapsed()
        let wall = wallStartMilliseconds + UInt64(max(0, elapsed.seconds * 1000))
        return EngineInstant(elapsed: elapsed, wallMilliseconds: wall)
    }

    /// The engine's wall time now, as a `Date` (the models stamp changes with it).
    func wallDate() -> Date { Date(timeIntervalSince1970: Double(currentInstant().wallMilliseconds) / 1000) }
}

/// A moment as the engine sees it: the injected clock's elapsed time and the wall time.
struct EngineInstant {
    var elapsed: Duration
    var wallMilliseconds: UInt64
}

/// Compaction (the protocol is in `CourierCore+Control.swift`), run on the I/O queue.
extension Courier {
    /// Compactions run since open (public as `compactionCount` in CourierTesting).
    @_spi(CourierTesting)
    public var compactionCountForTesting: Int { core.status.compactions }

    /// Appends that found the active segment full and the next one not prepared yet, so grew
    /// it (`make lock-hold` reports it).
    @_spi(CourierTesting)
    public var appendsPastSegmentSizeForTesting: Int { log.appendsPastSegmentSize }

    /// One compaction now, whether or not it is worth it, on the calling thread (benchmarks
    /// time it). Blocking file work: never call it on the cooperative pool.
    @_spi(CourierTesting)
    public func compactNowForTesting() {
        if let plan = core.planCompaction(force: true) { compact(plan) }
    }

    /// Carries out a compaction planned (and marked under way) by `planCompaction`, on the
    /// calling thread (blocking file work: the I/O queue), then ends it, which tells settle
    /// waiters (`settle()` waits for a compaction under way) and subscribers of a failure.
    func compact(_ plan: CompactionPlan) {
        let failure = core.compact(plan)
        core.handle(.compactionEnded(error: failure), at: currentInstant()).run()
    }
}

/// The engine's view of an injected `any Clock<Duration>`: elapsed time since the courier
/// opened, and a sleep until an elapsed time. Opening the existential once here keeps the
/// rest of the engine free of generic instants.
struct EngineClock: Sendable {
    let elapsed: @Sendable () -> Duration
    let sleep: @Sendable (_ untilElapsed: Duration) async throws -> Void
}

extension EngineClock {
    /// Called with an `any Clock<Duration>`, which Swift opens for `C`.
    init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let start = clock.now
        self.init(
            elapsed: { start.duration(to: clock.now) },
            sleep: { try await clock.sleep(until: start.advanced(by: $0), tolerance: nil) })
    }
}
