import CourierLog
import Foundation

/// When to try a message again, as a pure value: given an outcome, the attempt number and a
/// random source, `decide` says deliver, retry after a delay, or give up. No clocks, no I/O.
///
/// **Backoff.** The cap for attempt n (n ≥ 1) is
/// `min(maximumDelay, initialDelay × multiplier^(n−1))`; with `.full` jitter (the default) the
/// delay is uniform in `[0, cap]`. Defaults: 1 s × 2ⁿ⁻¹ capped at 300 s. Why: the first user's
/// server fails at random half the time, so a failure is most often followed by a success one
/// try later; a 1 s start recovers in about a second (WorkManager's 30 s start would make a chat
/// message feel lost), and the 5-minute cap (Segment's choice; WorkManager caps at 5 h) bounds
/// how stale a message gets after a long outage. Full jitter spreads a fleet of phones that all
/// lost the same server, so they do not return in lockstep (AWS's analysis).
///
/// **Retry-After** on 429 or 503, in seconds or as an HTTP date, is a lower bound on the delay,
/// clamped to `retryAfterLimit` (default 1 hour) so a bad header cannot park a message forever.
///
/// **Which outcomes are retried** (`classifier`):
///
/// | outcome | `.retryEverything` (default) | `.giveUpOnClientErrors` |
/// |---|---|---|
/// | 2xx | delivered | delivered |
/// | 408, 425, 429 | retry | retry (the server asks for it) |
/// | 409 | retry | retry (1) |
/// | 401 | retry | retry while `retriesUnauthorized` (the default; fresh credentials: `prepareRequest`) |
/// | 422 | retry | give up (2) |
/// | other 4xx | retry | give up (resending the same bytes cannot fix them) |
/// | 5xx, 1xx, 3xx | retry | retry (server trouble is transient) |
/// | timeout, connection dropped/refused, TLS, other | retry | retry (the network heals) |
/// | `prepareRequest` threw (`.requestPreparation`) | retry | retry (a token service heals too) |
///
/// (1) Under the Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header), a 409 says
/// that a request with this message's key is still being processed: a later try learns how it
/// ended, so no classifier gives up on it.
/// (2) Under the same draft, a 422 says the key was used before with another body. Courier sends
/// the same bytes under a message's key on every attempt, so the server holds another message
/// under that key (an id reused across installs, a server that derives keys): resending cannot
/// fix it.
///
/// `maximumAttempts` and `expiry` (both off by default, as the user asked to "retry until you
/// receive a successful response") give up after that many attempts or that long since `send`,
/// whatever the outcome (a 409 included).
public struct RetryPolicy: Sendable, Hashable {
    /// How the delay is randomised below its cap.
    public enum Jitter: Sendable, Hashable {
        /// Exactly the capped exponential delay.
        case none
        /// Uniform in [0, delay] ("full jitter"). The default.
        case full
        /// Uniform in [delay/2, delay] ("equal jitter"): never retries sooner than half.
        case equal
    }

    /// Which failed outcomes are worth another attempt (the table above).
    public enum Classifier: Sendable, Hashable {
        /// Every outcome other than 2xx is retried. The default.
        case retryEverything
        /// 4xx other than 408, 409, 425 and 429 give up at once (401 while
        /// `retriesUnauthorized`).
        case giveUpOnClientErrors
    }

    /// What `decide` says about an attempt's outcome.
    public enum Decision: Sendable, Hashable {
        /// The server answered 2xx.
        case delivered
        /// Try again after this delay.
        case retry(after: Duration)
        /// Stop: the message is abandoned, for this reason.
        case giveUp(reason: AbandonReason)
    }

