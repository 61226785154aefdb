import Foundation

// The settings of a destination's `Governor`: its concurrency limit and pace, its outages and
// probes, and its retry budget.

/// How many deliveries may be under way to one destination (scheme, host and port) at once,
/// and, once it has refused some for load, how fast new ones may start. A pure value, like
/// `RetryPolicy`: the transitions below take the time and the outcome and return the next state.
///
/// **`.adaptive`** (the default) learns each destination's limit, the way TCP learns its
/// congestion window and Netflix's concurrency-limits learns a server's:
///
/// | signal | concurrency limit | pace of new requests |
/// |---|---|---|
/// | a new destination | `initialLimit` (4): starts low | none |
/// | 2xx | grows (1) | grows (2) |
/// | 429 or 503 from a destination that answered 2xx in the last 10 s | × `backoffRatio` (0.5) (3) | set (4) |
/// | a timeout from such a destination | × `backoffRatio` | unchanged |
/// | 429, 503, timeouts with no 2xx in 10 s | unchanged: it is an outage (`DestinationBackoff`) | unchanged |
///
/// 1. +1 per success until the first cut (doubles each round trip: slow start), then +1 per
///    round trip.
/// 2. +0.5 request/s per success until the first cut (50 % a second), then +0.04 (4 %) up to
///    10 % past the pace of the last cut, +0.1 (10 %) beyond.
/// 3. Never below what the pace needs.
/// 4. At the rate the server served over the last second, then × 0.8 per refusal, never below
///    that rate (at once down to it, if far above); `Retry-After` holds the whole destination
///    that long.
///
/// Without `Retry-After`, refusals cut only when they are at least 1 in 10 answers over the
/// last second or two: a server that refuses now and then at random is not a limiter.
/// At most one cut per round trip: a refusal of a request that started before the last cut says
/// nothing new (the burst that caused it is already answered). Growth needs the limit in use
/// (at least half of it in flight), so a trickle of messages never inflates it. The limit stays
/// within `minimumLimit…maximumConcurrentDeliveries`. A paced destination is un-paced once its
/// rate passes 1,000 requests/s.
///
/// Latency never cuts the limit (a timeout does). On a phone it is no sign of load: URLSession
/// queues requests beyond `httpMaximumConnectionsPerHost` (6 by default on iOS), so a wait for a
/// connection looks like a slow server, and a cellular radio waking from idle adds a second or
/// more to a round trip; and a cut on latency changed no measured drain (<doc:MeasuredFigures>).
///
/// Why pace at all: a concurrency limit alone cannot hold a request rate. On a fast network one
/// request in flight already makes hundreds a second, far above a limiter that allows 20.
/// Without pacing, a 20/s limiter refused more requests than it served (`make bench-drain`;
/// figures in <doc:RetryAndBackoff>).
///
/// **`.fixed`** keeps exactly `maximumConcurrentDeliveries` in flight to each destination (and
/// in all), never paces, and retries a refused message on its own backoff, as a failure.
public struct ConcurrencyLimit: Sendable, Hashable {
    /// Whether the limit adapts per destination. The default is true.
    public var isAdaptive: Bool
    /// The limit for a destination not heard from yet. The default is 4 (the per-host
    /// connection counts of browsers and URLSession are 4–6; slow start doubles it each round
    /// trip while the destination answers).
    public var initialLimit: Int
    /// The least the limit is cut to. The default is 1.
    public var minimumLimit: Int
    /// The factor a refusal for load or a timeout cuts the limit by. The default is 0.5 (TCP's).
    public var backoffRatio: Double
    /// Ignored, and not checked by `Courier.init`: the limit is no longer cut on latency. It was
    /// how far latency could climb over its long-term average before a cut (default 2).
    @available(*, deprecated, message: "ignored: Courier no longer cuts the limit on latency; remove it")
    public var latencyTolerance: Double {
        get { ignoredLatencyTolerance }
        set { ignoredLatencyTolerance = newValue }
    }
    /// What `latencyTolerance` was given, kept only so that it reads back the same.
    private var ignoredLatencyTolerance: Double

    /// A limit with the given settings (the defaults: adaptive, from 4, at least 1, × 0.5).
    /// `Courier.init` checks them (`CourierError.Code.invalidConfiguration`). `latencyTolerance`
    /// is ignored (deprecated): the limit is no longer cut on latency.
    public init(
        isAdaptive: Bool = true, initialLimit: Int = 4, minimumLimit: Int = 1,
        backoffRatio: Double = 0.5, latencyTolerance: Double = 2
    ) {
        self.isAdaptive = isAdaptive
        self.initialLimit = initialLimit
        self.minimumLimit = minimumLimit
        self.backoffRatio = backoffRatio
        self.ignoredLatencyTolerance = latencyTolerance
    }

    /// Learns each destination's limit and pace (the table above). The default.
    public static let adaptive = ConcurrencyLimit()
    /// Exactly `maximumConcurrentDeliveries` in flight, to each destination and in all.
    public static let fixed = ConcurrencyLimit(isAdaptive: false)

    /// A 429 or 503 counts as load only from a destination that answered 2xx this recently;
    /// otherwise it is an outage's failure (`DestinationBackoff`).
    static let answeredWithinMilliseconds: UInt64 = 10_000
    /// Above this pace, pacing ends: a 1 ms spacing is no pacing at all.
    static let unpacedRatePerSecond = 1_000.0
    static let minimumRatePerSecond = 0.2
    static let rateCutRatio = 0.8
}

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
}

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
}
