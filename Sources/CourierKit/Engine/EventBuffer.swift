import CourierLog

/// One subscriber's events, between the core, which yields under its lock (an append, never
/// a wait), and the subscriber's reader (`AsyncStream(unfolding:)`).
///
/// It keeps the newest `capacity` events. A reader that falls that far behind loses the oldest,
/// and reads `.missedEvents(n)` exactly where they were: a screen knows to read the state again
/// (`pendingMessages()`) instead of going silently stale, as it would behind a plain
/// `AsyncStream` buffer, which drops without a word.
final class EventBuffer: Sendable {
    private struct State {
        /// The unread events, oldest first.
        var events = FIFOQueue<CourierEvent>()
        var missed = 0
        var waiter: CheckedContinuation<CourierEvent?, Never>?
        var finished = false
    }

    private let state = Locked(State())
    let capacity: Int
    /// Called once when the stream ends (its reader's task was cancelled, or `finish()`).
    private let onTermination: Locked<(@Sendable () -> Void)?>

    init(capacity: Int = 10_000, onTermination: (@Sendable () -> Void)? = nil) {
        precondition(capacity >= 1)
        self.capacity = capacity
        self.onTermination = Locked(onTermination)
    }

    /// Sets what runs when the stream ends (the core's unsubscription, known only after
    /// subscribing).
    func setOnTermination(_ action: @escaping @Sendable () -> Void) {
        onTermination.withLock { $0 = action }
    }

    /// Adds `event` (or hands it to a reader that waits). Never blocks: safe under a lock.
    func yield(_ event: CourierEvent) {
        let waiter = state.withLock { s -> CheckedContinuation<CourierEvent?, Never>? in
            guard !s.finished else { return nil }
            if let waiter = s.waiter {
                assert(s.events.first == nil && s.missed == 0, "a reader waits only on an empty buffer")
                s.waiter = nil
                return waiter
            }
            s.events.append(event)
            if s.events.entries.count > capacity {
                _ = s.events.popFirst()
                s.missed += 1
            }
            return nil
        }
        waiter?.resume(returning: event)
    }

    /// Ends the stream: the reader gets what is buffered, then the end.
    func finish() {
        let waiter = state.withLock { s -> CheckedContinuation<CourierEvent?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
        onTermination.take()?()
    }

    /// The next event, `.missedEvents(n)` first if the oldest were dropped, or nil at the end
    /// (or when the reading task is cancelled: `stream`'s `onCancel` ends the buffer, which
    /// resumes a waiting reader). One reader at a time.
    func next() async -> CourierEvent? {
        await withCheckedContinuation { (continuation: CheckedContinuation<CourierEvent?, Never>) in
            let ready = state.withLock { s -> CourierEvent?? in
                if s.missed > 0 {
                    defer { s.missed = 0 }
                    return .some(.missedEvents(s.missed))
                }
                if let event = s.events.popFirst() { return .some(event) }
                if s.finished || Task.isCancelled { return .some(nil) }
                // A second reader would leave the first waiting for ever: a trap, not a hang.
                precondition(s.waiter == nil, "a Courier event stream has one reader at a time")
                s.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Whether a reader waits for the next event now (tests).
    var hasWaitingReaderForTesting: Bool { state.withLock { $0.waiter != nil } }

    /// The stream readers get: `AsyncStream`, fed by `next()`; cancelling the reading task
    /// finishes the buffer (`onCancel`, run while `next()` waits). A stream dropped unread (its
    /// reader broke out of its loop) ends the subscription too: the unfolding closure holds
    /// the only `Subscription`, whose deinit finishes the buffer.
    var stream: AsyncStream<CourierEvent> {
        let subscription = Subscription(buffer: self)
        return AsyncStream(
            unfolding: { await subscription.buffer.next() }, onCancel: { subscription.buffer.finish() })
    }

    /// Ends its buffer when the stream that holds it goes away.
    private final class Subscription: Sendable {
        let buffer: EventBuffer
        init(buffer: EventBuffer) { self.buffer = buffer }
        deinit { buffer.finish() }
    }
}