    /// The delay cap of the first retry. The default is 1 second.
    public var initialDelay: Duration
    /// The growth per attempt. The default is 2.
    public var multiplier: Double
    /// The largest delay before jitter. The default is 300 seconds. Opening a courier holds
    /// messages that an earlier policy scheduled further out (from backoff) to this from now.
    public var maximumDelay: Duration
    /// The default is `.full`.
    public var jitter: Jitter
    /// Give up after this many attempts. The default is nil: never.
    public var maximumAttempts: Int?
    /// Give up once this long has passed since `send`. The default is nil: never.
    public var expiry: Duration?
    /// The most a `Retry-After` header can delay a message. The default is 1 hour. Opening a
    /// courier holds a server's longer wait, logged earlier, to this from now. (A wait that
    /// compaction re-snapshotted counts as backoff's then: the snapshot does not say.)
    public var retryAfterLimit: Duration
    /// The default is `.retryEverything`.
    public var classifier: Classifier
    /// Which failures of a message its destination's failure rate explains, so they do not grow
    /// its backoff. The default is on: at a destination failing half of all requests at random,
    /// a message's first 9 failures in a row wait up to `initialDelay` each.
    public var explainedFailures = ExplainedFailures()
    /// Whether `.giveUpOnClientErrors` still retries HTTP 401. The default is true: an expired
    /// token is the usual cause, and `Configuration.prepareRequest` puts a fresh one on every
    /// attempt. Set it to false if your credentials cannot change between attempts.
    public var retriesUnauthorized = true

    /// A policy; every parameter defaults to the documented default of its property.
    public init(
        initialDelay: Duration = .seconds(1), multiplier: Double = 2, maximumDelay: Duration = .seconds(300),
        jitter: Jitter = .full, maximumAttempts: Int? = nil, expiry: Duration? = nil,
        retryAfterLimit: Duration = .seconds(3600), classifier: Classifier = .retryEverything
    ) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.jitter = jitter
        self.maximumAttempts = maximumAttempts
        self.expiry = expiry
        self.retryAfterLimit = retryAfterLimit
        self.classifier = classifier
    }

    /// The capped exponential delay for attempt `attempt` (1-based), before jitter.
    public func backoff(attempt: Int) -> Duration {
        let capSeconds = maximumDelay.seconds
        // pow overflows to +inf for huge attempts; min() then picks the cap.
        let raw = initialDelay.seconds * pow(max(1, multiplier), Double(max(0, attempt - 1)))
        return .seconds(min(capSeconds, raw.isFinite ? raw : capSeconds))
    }

    /// The decision after attempt number `attempt` ended with `outcome`.
    /// - Parameters:
    ///   - outcome: how the attempt ended.
    ///   - attempt: its number, 1 for the first.
    ///   - sinceSend: how long ago the message was sent (for `expiry`).
    ///   - now: the wall time, to read a `Retry-After` HTTP date.
    ///   - explainedFailures: how many of the message's failures in a row its destination's
    ///     failure rate explains (`ExplainedFailures`); the backoff is the one of attempt
    ///     `max(1, attempt − explainedFailures)`. `maximumAttempts` counts every attempt.
    ///   - random: the source of jitter.
    public func decide(
        _ outcome: DeliveryOutcome, attempt: Int, sinceSend: Duration, now: Date, explainedFailures: Int = 0,
        using random: inout some RandomNumberGenerator
    ) -> Decision {
        decide(
            outcome, attempt: attempt, sinceSend: sinceSend, retryAfter: retryAfter(of: outcome, now: now),
            explainedFailures: explainedFailures, using: &random)
    }

    /// The wait a `Retry-After` on `outcome` asks for, clamped to `retryAfterLimit`; nil if the
    /// outcome is not a 429 or 503, or carries none the parser understands. The engine reads it
    /// once per outcome, for the message and for its destination.
    func retryAfter(of outcome: DeliveryOutcome, now: Date) -> Duration? {
        guard case .response(let status, let header?) = outcome, DeliveryOutcome.honoursRetryAfter(status: status),
            let asked = RetryAfter.parse(header, now: now)
        else { return nil }
        return min(asked, retryAfterLimit)
    }

    /// `decide` with the outcome's `Retry-After` already read (`retryAfter(of:now:)`).
    func decide(
        _ outcome: DeliveryOutcome, attempt: Int, sinceSend: Duration, retryAfter: Duration?,
        explainedFailures: Int = 0, using random: inout some RandomNumberGenerator
    ) -> Decision {
        if outcome.isSuccess { return .delivered }
        if classifier == .giveUpOnClientErrors, case .response(let status, _) = outcome,
            (400..<500).contains(status), ![408, 409, 425, 429].contains(status),
            !(status == 401 && retriesUnauthorized)
        {
            return .giveUp(reason: .clientError(status: status))
        }
        if let maximumAttempts, attempt >= maximumAttempts {
            return .giveUp(reason: .attemptsExhausted(attempts: attempt, lastOutcome: outcome))
        }
        var delay = jittered(backoff(attempt: max(1, attempt - max(0, explainedFailures))), using: &random)
        if let retryAfter { delay = max(delay, retryAfter) }
        if let expiry, sinceSend + delay > expiry {
            return .giveUp(reason: .expired(expiry: expiry, lastOutcome: outcome))
        }
        return .retry(after: delay)
    }

    func jittered(_ cap: Duration, using random: inout some RandomNumberGenerator) -> Duration {
        let s = cap.seconds
        guard s > 0 else { return .zero }
        switch jitter {
        case .none: return cap
        case .full: return .seconds(Double.random(in: 0...s, using: &random))
        case .equal: return .seconds(Double.random(in: (s / 2)...s, using: &random))
        }
    }
}

