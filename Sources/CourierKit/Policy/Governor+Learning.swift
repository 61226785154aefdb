import Foundation

/// What a governor learns of its destination: the limit and pace (`ConcurrencyLimit`'s table),
/// the retry budget's tokens (`RetryBudget`), and the latest answers (`AnswerWindow`). Times are
/// wall milliseconds.
extension Governor {
    /// The limit and the pace.
    struct Flow: Hashable {
        var limit: Double
        /// When the last cut happened: outcomes of requests that started before say nothing new.
        /// Until the first, the limit grows by one per success (slow start); then by one per round
        /// (a limit only grows between cuts, so it is never below the one the last cut left).
        var lastCutMilliseconds: UInt64?
        /// The latency's short-term average (each 2xx weighs 0.2), nil before the first: what the
        /// pace needs in flight (`cut`).
        var shortLatencyMilliseconds: Double?
        /// Requests per second that may start; nil while not paced.
        var ratePerSecond: Double?
        /// The pace when it was last cut: growth slows near it. Nil: no cut yet, the pace grows fast.
        var rateAtLastCut: Double?
        /// The earliest time the next request may start (pace, `Retry-After`).
        var nextStartMilliseconds: Double = 0
        /// Requests served (answered, other than a refusal for load) in the current and the
        /// previous one-second window: the rate the server takes.
        var windowStartMilliseconds: UInt64 = 0
        var successesThisWindow = 0
        var successesLastWindow = 0
        /// Refusals for load in the same windows.
        var refusedThisWindow = 0
        var refusedLastWindow = 0

        /// The limit as a count of requests.
        var count: Int { Int(limit) }
    }

    // MARK: The limit and the pace

    /// A 2xx: count it toward the accepted rate, average its latency (for the pace's floor), and
    /// grow. However slow, a 2xx never cuts the limit: on a phone, a wait for one of URLSession's
    /// connections or for the radio to wake looks like a slow server.
    mutating func succeeded(latencyMilliseconds: UInt64?, nowMilliseconds now: UInt64) {
        countServed(at: now)
        guard rules.concurrency.isAdaptive else { return }
        if let latency = latencyMilliseconds.map({ Double($0) }) {
            flow.shortLatencyMilliseconds = flow.shortLatencyMilliseconds.map { $0 + (latency - $0) * 0.2 } ?? latency
        }
        if let rate = flow.ratePerSecond { flow.ratePerSecond = grownRate(rate) }
        // Grow only a limit in use (TCP's window validation): a trickle proves nothing.
        guard Double(sending) * 2 >= flow.limit else { return }
        let step = flow.lastCutMilliseconds == nil ? 1 : 1 / flow.limit
        flow.limit = min(Double(rules.maximumConcurrency), flow.limit + step)
    }

    /// A 429 or 503 from a destination that is answering: cut the limit and the pace (once per
    /// round trip), and hold the destination for `Retry-After`.
    mutating func refused(retryAfterMilliseconds: UInt64?, startedMilliseconds: UInt64, nowMilliseconds now: UInt64) {
        guard rules.concurrency.isAdaptive else { return }
        roll(now)
        flow.refusedThisWindow += 1
        if let wait = retryAfterMilliseconds {
            flow.nextStartMilliseconds = max(flow.nextStartMilliseconds, Double(now + wait))
        }
        guard isFresh(startedMilliseconds) else { return }
        // Without `Retry-After`, a refusal now and then (fewer than 1 in 10 answers over the
        // last second or two) is not a limiter's: a server that refuses at random would
        // otherwise ratchet the pace down, each cut deeper than the growth between refusals.
        // A server that sends `Retry-After` asks for the wait itself: each refusal counts.
        let refusals = flow.refusedThisWindow + flow.refusedLastWindow
        let served = flow.successesThisWindow + flow.successesLastWindow
        guard retryAfterMilliseconds != nil || refusals * 10 >= served else { return }
        // What the server served over the last second: the first estimate of its pace, and a
        // floor under later cuts (a pace far above it comes down at once, not 20 % per refusal).
        let accepted = Double(max(flow.successesThisWindow, flow.successesLastWindow))
        if let rate = flow.ratePerSecond {
            flow.rateAtLastCut = rate
            let cut = min(rate * ConcurrencyLimit.rateCutRatio, max(accepted, rate / 2))
            flow.ratePerSecond = max(ConcurrencyLimit.minimumRatePerSecond, cut)
        } else {
            // No 2xx in the last two seconds (a trickle of messages): one a second to start.
            flow.ratePerSecond = max(1, accepted)
        }
        cut(by: rules.concurrency.backoffRatio, nowMilliseconds: now)
        // The server's bucket is empty now: the next request waits one interval, or it would
        // be refused at once and cut the pace again before the pace was ever tried.
        if let rate = flow.ratePerSecond {
            flow.nextStartMilliseconds = max(flow.nextStartMilliseconds, Double(now) + 1_000 / rate)
        }
    }

