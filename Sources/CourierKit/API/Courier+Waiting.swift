import Foundation

extension Courier {
    /// Returns once message `id` is delivered (at once if it already was), with what the server
    /// answered (`ServerAnswer`: its status, the headers `Configuration.answerHeaders` names, its
    /// body's first 16 KiB). For a message delivered in an earlier run, the answer is read back
    /// from the log; once compaction dropped its record, the status alone is left. A batch's
    /// messages (`Batching`) each get the batch's answer.
    /// - Throws: a `CourierError`: `.abandoned` if the retry policy gave up on it, `.cancelled`
    ///   if the app cancelled it, `.closed` if the courier closes first, `.unknownMessage` for an
    ///   id it never saw or resolved too long ago to remember. `CancellationError` at once when
    ///   the calling task is cancelled (a SwiftUI `.task` that ends, say): the message itself is
    ///   unaffected and still pending.
    @discardableResult
    public func delivered(_ id: MessageID) async throws -> ServerAnswer {
        let key = WaitKey()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: DeliveryWaiter) in
                core.handle(.waitForDelivery(id, key: key.id, continuation, cancelled: { Task.isCancelled })).run()
            }
        } onCancel: {
            core.handle(.stopWaiting(key: key.id, for: id)).run()
        }
        return await answer(of: id, status: try result.get())
    }

    /// The answer a delivered message's record keeps (a positioned read, on the read queue), or
    /// its status alone if the record is gone (compacted) or cannot be read.
    private func answer(of id: MessageID, status: UInt16) async -> ServerAnswer {
        guard let address = core.deliveredRecordAddress(of: id) else {
            return ServerAnswer(status: Int(status))  // not logged, or forgotten since (`resolvedMemoryCount`)
        }
        return await onIOQueue(readQueue) { [log] in
            guard let record = try? log.read(address),
                case .delivered(id, _, _, let headers, let body)? = Event.decode(kind: record.kind, body: record.body)
            else { return ServerAnswer(status: Int(status)) }
            var answer = ServerAnswer(status: Int(status), body: Data(body))
            for header in headers { answer.headers[header.name] = header.value }
            return answer
        }
    }

    /// Returns when no message is pending (or the courier is closed).
    public func waitUntilIdle() async {
        await waitUntilIdle(exceptHandedOff: false, cancellable: false)
    }

    /// Subscribes: a new stream of everything that happens from now on, which finishes on
    /// `close()`. Each call makes its own stream. It keeps the newest 10,000 events if its reader
    /// falls behind; the reader then gets `.missedEvents(n)` where the dropped ones were, and
    /// should read the state again (`pendingMessages()`). If opening the log found damage,
    /// every stream begins with a `.storageFailed` saying so (details in `recovery`).
    public func events() -> AsyncStream<CourierEvent> {
        subscribe(pendingIDs: false).events
    }

    /// A new subscriber's stream and, with `pendingIDs`, the pending messages' ids from the same
    /// section (`CoreInput.subscribe`); the stream's end unsubscribes it.
    func subscribe(pendingIDs: Bool) -> (events: AsyncStream<CourierEvent>, pendingIDs: [MessageID]) {
        let buffer = EventBuffer(capacity: configuration.eventBufferCapacity)
        let ids = core.handle(.subscribe(buffer, pendingIDs: pendingIDs)).run().pendingIDs
        let key = ObjectIdentifier(buffer)
        buffer.setOnTermination { [weak core] in core?.handle(.unsubscribe(key)) }
        return (buffer.stream, ids)
    }

    /// For simulations that jump from one timer to the next: when the engine's timer fires, as
    /// time since the courier opened on its clock; nil if none is armed. After `settle()`, every
    /// message due later has it armed, so the next step of the engine is known, not raced for.
    @_spi(CourierTesting)
    public var nextTimerDeadlineForTesting: Duration? { core.status.timerDeadline }

    /// For tests (public as `settle()` in CourierTesting): returns once the engine has nothing
    /// runnable (no attempt, hand-off pass or compaction under way, no timer past its deadline
    /// waiting to run) and the log's roll work queued so far is done. With a manual clock,
    /// "advance, then settle" makes every step of the engine observable without sleeping.
    @_spi(CourierTesting)
    public func settleForTesting() async {
        await core.status.reconciliation?.value  // background hand-off: the engine starts after it
        let instant = currentInstant()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            core.handle(.settle(continuation), at: instant).run()
        }
        // And the log's own work after a segment roll (made ahead, off the core's lock).
        await onIOQueue(readQueue) { [log] in log.waitForRollWork() }
    }
}