/// `Retry-After` header values: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
public enum RetryAfter {
    /// The delay the header asks for, or nil if it is neither form. A date in the past is 0.
    public static func parse(_ header: String, now: Date) -> Duration? {
        let value = header.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(value), seconds >= 0 { return .seconds(seconds) }
        // An HTTP date: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), and the obsolete RFC 850
        // and asctime forms.
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let f = DateFormatter()
            f.locale = Locale(identifier: "en_US_POSIX")
            f.timeZone = TimeZone(identifier: "GMT")
            f.dateFormat = format
            if let date = f.date(from: value) { return .seconds(max(0, date.timeIntervalSince(now))) }
        }
        return nil
    }
}

extension Duration {
    /// The duration in seconds, as a Double (package: the tools' simulations read it too).
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

extension RetryPolicy {
    /// How many failures in a row of one message its destination's own failure rate explains:
    /// those do not grow the message's backoff. A message needs 1/(1−f) requests on average at a
    /// failure rate f whatever its backoff; backoff only decides who waits. A run of n failures
    /// that the destination's rate makes likely (1 in 1,000 or likelier, by default) is luck, not
    /// a sign about this message: its delay after the n-th failure uses the exponent of the
    /// (n − e)-th, where e is the longest such run (`explainedRun(failureRate:)`), and never less
    /// than the first's.
    ///
    /// | the destination's other answers | e | delay after the n-th failure (default policy) |
    /// |---|---|---|
    /// | fewer than `minimumAnswers`, or all 2xx | 0 | 1 s × 2ⁿ⁻¹, up to 300 s, as without it |
    /// | 10% failing | 3 | up to 1 s through the 4th failure, then 2 s, 4 s, … |
    /// | 50% failing (the first user's server) | 9 | up to 1 s through the 10th failure, then 2 s, … |
    /// | 90% failing | 65 | up to 1 s through the 66th failure (the retry budget bounds the load) |
    /// | 100% failing (down) | 0 | 1 s × 2ⁿ⁻¹, up to 300 s, as without it |
    ///
    /// So a message that fails while the rest succeed (a *poison* message) backs off exactly as
    /// without it, and an unlucky one on a server failing at random waits about a second, not
    /// minutes. The rate is measured per destination on its latest answers to *other* messages
    /// (`window`, no older than `windowDuration`): a 2xx is a success; a 5xx, 408, timeout or
    /// connection failure a failure; a 4xx (the message's own problem) or a 429/503 the
    /// destination's pace absorbs counts as neither. In memory only: after a restart each
    /// destination's rate is learned again.
    public struct ExplainedFailures: Sendable, Hashable {
        /// Whether a destination's failure rate explains any failures. The default is true.
        public var isEnabled: Bool
        /// How likely by chance a run of failures must be to be explained. The default is 0.001
        /// (1 in 1,000): 9 failures in a row at a 50% failure rate. A larger value explains
        /// fewer (0.01: 6), a smaller one more, and lets a poison message retry faster at first.
        public var chance: Double
        /// How many of a destination's latest answers tell its failure rate. The default is 128.
        public var window: Int
        /// How old those answers may be. The default is 10 minutes.
        public var windowDuration: Duration
        /// How many answers to other messages the window must hold to tell a rate; with fewer,
        /// nothing is explained. The default is 16.
        public var minimumAnswers: Int