    /// A timeout from a destination that is answering: too much in flight for it.
    mutating func timedOut(startedMilliseconds: UInt64, nowMilliseconds now: UInt64) {
        guard rules.concurrency.isAdaptive, isFresh(startedMilliseconds) else { return }
        cut(by: rules.concurrency.backoffRatio, nowMilliseconds: now)
    }

    /// An answer other than a refusal for load (a 2xx, a 500): the server served it, so it
    /// counts toward the rate the server takes.
    mutating func countServed(at now: UInt64) {
        roll(now)
        flow.successesThisWindow += 1
    }

    /// The pace after one more success: +50 % a second until the first cut; then +4 % from the
    /// cut up to 10 % past the pace where the server refused, +10 % a second beyond (CUBIC's
    /// plateau: each overshoot costs a refusal, and with `Retry-After` a held second).
    private func grownRate(_ rate: Double) -> Double? {
        let near = flow.rateAtLastCut.map { rate >= $0 * ConcurrencyLimit.rateCutRatio * 0.95 && rate <= $0 * 1.1 }
        let grown = rate + (near.map { $0 ? 0.04 : 0.1 } ?? 0.5)
        return grown >= ConcurrencyLimit.unpacedRatePerSecond ? nil : grown
    }

    private func isFresh(_ startedMilliseconds: UInt64) -> Bool {
        flow.lastCutMilliseconds.map { startedMilliseconds > $0 } ?? true
    }

    /// Cuts the limit by `ratio`, never below `minimumLimit` nor below what the pace needs in
    /// flight (rate × latency, Little's law, with room for jitter).
    private mutating func cut(by ratio: Double, nowMilliseconds now: UInt64) {
        var floor = Double(rules.concurrency.minimumLimit)
        if let rate = flow.ratePerSecond {
            floor = max(floor, (rate * (flow.shortLatencyMilliseconds ?? 0) / 1_000 * 2).rounded(.up))
        }
        flow.limit = min(Double(rules.maximumConcurrency), max(floor, flow.limit * ratio))
        flow.lastCutMilliseconds = now
    }

    /// Moves the one-second windows on to `now`.
    private mutating func roll(_ now: UInt64) {
        guard now >= flow.windowStartMilliseconds + 1_000 else { return }
        // Two windows on, or more: the last one heard nothing either.
        let skipped = now >= flow.windowStartMilliseconds + 2_000
        flow.windowStartMilliseconds = skipped ? now : flow.windowStartMilliseconds + 1_000
        flow.successesLastWindow = skipped ? 0 : flow.successesThisWindow
        flow.refusedLastWindow = skipped ? 0 : flow.refusedThisWindow
        flow.successesThisWindow = 0
        flow.refusedThisWindow = 0
    }

    // MARK: The retry budget

    /// The tokens at `now`: refilled by the time passed, never past the capacity.
    func tokens(at now: UInt64) -> Double {
        let budget = rules.budget
        let elapsedSeconds = Double(now - min(now, tokensCountedMilliseconds)) / 1000
        return min(budget.capacity, tokens + elapsedSeconds * budget.tokensPerSecond)
    }

