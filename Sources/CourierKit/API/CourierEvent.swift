import Foundation

/// What happens to messages, in order, as `Courier.events()` reports it.
public enum CourierEvent: Sendable, Hashable {
    /// `send` wrote the message to the log.
    case enqueued(MessageID)
    /// Attempt `number` (1-based, counted across restarts) is starting.
    case attemptStarted(MessageID, number: Int)
    /// Attempt `attempt` failed; the next one is due at `nextAttemptAt` (its destination's
    /// pace or outage may hold it longer), or nil when the policy gave up: `.abandoned` follows.
    case failed(MessageID, attempt: Int, outcome: DeliveryOutcome, nextAttemptAt: Date?)
    /// The server answered 2xx.
    case delivered(MessageID, attempts: Int)
    /// The retry policy gave up; the message will not be sent again.
    case abandoned(MessageID, attempts: Int, reason: AbandonReason)
    /// The app withdrew the message with `Courier.cancel(_:)`; it will not be sent again.
    case cancelled(MessageID)
    /// Attempt `attempt` was handed to the background upload session
    /// (`Configuration.backgroundUploads`): the system makes it, even while the app is
    /// suspended; `.delivered` or `.failed` follows when its completion is heard.
    case handedOff(MessageID, attempt: Int)
    /// Storage trouble, as an error (`.storageFull` for a full disk, `.storageFailed` for the
    /// rest) whose message says what, in words for people. Either a state change could not be
    /// written to the log: delivery goes on in memory, and after a restart the message may be
    /// sent again (the server dedupes by `Idempotency-Key`). Or opening the log found damage
    /// (details in `Courier.recovery`): then it is the first event of every stream.
    case storageFailed(CourierError)
    /// `destination` (an origin: scheme, host and port, as `https://host:443`) is considered
    /// down after `consecutiveFailures` failing attempts in a row: its messages wait, and one at a
    /// time goes as a probe, spaced by the retry policy (see `DestinationBackoff`).
    case destinationDown(URL, consecutiveFailures: Int)
    /// A probe to `destination` was answered after it was down for `downFor`: its `released`
    /// waiting messages are due at once.
    case destinationRecovered(URL, downFor: Duration, released: Int)
    /// This stream's reader fell more than 10,000 events behind: the `count` oldest unread ones
    /// were dropped, just before this point. What was missed is in the state: read it again
    /// (`Courier.pendingMessages()`), as `CourierModel` does.
    case missedEvents(Int)
}
