import CourierLog
import Foundation

/// One destination's governor (scheme, host and port): its concurrency limit and pace
/// (`ConcurrencyLimit`), its outage and probes (`DestinationBackoff`, whose table says what each
/// outcome means), its retry budget (`RetryBudget`) and its latest answers
/// (`RetryPolicy.ExplainedFailures`), in one pure value under the core's lock. It answers two
/// questions: per message, "when may this start?" (`earliestStart`, then `start`), and per
/// answer, "what changed?" (`observe`). With `NextDue` (when a *message* is next due) it is the
/// only rule of time: every probe time is written here. In memory only: after a restart every
/// destination starts up, with a full bucket.
struct Governor {
    /// The settings every destination shares (`Courier.Configuration`).
    struct Rules {
        var concurrency = ConcurrencyLimit.fixed
        var maximumConcurrency = 1_000
        /// Off by default here; `Courier.Configuration` turns it on.
        var backoff = DestinationBackoff.disabled
        var budget = RetryBudget.disabled
        /// Spaces probes; its `explainedFailures` says how many answers are kept.
        var retry: RetryPolicy = {
            var policy = RetryPolicy()
            policy.explainedFailures = .disabled
            return policy
        }()
    }

    /// What an answer changed, for the core to report.
    enum Change: Equatable {
        case none
        case wentDown(consecutiveFailures: Int)
        case recovered(downMilliseconds: UInt64)
        /// Refused for load while answering: the message is retried at the pace, not its backoff.
        case limited
    }

    struct Outage {
        var sinceMilliseconds: UInt64
        /// Probes that failed since (the failure that tipped it counts as the first).
        var failedProbes = 1
        /// Failures in a row the destination's rate explained when it went down: as many failed
        /// probes are luck, and do not grow the probe delay.
        var explainedFailures: Int
        var nextProbeMilliseconds: UInt64
        /// The message being probed (its arrival number), if a probe is in flight.
        var probe: UInt64?
    }

    let rules: Rules
    private(set) var outage: Outage?
    private(set) var consecutiveFailures = 0
    /// Whether any attempt said something about it since the courier opened: a hand-off to a
    /// destination that has not sends only its first limit's worth (`awaitsFirstAnswers`).
    private(set) var hasReported = false
    /// Deliveries under way (engine attempts and background uploads).
    var sending = 0
    /// The last healthy answer (wall ms): a 429 or 503 soon after it is load, not an outage.
    var lastHealthyMilliseconds: UInt64?
    var flow: Flow
    /// The retry budget's tokens, as counted at `tokensCountedMilliseconds`; time refills them
    /// from there (`tokens(at:)`). Never counted: full at 0, and time cannot overfill it.
    var tokens: Double
    var tokensCountedMilliseconds: UInt64 = 0
    var answers: AnswerWindow

    init(_ rules: Rules) {
        self.rules = rules
        flow = rules.concurrency.initialFlow(maximum: rules.maximumConcurrency)
        tokens = rules.budget.capacity
        let explanation = rules.retry.explainedFailures
        answers = AnswerWindow(capacity: explanation.isEnabled ? explanation.window : 0)
    }

    var isDown: Bool { outage != nil }

    // MARK: When may a message start

    /// The earliest one more delivery may start, at the earliest `earliest`; nil until one ends.
    /// Down: the probe time, one probe at a time. Up: the limit and the pace. A hand-off
    /// (`handOff`) to a destination that has answered keeps to the pace but not the limit: the
    /// session's bound is its limit (the system runs a background session's uploads at times it
    /// picks, and the limit is learned from answers a suspended app hears only at its rare
    /// wakes: a 50%-failing server had 226 of 500 delivered in 30 suspended minutes with it, 500
    /// without). Until then the limit holds, and one at a time once it failed: a suspended app
    /// cannot take back what it handed off.
    func earliestStart(notBefore earliest: UInt64, handOff: Bool = false) -> UInt64? {
        if let outage { return outage.probe == nil ? max(earliest, outage.nextProbeMilliseconds) : nil }
        let pace = UInt64(flow.nextStartMilliseconds.rounded(.up))
        if handOff && lastHealthyMilliseconds != nil { return max(earliest, pace) }
        if handOff && consecutiveFailures > 0 && sending >= 1 { return nil }
        return sending < flow.count ? max(earliest, pace) : nil
    }

    /// Message `message` starts at `now`. `charged`: a retry or a probe the engine makes (not
    /// one the pace spaces after a 429 or 503, nor a hand-off) takes a token of the budget;
    /// without one it does not start (false), and a probe waits for the next token.
    mutating func start(message: UInt64, charged: Bool, at now: UInt64) -> Bool {
        if charged && !takeToken(at: now) {
            if outage != nil { outage!.nextProbeMilliseconds = nextTokenMilliseconds(at: now) }
            return false
        }
        sending += 1
        if let rate = flow.ratePerSecond {
            flow.nextStartMilliseconds = max(flow.nextStartMilliseconds, Double(now)) + 1_000 / rate
        }
        if outage != nil { outage!.probe = message }
        return true
    }

    /// Message `message`'s delivery is over (answered, cancelled or withdrawn).
    mutating func stopped(message: UInt64) {
        sending -= 1
        assert(sending >= 0)
        if outage?.probe == message { outage!.probe = nil }
    }

    /// Pulls the next probe time back to `limit` if it is later (`retryNow()`, a wall-clock jump).
    mutating func probeNoLaterThan(_ limit: UInt64) {
        if let next = outage?.nextProbeMilliseconds, next > limit { outage!.nextProbeMilliseconds = limit }
    }

    // MARK: What an answer changed

