import CourierLog
import Foundation

/// Backoff per destination (scheme, host and port), on top of each message's own backoff.
///
/// Without it, every pending message keeps its own schedule: a server that is down for 30 s
/// while 500 messages wait sees thousands of requests (<doc:MeasuredFigures>), and each message's
/// backoff grows on its own, so the last one arrives minutes after the server is back. With it
/// (the default), once `failuresBeforeDown` attempts in a row to one destination failed, that
/// destination is **down**: its messages stop being sent, and one message at a time goes as a
/// **probe**, spaced by `Configuration.retry` as if the destination were one message (attempt
/// n = n-th failed probe; jitter and `Retry-After` as for messages). When a probe is answered,
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

    /// Destination backoff with the given settings (the defaults: on, 5 failures).
    public init(isEnabled: Bool = true, failuresBeforeDown: Int = 5) {
        precondition(failuresBeforeDown >= 1, "failuresBeforeDown must be at least 1")
        self.isEnabled = isEnabled
        self.failuresBeforeDown = failuresBeforeDown
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
    /// for that attempt number, with `Retry-After` honoured and no give-up rules (a
    /// destination is never abandoned; its messages are, by their own policy).
    static func probeDelay(
        _ policy: RetryPolicy, failedProbes: Int, outcome: DeliveryOutcome,
        retryAfter: Duration?, random: UInt64
    ) -> Duration {
        var probing = policy
        probing.maximumAttempts = nil
        probing.expiry = nil
        probing.classifier = .retryEverything
        // One value drawn outside the lock seeds the draws made under it, so a decision made
        // under the core's lock never calls the app's random source.
        var source = SplitMix64(seed: random)
        let failure: DeliveryOutcome = outcome.isSuccess ? .response(status: 503) : outcome
        switch probing.decide(failure, attempt: failedProbes, sinceSend: .zero, retryAfter: retryAfter, using: &source)
        {
        case .retry(let delay): return delay
        case .delivered, .giveUp: return policy.maximumDelay
        }
    }
}
