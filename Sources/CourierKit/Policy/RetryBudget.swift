import Foundation

/// How many retries a destination may get, over any stretch of time: a token bucket per
/// destination (scheme, host and port), filled by the destination's successes and by time.
///
/// Backoff decides when *one* message is tried again; the budget bounds how many retries *all*
/// of a destination's messages make together. Since a message's backoff does not grow with
/// failures its destination's rate explains (`RetryPolicy.ExplainedFailures`), a server failing
/// 90% of all requests would otherwise see every pending message retried about every second.
/// Every retry and every probe of a down destination takes a token; a retry due without one
/// **waits** for the next token (it is never dropped, unlike the budgets of RPC clients, which
/// fail fast); a first attempt never waits for one. Over any interval [t₀, t₁], a destination's
/// retries and probes number at most `capacity + tokensPerSuccess × (2xx in it) +
/// tokensPerSecond × (t₁ − t₀)`.
///
/// | | charged |
/// |---|---|
/// | a message's first attempt | no: new work is never held back by old failures |
/// | a retry, a probe | one token |
/// | a retry paced by its destination's limit after a 429 or 503 | no: the server's pace bounds it |
/// | a background upload | no: the system schedules those, at its own pace |
///
/// The defaults (100 tokens, 2 per 2xx, 1 per second) cost nothing at a 50% failure rate (each
/// success pays for the one retry it takes on average, and another), and hold a server failing
/// 90% of all requests to about one request a second from each phone with a backlog (about 9
/// per delivered message, whatever the policy). In memory only: a destination's bucket starts
/// full after a restart.
public struct RetryBudget: Sendable, Hashable {
    /// Whether retries are charged. The default is true.
    public var isEnabled: Bool
    /// The tokens a destination starts with and holds at most: the retries it may get at once.
    /// The default is 100.
    public var capacity: Double
    /// The tokens each 2xx from the destination adds. The default is 2: at a 50% failure rate a
    /// message needs one retry per success, and a budget of one per success would leave the
    /// unlucky waiting on it.
    public var tokensPerSuccess: Double
    /// The tokens added each second, whatever the destination answers: how fast a destination
    /// that hardly ever succeeds is retried. The default is 1.
    public var tokensPerSecond: Double

    /// A budget with the given settings (each defaults to the documented default).
    public init(
        isEnabled: Bool = true, capacity: Double = 100, tokensPerSuccess: Double = 2, tokensPerSecond: Double = 1
    ) {
        self.isEnabled = isEnabled
        self.capacity = capacity
        self.tokensPerSuccess = tokensPerSuccess
        self.tokensPerSecond = tokensPerSecond
    }

    /// Charges nothing: every retry goes when its backoff says.
    public static let disabled = RetryBudget(isEnabled: false)

    /// What `Configuration.problems` says of these settings (nothing when they are valid).
    var problems: [String] {
        guard isEnabled else { return [] }
        var found: [String] = []
        if !(capacity >= 1 && capacity.isFinite) { found.append("retryBudget.capacity must be at least 1") }
        if !(tokensPerSuccess >= 0 && tokensPerSuccess.isFinite) {
            found.append("retryBudget.tokensPerSuccess must not be negative")
        }
        if !(tokensPerSecond > 0 && tokensPerSecond.isFinite) {
            found.append("retryBudget.tokensPerSecond must be positive (or the budget .disabled)")
        }
        return found
    }

    /// One destination's tokens: pure data, in its `OriginTable.Entry`, under the core's lock.
    struct Bucket: Sendable, Equatable {
        var tokens: Double
        /// The wall time (ms) `tokens` was counted at; time refills from there.
        var countedMilliseconds: UInt64?
    }

    /// A destination's bucket at first sight: full.
    var fullBucket: Bucket { Bucket(tokens: capacity, countedMilliseconds: nil) }

    /// `bucket` refilled by the time passed until `now`.
    func refilled(_ bucket: Bucket, nowMilliseconds now: UInt64) -> Bucket {
        guard let counted = bucket.countedMilliseconds else {
            return Bucket(tokens: bucket.tokens, countedMilliseconds: now)
        }
        let elapsedSeconds = Double(now - min(now, counted)) / 1000
        return Bucket(tokens: min(capacity, bucket.tokens + elapsedSeconds * tokensPerSecond), countedMilliseconds: now)
    }

    /// Takes a token at `now` if there is one; false leaves the bucket as it was (refilled).
    func take(_ bucket: inout Bucket, nowMilliseconds now: UInt64) -> Bool {
        guard isEnabled else { return true }
        bucket = refilled(bucket, nowMilliseconds: now)
        guard bucket.tokens >= 1 else { return false }
        bucket.tokens -= 1
        return true
    }

    /// A 2xx at `now` adds `tokensPerSuccess`.
    func succeeded(_ bucket: inout Bucket, nowMilliseconds now: UInt64) {
        guard isEnabled else { return }
        bucket = refilled(bucket, nowMilliseconds: now)
        bucket.tokens = min(capacity, bucket.tokens + tokensPerSuccess)
    }

    /// When the bucket, as counted at `now`, next holds a whole token (now if it does).
    func nextTokenMilliseconds(_ bucket: Bucket, nowMilliseconds now: UInt64) -> UInt64 {
        let current = refilled(bucket, nowMilliseconds: now)
        guard isEnabled, current.tokens < 1 else { return now }
        let missing = 1 - current.tokens
        return now + UInt64((missing / tokensPerSecond * 1000).rounded(.up))
    }
}
