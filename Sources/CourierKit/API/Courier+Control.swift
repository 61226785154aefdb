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
        /// Of `remaining`, the messages the background session has (`handedOffCount`): the
        /// system delivers them, not this call.
        public var handedOff: Int
        /// A summary of `delivered` messages and `remaining` pending ones, `handedOff` of them
        /// with the background session.
        public init(delivered: Int, remaining: Int, handedOff: Int = 0) {
            self.delivered = delivered
            self.remaining = remaining
            self.handedOff = handedOff
        }
    }

    /// Withdraws message `id` (the id `send` returned) for good: it is never sent again, across
    /// restarts too (a `cancelled` record in the log, durable as the configured `durability`
    /// says: under `.always` before `cancel` returns, so it blocks for an fsync as `send`
    /// does; see "Durability settings"). `delivered(id)` throws `.cancelled`; `events()` reports
    /// `.cancelled(id)`; the message's `send` callbacks are not called. An attempt already in
    /// flight is not stopped (a POST under way may still reach the server) and its outcome is
    /// ignored. The next message with the same ordering key may go at once. If the fsync
    /// fails, `events()` reports `.storageFailed` and the log takes no more records until the
    /// courier is reopened; the message may then come back.
    /// - Returns: whether the message was still pending (false if unknown, or already
    ///   delivered, abandoned or cancelled, or the courier is closed).
    @discardableResult
    public func cancel(_ id: MessageID) -> Bool {
        // A handed-off message: the effects cancel its task too and remove its body file (on
        // the I/O queue). `cancel` appends its record on the caller's thread, as `send` does,
        // and under `.always` waits there for its fsync, as `send` does too.
        let cancelled = core.handle(.cancel(id)).run().count > 0
        if cancelled { pump() }
        return cancelled
    }

    /// Withdraws every pending message for good, as `cancel(_:)` withdraws one: what to call at
    /// logout, or when the user asks for their data to be erased. Each gets a `cancelled` record
    /// (in as few batches as fit a log segment, each whole or not at all) and a `.cancelled`
    /// event; their callbacks are not called; attempts under way are not stopped, and their
    /// outcomes are ignored; messages handed to the background session have their tasks
    /// cancelled. Messages sent afterwards are not affected. The bodies stay in the log's files
    /// until compaction drops their segments: to erase them from the disk at once, `close()` the
    /// courier and delete its directory.
    /// - Returns: how many messages were cancelled (0 when none was pending, or once the
    ///   courier is closed).
    @discardableResult
    public func cancelAll() -> Int {
        let cancelled = core.handle(.cancelAll).run().count
        if cancelled > 0 { pump() }
        return cancelled
    }

    /// Starts no new attempt until `resume()`. Attempts in flight finish (and are logged) as
    /// usual. `send` still works: messages wait on disk.
    public func pause() {
        core.handle(.pause, at: currentInstant()).run()
    }

    /// Whether `pause()` holds the engine now.
    @_spi(CourierTesting) public var isPaused: Bool { core.status.isPaused }

    /// Undoes `pause()`: due messages start at once.
    public func resume() {
        core.handle(.resume, at: currentInstant()).run()
    }

    /// Makes every waiting message due now, keeping its attempt count: what to call when
    /// connectivity returns or the app comes to the foreground, so a message that was waiting
    /// out a long backoff does not wait for its timer. (Messages in flight are unaffected;
    /// the new due times are not logged, so after a restart the logged ones apply again.)
    public func retryNow() {
        core.handle(.retryNow, at: currentInstant()).run()
    }

    /// Delivers what it can within `budget` (on the configured clock), then stops cleanly:
    /// attempts still in flight are cancelled (not counted: their messages stay pending exactly
    /// as on disk, so no attempt is half-logged), the log is synced, and the summary says how
    /// many were delivered and how many remain. Delivers even while paused. Returns as soon as
    /// every message left is with the background session (`appDidEnterBackground()`): the
    /// system delivers those, and waiting for them would hold a background task's time for
    /// nothing (a processing task could wait for discretionary uploads until iOS expired it).
    /// Returns at once
    /// when the calling task is cancelled (a background task's expiration handler cancels it),
    /// after the same clean stop. Afterwards the courier carries on as before the call
    /// (delivering, or paused if it was).
    public func deliverPending(within budget: Duration) async -> DeliverySummary {
        let before = core.handle(.forcedRun(.begin)).reply.count
        retryNow()
        let deadline = currentInstant().elapsed + budget
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitUntilIdle(exceptHandedOff: true, cancellable: true) }
            group.addTask { [clock] in try? await clock.sleep(deadline) }
            // The first to end (idle, budget spent, or this task cancelled) ends the wait.
            _ = await group.next()
            group.cancelAll()
        }
        let inFlight = core.handle(.forcedRun(.stop)).reply.attempts
        for task in inFlight { task.cancel() }
        for task in inFlight { await task.value }
        await onIOQueue { [log] in try? log.sync() }
        let reply = core.handle(.forcedRun(.end), at: currentInstant()).run()
        return DeliverySummary(delivered: reply.count - before, remaining: reply.pending, handedOff: reply.handedOff)
    }

    /// Returns when no message is pending (or the courier is closed); with `exceptHandedOff`,
    /// also when only handed-off messages are left; if `cancellable`, also when the calling task
    /// is cancelled (else a cancellation changes nothing: `waitUntilIdle()`).
    func waitUntilIdle(exceptHandedOff: Bool, cancellable: Bool) async {
        let key = WaitKey()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiter = IdleWaiter(continuation: continuation, exceptHandedOff: exceptHandedOff)
                core.handle(.waitUntilIdle(key: key.id, waiter, cancelled: { cancellable && Task.isCancelled })).run()
            }
        } onCancel: {
            if cancellable { core.handle(.stopWaiting(key: key.id, for: nil)).run() }
        }
    }
}