        /// The settings given (each defaults to the documented default of its property).
        public init(
            isEnabled: Bool = true, chance: Double = 0.001, window: Int = 128, windowDuration: Duration = .seconds(600),
            minimumAnswers: Int = 16
        ) {
            self.isEnabled = isEnabled
            self.chance = chance
            self.window = window
            self.windowDuration = windowDuration
            self.minimumAnswers = minimumAnswers
        }

        /// Explains nothing: a message's backoff grows with each of its failures.
        public static let disabled = ExplainedFailures(isEnabled: false)

        /// The longest run of failures at least `chance` likely at `failureRate`:
        /// ⌊ln chance / ln f⌋, with f clamped to 0.99. 0 when f is 0, and when f is 1: a
        /// destination that answered none of the others with a 2xx is down, not unlucky, and
        /// its messages back off in full.
        public func explainedRun(failureRate: Double) -> Int {
            guard isEnabled, failureRate > 0, failureRate < 1, chance > 0, chance < 1 else { return 0 }
            let f = min(failureRate, 0.99)
            // The epsilon keeps an exact quotient (3 at f = 0.1) from rounding down to one less.
            let run = (Foundation.log(chance) / Foundation.log(f) + 1e-9).rounded(.down)
            return run.isFinite ? max(0, Int(run)) : 0
        }
    }
}

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
    /// The rule's answer.
    enum Verdict: Sendable, Equatable {
        case delivered(status: UInt16)
        /// Due again at `dueMilliseconds`, `delay` from now; with `foregroundOnly`, no
        /// background hand-off may take it again in this process.
        case retry(dueMilliseconds: UInt64, delay: Duration, foregroundOnly: Bool)
        case giveUp(reason: AbandonReason)
    }

    /// The verdict on `ending` (its outcome, its attempt's number, who made it, the message's age
    /// from its creation to `now` (wall ms), the server's `Retry-After` and the jitter's seed),
    /// after its destination was told: `destinationLimited` if the destination refused it for
    /// load while answering others; `explainedFailures`, how many of the message's failures the
    /// destination's failure rate explains (`RetryPolicy.ExplainedFailures`).
    static func after(
        _ ending: Ending, destinationLimited: Bool, explainedFailures: Int = 0, policy: RetryPolicy,
        nowMilliseconds now: UInt64
    ) -> Verdict {
        var random = SplitMix64(seed: ending.random)
        let sinceSend = Duration.milliseconds(Int64(now - min(now, ending.createdMilliseconds)))
        var policy = policy
        if let own = ending.expiryMilliseconds.map({ Duration.milliseconds(Int64(clamping: $0)) }) {
            policy.expiry = min(policy.expiry ?? own, own)  // the sooner of the two
        }
        switch policy.decide(
            ending.outcome, attempt: ending.attempt.number, sinceSend: sinceSend, retryAfter: ending.retryAfter,
            explainedFailures: explainedFailures, using: &random)
        {
        case .delivered:
            let status = if case .response(let s, _) = ending.outcome { UInt16(clamping: s) } else { UInt16(0) }
            return .delivered(status: status)
        case .giveUp(let reason):
            return .giveUp(reason: reason)
        case .retry(let backoff):
            if case .upload = ending.runner, ending.outcome.isUnauthorized {
                return .retry(dueMilliseconds: now, delay: .zero, foregroundOnly: true)
            }
            let delay = destinationLimited ? ending.retryAfter ?? .zero : backoff
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

    /// Saturating at 2^62 ms (146 million years): a setting meaning "never"
    /// (`.seconds(Int64.max)`) neither traps here nor overflows a time since 1970 it is added to.
    static func milliseconds(_ duration: Duration) -> UInt64 {
        UInt64(min(max(0, duration.seconds * 1000), 0x1p62))
    }
}
