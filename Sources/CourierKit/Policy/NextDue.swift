import CourierLog
import Foundation

/// When a message is next due, or how its life ends: the one rule. The engine and background
/// hand-off follow it for every outcome, an unreadable record and a reopened log. Elsewhere a
/// due time only comes forward, to now, unlogged: `retryNow()`, a destination that answers
/// again (its waiting messages), an upload cancelled on the way back to the foreground. Pure: no
/// lock, no random source (jitter is seeded from a value drawn before), so the core applies it
/// under its lock once the outcome's destination is known, and the tests below read it as a
/// table (`NextDueTests`).
///
/// | what happened | next |
/// |---|---|
/// | 2xx | delivered |
/// | the policy gives up (`maximumAttempts`, `expiry`, a 4xx it gives up on) | abandoned |
/// | 429 or 503 from a destination answering others (`.limited`) | after its `Retry-After`, or now (1) |
/// | 401 from a background upload | now, in the foreground only (2) |
/// | any other failure | the policy's backoff (5), at least the server's `Retry-After` (3) |
/// | the message's record could not be read | after `maximumDelay`, when it is read again |
/// | a due time replayed at open, beyond the policy | `maximumDelay` or `retryAfterLimit` from now (4) |
/// | a retry due now whose destination's retry budget is empty | at its next token (6) |
///
/// (1) Busy, not failing: the destination's limit paces it, not the message's backoff.
/// (2) `prepareRequest` makes fresh credentials; the upload's were made at hand-off.
/// (3) A `Retry-After` is clamped to `retryAfterLimit`.
/// (4) The first for a due time from backoff, the second for a server's wait: an app that lowered
/// its delays in an update, or a wall clock that went backwards since the record was written.
/// (5) Of attempt max(1, n − e): the e failures the destination's rate explains do not grow it
/// (`RetryPolicy.ExplainedFailures`; e is read from its latest answers to others, `AnswerWindow`).
/// (6) The destination's `Governor` has no token (`RetryBudget`): the one time rule besides this
/// one, in memory only, unlogged (`Projection.startDelivery` moves the due time, never earlier).
/// First attempts, paced retries and hand-offs pay no token, so they never wait for one.
enum NextDue {
    /// What is known of an attempt's end before the core's lock is taken.
    struct Facts: Sendable {
        var outcome: DeliveryOutcome
        /// The attempt's number, 1 for the first.
        var attempt: Int
        /// A background upload made it (not the engine).
        var byUpload: Bool
        /// How long ago the message was sent (`RetryPolicy.expiry`).
        var sinceSend: Duration
        /// The server's `Retry-After`, read once and clamped (`RetryPolicy.retryAfter(of:now:)`).
        var retryAfter: Duration?
        /// Seeds the jitter, drawn from the app's random source outside any lock.
        var random: UInt64
    }

    /// The rule's answer.
    enum Verdict: Sendable, Equatable {
        case delivered(status: UInt16)
        /// Due again at `dueMilliseconds`, `delay` from now; with `foregroundOnly`, no
        /// background hand-off may take it again in this process.
        case retry(dueMilliseconds: UInt64, delay: Duration, foregroundOnly: Bool)
        case giveUp(reason: AbandonReason)
    }

    /// The verdict on an attempt that ended at `now` (wall ms) with what `facts` say, after its
    /// destination was told: `destinationLimited` if the destination refused it for load while
    /// answering others; `explainedFailures`, how many of the message's failures the
    /// destination's failure rate explains (`RetryPolicy.ExplainedFailures`).
    static func after(
        _ facts: Facts, destinationLimited: Bool, explainedFailures: Int = 0, policy: RetryPolicy,
        nowMilliseconds now: UInt64
    ) -> Verdict {
        var random = SplitMix64(seed: facts.random)
        switch policy.decide(
            facts.outcome, attempt: facts.attempt, sinceSend: facts.sinceSend, retryAfter: facts.retryAfter,
            explainedFailures: explainedFailures, using: &random)
        {
        case .delivered:
            let status = if case .response(let s, _) = facts.outcome { UInt16(clamping: s) } else { UInt16(0) }
            return .delivered(status: status)
        case .giveUp(let reason):
            return .giveUp(reason: reason)
        case .retry(let backoff):
            if facts.byUpload && facts.outcome.isUnauthorized {
                return .retry(dueMilliseconds: now, delay: .zero, foregroundOnly: true)
            }
            let delay = destinationLimited ? facts.retryAfter ?? .zero : backoff
            return .retry(dueMilliseconds: now + milliseconds(delay), delay: delay, foregroundOnly: false)
        }
    }

    /// A message whose record could not be read back: when to read it again (its age, which
    /// `expiry` needs, is unknown, so the policy cannot judge it).
    static func afterUnreadableRecord(policy: RetryPolicy, nowMilliseconds now: UInt64) -> UInt64 {
        now + milliseconds(policy.maximumDelay)
    }

    /// At open: the latest a replayed due time may be, from backoff and from a server's
    /// `Retry-After` (an app that lowered its delays in an update, or a wall clock that went
    /// backwards since the record was written).
    static func limitsAtOpen(policy: RetryPolicy, nowMilliseconds now: UInt64) -> (backoff: UInt64, retryAfter: UInt64)
    {
        (now + milliseconds(policy.maximumDelay), now + milliseconds(policy.retryAfterLimit))
    }

    static func milliseconds(_ duration: Duration) -> UInt64 { UInt64(max(0, duration.seconds * 1000)) }
}
