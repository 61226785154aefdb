/// Control of delivery for app lifecycles (platform-neutral, so tested on every platform):
/// pause in the background, retry at once when the network returns or the app comes to the
/// foreground, and deliver within a time budget when iOS grants one.
extension Courier {
    /// What `deliverPending(within:)` achieved.
    public struct DeliverySummary: Sendable, Hashable {
        /// Messages delivered during the call.
        public var delivered: Int
        /// Messages still pending when it returned.
        public var remaining: Int
        public init(delivered: Int, remaining: Int) {
            self.delivered = delivered
            self.remaining = remaining
        }
    }

    /// Starts no new attempt until `resume()`. Attempts in flight finish (and are logged) as
    /// usual. `send` still works: messages wait on disk.
    public func pause() {
        lock.withLock { core.paused = true }
    }

    /// Undoes `pause()`: due messages start at once.
    public func resume() {
        lock.withLock { core.paused = false }
        pump()
    }

    /// Makes every waiting message due now, keeping its attempt count: what to call when
    /// connectivity returns or the app comes to the foreground, so a message that was waiting
    /// out a long backoff does not wait for its timer. (Messages in flight are unaffected;
    /// the new due times are not logged, so after a restart the logged ones apply again.)
    public func retryNow() {
        let now = currentInstant().wallMilliseconds
        lock.withLock { _ = core.scheduler.makeDue(atOrBefore: now) }
        pump()
    }

    /// Delivers what it can within `budget` (on the configured clock), then stops cleanly:
    /// attempts still in flight are cancelled (not counted: their messages stay pending exactly
    /// as on disk, so no attempt is half-logged), the log is synced, and the summary says how
    /// many were delivered and how many remain. Delivers even while paused. Returns at once
    /// when the calling task is cancelled (a background task's expiration handler cancels it),
    /// after the same clean stop. Afterwards the courier carries on as before the call
    /// (delivering, or paused if it was).
    public func deliverPending(within budget: Duration) async -> DeliverySummary {
        let before = lock.withLock { () -> Int in
            core.forcedRuns += 1
            return core.deliveredCount
        }
        retryNow()
        let deadline = currentInstant().elapsed + budget
        let sleep = clock.sleep
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitUntilIdleOrCancelled() }
            group.addTask { try? await sleep(deadline) }
            // The first to end (idle, budget spent, or this task cancelled) ends the wait.
            _ = await group.next()
            group.cancelAll()
        }
        let inFlight = lock.withLock { () -> [Task<Void, Never>] in
            core.stopping += 1
            return Array(core.inFlight.values)
        }
        for task in inFlight { task.cancel() }
        for task in inFlight { await task.value }
        await onIOQueue { [log] in try? log.sync() }
        let summary = lock.withLock { () -> DeliverySummary in
            core.stopping -= 1
            core.forcedRuns -= 1
            return DeliverySummary(delivered: core.deliveredCount - before, remaining: core.scheduler.count)
        }
        pump()
        return summary
    }

    /// `waitUntilIdle()` that also ends when the calling task is cancelled.
    func waitUntilIdleOrCancelled() async {
        let key = lock.withLock { () -> Int in
            defer { core.nextWaiterKey += 1 }
            return core.nextWaiterKey
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = lock.withLock { () -> Bool in
                    if core.scheduler.isEmpty || core.closed || Task.isCancelled { return true }
                    core.idleWaiters[key] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            lock.withLock { core.idleWaiters.removeValue(forKey: key) }?.resume()
        }
    }
}
