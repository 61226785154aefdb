import CourierLog
import Foundation

/// Backoff per destination (scheme, host and port), on top of each message's own backoff.
///
/// Without it, every pending message keeps its own schedule: a server that is down for 30 s
/// while 500 messages wait sees thousands of requests (<doc:MeasuredFigures>), and each message's
/// backoff grows on its own, so the last one arrives minutes after the server is back. With it
/// (the default), once `failuresBeforeDown` attempts in a row to one destination failed beyond
/// those its failure rate explains, that destination is **down**: its messages stop being sent,
/// and one message at a time goes as a **probe**, spaced by `Configuration.retry` as if the
/// destination were one message (attempt n = n-th failed probe; `Retry-After` as for messages)
/// but capped at `maximumProbeDelay`, with equal jitter (in [cap/2, cap]). When a probe is answered,
/// the destination is **up** again and all its waiting messages are due at once (their attempt
/// counts kept), at full concurrency. A down destination holds at most one delivery slot (its
/// probe), so it never slows the others. `CourierEvent.destinationDown` and
/// `.destinationRecovered` report both moments.
///
/// What an attempt says about its destination:
///
/// | outcome | destination |
/// |---|---|
/// | 2xx, 1xx, 3xx, 4xx other than 408 and 429 | up (it answered: a 401 or 400 is the message's) |
/// | 429, 503 from a destination that answered 2xx in the last 10 s | busy, not failing: paced (`ConcurrencyLimit`) |
/// | 429, 503 otherwise; other 5xx, 408 | failing |
/// | timeout, connection refused or dropped, TLS | failing (a timeout also cuts the concurrency limit) |
/// | other transport failures, a throwing `prepareRequest` | says nothing |
///
/// **A server failing at random is not down.** Failures in a row that the destination's own
/// failure rate makes at least 1 in 1,000 likely (`RetryPolicy.ExplainedFailures`: 9 at a 50%
/// rate, 0 for a destination that answered everything else) do not count toward
/// `failuresBeforeDown`: at 50% it takes 14 in a row, which random failure makes about once in
/// 16,000 requests, while an outage fills them within one round of requests.
///
/// **Probes.** With the 60 s cap and equal jitter, a long outage sees one probe every 30–60 s
/// (60 to 120 an hour), and a destination that comes back is found within a minute. (The
/// retry policy's 300 s cap, fully jittered, gave about 24 an hour, and up to 5 minutes.)
///
/// State is in memory only: after a restart every destination starts up, and a dead one is
/// found again within `failuresBeforeDown` attempts.
public struct DestinationBackoff: Sendable, Hashable {
    /// Whether destinations can be considered down. The default is true.
    public var isEnabled: Bool
    /// How many attempts in a row (with no answer from the server in between) make a
    /// destination down. The default is 5: a server failing half of all requests at random
    /// still goes down now and then (a run of 5 comes once in 32), and is none the worse for it:
    /// it delivers faster with it than without, because each recovery makes the waiting
    /// messages due at once (<doc:MeasuredFigures>).
    public var failuresBeforeDown: Int
    /// The longest wait between two probes of a down destination (before `Retry-After`, which
    /// may ask for longer). The default is 60 seconds: once it comes back, a destination is
    /// found within a minute, at 60 to 120 probes an hour while it stays down. Never more than
    /// the retry policy's `maximumDelay`.
    public var maximumProbeDelay: Duration

    /// Destination backoff with the given settings (the defaults: on, 5 failures, probes 60 s
    /// apart at most).
    public init(isEnabled: Bool = true, failuresBeforeDown: Int = 5, maximumProbeDelay: Duration = .seconds(60)) {
        precondition(failuresBeforeDown >= 1, "failuresBeforeDown must be at least 1")
        self.isEnabled = isEnabled
        self.failuresBeforeDown = failuresBeforeDown
        self.maximumProbeDelay = maximumProbeDelay
    }

    /// Never consider a destination down: every message keeps only its own backoff.
    public static let disabled = DestinationBackoff(isEnabled: false)

    /// What `outcome` says about its destination (the table above).
    static func signal(for outcome: DeliveryOutcome) -> Projection.DestinationSignal {
        switch outcome {
        case .response(let status, _):
            if status == 429 || status == 503 { return .overloaded }
            return status >= 500 || status == 408 ? .failing : .healthy
        case .failure(let failure):
            switch failure.kind {
            case .timeout: return .timedOut
            case .connectionClosed, .connectionFailed, .tls: return .failing
            case .cancelled, .other, .requestPreparation: return .neutral
            }
        }
    }

    /// The delay before the next probe after `failedProbes` failed ones: the retry policy's,
    /// for that attempt number, capped at `maximumProbeDelay` and equally jittered (unless the
    /// policy has no jitter), with `Retry-After` honoured and no give-up rules (a destination
    /// is never abandoned; its messages are, by their own policy). Equal jitter keeps the
    /// probes of a long outage at least half the cap apart: its load has a bound, not only a
    /// mean, and a fleet of phones still spreads over half the cap.
    func probeDelay(
        _ policy: RetryPolicy, failedProbes: Int, outcome: DeliveryOutcome,
        retryAfter: Duration?, random: UInt64
    ) -> Duration {
        var probing = policy
        probing.maximumAttempts = nil
        probing.expiry = nil
        probing.classifier = .retryEverything
        probing.explainedFailures = .disabled
        probing.maximumDelay = min(policy.maximumDelay, maximumProbeDelay)
        if probing.jitter != .none { probing.jitter = .equal }
        // One value drawn outside the lock seeds the draws made under it, so a decision made
        // under the core's lock never calls the app's random source.
        var source = SplitMix64(seed: random)
        let failure: DeliveryOutcome = outcome.isSuccess ? .response(status: 503) : outcome
        switch probing.decide(failure, attempt: failedProbes, sinceSend: .zero, retryAfter: retryAfter, using: &source)
        {
        case .retry(let delay): return delay
        case .delivered, .giveUp: return probing.maximumDelay
        }
    }
}