    /// Records what `ending`, an attempt of `message` (its arrival number,
    /// `Projection.Slot.order`, unique for the courier's life), said at `now`: its outcome, when
    /// the engine took it (nil for a background upload), the server's `Retry-After`, and the
    /// seed of the probe delay's jitter (`probeRandom`).
    mutating func observe(_ ending: Ending, message: UInt64, at now: UInt64) -> Change {
        let signal = Self.signal(for: ending.outcome)
        let answering =
            outage == nil
            && lastHealthyMilliseconds.map { now <= $0 + ConcurrencyLimit.answeredWithinMilliseconds } ?? false
        let started = ending.attempt.startedMilliseconds ?? 0
        if signal != .neutral { hasReported = true }
        switch signal {
        case .healthy:
            consecutiveFailures = 0
            lastHealthyMilliseconds = now
            // A 4xx is the message's own problem: neither a success nor a failure of the server.
            if ending.outcome.isSuccess {
                answers.record(message: message, failed: false, nowMilliseconds: now)
                paySuccess(at: now)
            }
            guard let outage else {
                let latency = ending.attempt.startedMilliseconds.map { now - min(now, $0) }
                succeeded(latencyMilliseconds: latency, nowMilliseconds: now)
                return .none
            }
            self.outage = nil
            // What was learned of its load is stale: it starts again as if new.
            if rules.concurrency.isAdaptive { flow = rules.concurrency.initialFlow(maximum: rules.maximumConcurrency) }
            return .recovered(downMilliseconds: now - min(now, outage.sinceMilliseconds))
        case .overloaded where answering:
            refused(
                retryAfterMilliseconds: ending.retryAfter.map(NextDue.milliseconds), startedMilliseconds: started,
                nowMilliseconds: now)
            return rules.concurrency.isAdaptive ? .limited : .none
        case .overloaded, .timedOut, .failing:
            // From a destination answering others: a timeout cuts the limit, a 5xx or 408 was served.
            if answering && signal == .timedOut { timedOut(startedMilliseconds: started, nowMilliseconds: now) }
            if answering && signal == .failing, case .response = ending.outcome { countServed(at: now) }
            return fail(ending, message: message, at: now)
        case .neutral:
            if let outage, outage.probe == message { scheduleProbe(after: ending, at: now) }
            return .none
        }
    }

    /// Message `message`'s record could not be read: if it was the probe, the next waits until
    /// `dueMilliseconds`, when it is read again (or an unreadable probe would go again at once).
    mutating func unreadable(message: UInt64, dueMilliseconds: UInt64) {
        guard outage?.probe == message else { return }
        outage!.probe = nil
        outage!.nextProbeMilliseconds = dueMilliseconds
    }

    /// An upload that ended while the app was dead, heard late: the destination has reported,
    /// and answered if `status` says it is up (its start and latency are unknown).
    mutating func heardLate(status: UInt16?, at now: UInt64) {
        hasReported = true
        if let status, Self.signal(for: .response(status: Int(status))) == .healthy, outage == nil {
            lastHealthyMilliseconds = now
        }
    }

    /// A failure: a failed probe spaces the next one; enough in a row make the destination down.
    private mutating func fail(_ ending: Ending, message: UInt64, at now: UInt64) -> Change {
        consecutiveFailures += 1
        answers.record(message: message, failed: true, nowMilliseconds: now)
        if let outage {
            if outage.probe == message {
                self.outage!.failedProbes += 1
                scheduleProbe(after: ending, at: now)
            }
            return .none
        }
        let threshold = rules.backoff.failuresBeforeDown
        guard rules.backoff.isEnabled, consecutiveFailures >= threshold else { return .none }
        // A run the destination's rate before it explains is luck, not an outage.
        let explained = answers.explainedFailures(
            of: .max, rules.retry.explainedFailures, nowMilliseconds: now, droppingFailures: consecutiveFailures)
        guard consecutiveFailures >= threshold + explained else { return .none }
        outage = Outage(sinceMilliseconds: now, explainedFailures: explained, nextProbeMilliseconds: now)
        scheduleProbe(after: ending, at: now)
        return .wentDown(consecutiveFailures: consecutiveFailures)
    }

    /// Ends the probe in flight and sets the next probe time: the retry policy's delay for the
    /// attempt `failedProbes − explainedFailures` (at least 1), capped at `maximumProbeDelay`
    /// and equally jittered (unless the policy has none; equal jitter keeps a long outage's
    /// probes at least half the cap apart), at least the server's `Retry-After`.
    private mutating func scheduleProbe(after ending: Ending, at now: UInt64) {
        guard let outage else { return }
        var probing = rules.retry
        probing.maximumDelay = min(probing.maximumDelay, rules.backoff.maximumProbeDelay)
        if probing.jitter != .none { probing.jitter = .equal }
        var random = SplitMix64(seed: ending.probeRandom)
        let attempt = max(1, outage.failedProbes - outage.explainedFailures)
        var delay = probing.jittered(probing.backoff(attempt: attempt), using: &random)
        if let retryAfter = ending.retryAfter { delay = max(delay, retryAfter) }
        self.outage!.probe = nil
        self.outage!.nextProbeMilliseconds = now + NextDue.milliseconds(delay)
    }

    /// How many failures in a row of `message` the rate of the destination's answers to other
    /// messages explains (`RetryPolicy.ExplainedFailures`).
    func explainedFailures(of message: UInt64, at now: UInt64) -> Int {
        answers.explainedFailures(of: message, rules.retry.explainedFailures, nowMilliseconds: now)
    }

    enum Signal: Equatable { case healthy, overloaded, timedOut, failing, neutral }

    /// What `outcome` says about its destination (`DestinationBackoff`'s table).
    static func signal(for outcome: DeliveryOutcome) -> Signal {
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
}
