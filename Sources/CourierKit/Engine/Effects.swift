import Logging

/// Side effects collected under a lock and run after it is released, so no user code
/// (callbacks, event consumers, resumed tasks) ever runs while a lock is held.
struct Effects {
    var events: [CourierEvent] = []
    /// How many of `events` were yielded to subscribers under the lock already (a plan yields
    /// the events before its attempts, so that they come first: `yieldEventsSoFar`).
    var yieldedCount = 0
    /// Who receives `events`: filled in by `CourierCore.write`, never by hand.
    var subscribers: [EventBuffer] = []
    /// The app's `onDelivered` and `onAbandoned` callbacks, each with its arguments.
    var callbacks: [() -> Void] = []
    /// Each `delivered(_:)` waiter released, with the error it is told (nil: delivered).
    var answered: [(DeliveryWaiter, Result<UInt16, any Error>)] = []
    var idle: [CheckedContinuation<Void, Never>] = []
    var finishStreams: [EventBuffer] = []
    /// Hand-offs that ended with their message (cancelled, or delivered by a late completion):
    /// `run()` hands each to `endHandOff` (its task is cancelled, its body file removed).
    var endedHandOffs: [(MessageID, HandOff)] = []
    /// Set by `CourierCore.write` when a hand-off ended: the courier's way to end one.
    var endHandOff: (@Sendable (MessageID, HandOff) -> Void)?
    /// The last record the critical section appended, if it appended one: under
    /// `durability: .always`, `CourierCore.write` makes it durable before it lets the section's
    /// plan run or returns these effects, so nothing is seen of a state change that a power
    /// loss could undo.
    var appendedThrough: UInt64?
    /// The plan the section asked for (`PlanRequest`): `CourierCore.write` carries it out when
    /// the section ends, never inside it, and under `.always` only once no record is waiting
    /// for its fsync.
    var plan: PlanRequest?
    /// `.always`: the message this section enqueued. If its fsync fails, this courier drops it
    /// (no attempt, no event, no callback) and `syncFailure` says why, for `send` to throw.
    var enqueued: MessageID?
    var syncFailure: CourierError?
    /// `.always`: the pending messages that message withdraws (the one it replaces, the one
    /// dropped at the bound), resolved once its record is durable; if its fsync fails, they
    /// stay pending, as if it was never sent.
    var withdrawals: [(MessageID, Resolution)] = []
    /// The records the section asks to append (`append`), each batch with the count of events
    /// emitted before it: `CourierCore.write` appends them as the body returns.
    var appends: [(batch: [Event], position: Int)] = []
    /// What the input answers its caller (`CoreInput`).
    var reply = Reply()
    /// Whether anyone subscribes: without subscribers, events are not even collected (an
    /// array per `send` for nobody showed in the send path's profile).
    var listening = true
    /// Set when the courier's logger wants events (see `Configuration.logger`).
    var logger: Logger?

    mutating func emit(_ event: CourierEvent) {
        if listening { events.append(event) }
    }

    /// Asks for `event`'s record, appended in this section before anyone sees it.
    mutating func append(_ event: Event) { appends.append(([event], events.count)) }

    /// Asks for `batch`'s records, in as few batches as fit a segment, each landing whole or
    /// not at all.
    mutating func append(batch: [Event]) {
        if !batch.isEmpty { appends.append((batch, events.count)) }
    }

    /// Under the lock: yields the events emitted so far to `subscribers` now (yielding only
    /// buffers: no consumer code runs), so that they precede what is yielded next.
    mutating func yieldEventsSoFar(to subscribers: some Collection<EventBuffer>) {
        for event in events[yieldedCount...] { for s in subscribers { s.yield(event) } }
        yieldedCount = events.count
    }

    /// Runs everything the section left, then returns its answer (`reply`).
    @discardableResult
    func run() -> Reply {
        for event in events[yieldedCount...] { for s in subscribers { s.yield(event) } }
        if let logger { for event in events { Self.log(event, to: logger) } }
        for callback in callbacks { callback() }
        for (c, result) in answered { c.resume(returning: result) }
        for c in idle { c.resume() }
        for s in finishStreams { s.finish() }
        if let endHandOff { for (id, handOff) in endedHandOffs { endHandOff(id, handOff) } }
        return reply
    }
}

extension Effects {
    /// The events worth a log line, at the levels `Configuration.logger` documents.
    static func log(_ event: CourierEvent, to logger: Logger) {
        switch event {
        case .storageFailed(let error):
            logger.error("storage failure: \(error.message)", metadata: ["courier.error": "\(error.code.rawValue)"])
        case .abandoned(let id, let attempts, let reason):
            logger.warning(
                "message abandoned: \(reason)",
                metadata: ["courier.message-id": "\(id)", "courier.attempt": "\(attempts)"])
        case .destinationDown(let origin, let failures):
            logger.warning(
                "destination down after \(failures) failing attempts in a row: one probe at a time",
                metadata: ["courier.destination": "\(origin)"])
        case .destinationRecovered(let origin, let downFor, let released):
            logger.info(
                "destination recovered after \(downFor): \(released) waiting messages due now",
                metadata: ["courier.destination": "\(origin)"])
        // The engine logs attempts itself, with their destination (debug); `missedEvents` is a
        // reader's own, never emitted by the core.
        case .enqueued, .attemptStarted, .failed, .delivered, .cancelled, .handedOff, .missedEvents: break
        }
    }
}