    /// Takes a token at `now` if there is one (always, with the budget off).
    mutating func takeToken(at now: UInt64) -> Bool {
        guard rules.budget.isEnabled else { return true }
        tokens = tokens(at: now)
        tokensCountedMilliseconds = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// A 2xx at `now` adds `tokensPerSuccess`.
    mutating func paySuccess(at now: UInt64) {
        guard rules.budget.isEnabled else { return }
        tokens = min(rules.budget.capacity, tokens(at: now) + rules.budget.tokensPerSuccess)
        tokensCountedMilliseconds = now
    }

    /// When the bucket next holds a whole token (now if it does).
    func nextTokenMilliseconds(at now: UInt64) -> UInt64 {
        let current = tokens(at: now)
        guard rules.budget.isEnabled, current < 1 else { return now }
        // Saturating at 2^62 ms: a rate of nearly nothing means "not for ages", not a trap.
        return now + UInt64(min(((1 - current) / rules.budget.tokensPerSecond * 1000).rounded(.up), 0x1p62))
    }
}

extension ConcurrencyLimit {
    /// The flow of a destination not heard from yet.
    func initialFlow(maximum: Int) -> Governor.Flow {
        let start = Double(isAdaptive ? min(initialLimit, maximum) : maximum)
        return Governor.Flow(limit: start)
    }
}

/// A destination's latest answers, for its failure rate (`RetryPolicy.ExplainedFailures`): at
/// most `capacity` entries, each the wall time, the message whose attempt got it (its arrival
/// number, `Projection.Slot.order`, unique for the courier's life), and whether it failed.
/// Pure data, part of a `Governor`, guarded by the core's lock.
///
/// A message's rate leaves out its own answers (all failures, or it would not be asking). By
/// message, not by slot: slots are reused, and with few messages pending one slot index serves
/// most of them, so leaving out a slot's answers left out most of the window (at one message
/// every 4 s, p99 12.4 s against 3.5 s at one a second). Reading it scans them: at most
/// `capacity` (128 by default) comparisons per failed attempt, under the lock.
struct AnswerWindow {
    struct Answer {
        var milliseconds: UInt64
        var message: UInt64
        var failed: Bool
    }

    /// Fixed once the first answer comes; 0 keeps nothing (explained failures are off).
    let capacity: Int
    /// Oldest first.
    private var answers: [Answer] = []

    init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
    }

    /// An answer to an attempt of message `message` (its arrival number), at wall time `now`.
    mutating func record(message: UInt64, failed: Bool, nowMilliseconds now: UInt64) {
        guard capacity > 0 else { return }
        // Full: the oldest goes, moving the rest (at most `capacity`, as a read scans them).
        if answers.count == capacity { answers.removeFirst() }
        answers.append(Answer(milliseconds: now, message: message, failed: failed))
    }

    /// The answers to messages other than `message` no older than `oldestMilliseconds`, and how
    /// many of them failed.
    func count(excluding message: UInt64, since oldestMilliseconds: UInt64) -> (answers: Int, failures: Int) {
        var counted = 0, failures = 0
        for answer in answers where answer.message != message && answer.milliseconds >= oldestMilliseconds {
            counted += 1
            if answer.failed { failures += 1 }
        }
        return (counted, failures)
    }

    /// How many failures in a row of message `message` the rate of the others explains
    /// (`explanation.explainedRun`), at wall time `now`: 0 until the window holds
    /// `minimumAnswers` answers to others (less `dropped` failures, taken out of both counts).
    /// For the destination's own run of failures under way: `message` `.max` (every answer
    /// counts) and that run dropped (the newest answers, all failures).
    func explainedFailures(
        of message: UInt64, _ explanation: RetryPolicy.ExplainedFailures, nowMilliseconds now: UInt64,
        droppingFailures dropped: Int = 0
    ) -> Int {
        guard explanation.isEnabled else { return 0 }
        let age = NextDue.milliseconds(explanation.windowDuration)
        let (counted, failures) = count(excluding: message, since: now - min(now, age))
        let answers = counted - min(counted, dropped), failed = failures - min(failures, dropped)
        guard answers >= explanation.minimumAnswers else { return 0 }
        return explanation.explainedRun(failureRate: Double(failed) / Double(answers))
    }
}
