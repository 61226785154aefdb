/// A destination's latest answers, for its failure rate (`RetryPolicy.ExplainedFailures`): a
/// ring of at most `capacity` entries, each the wall time, the slot whose attempt got it, and
/// whether it failed. Pure data, part of `OriginTable.Entry`, guarded by the core's lock.
///
/// A message's rate leaves out its own answers (all failures, or it would not be asking), by
/// slot: a slot reused by a later message leaves out the earlier one's answers too, which only
/// makes the rate a little less sure. Reading it scans the ring: at most `capacity` (128 by
/// default) comparisons per failed attempt, under the lock.
struct AnswerWindow {
    struct Answer {
        var milliseconds: UInt64
        var slot: UInt32
        var failed: Bool
    }

    /// Fixed once the first answer comes; 0 keeps nothing (explained failures are off).
    let capacity: Int
    private var answers: [Answer] = []
    /// Where the next answer goes once the ring is full.
    private var next = 0

    init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
    }

    /// An answer to slot `slot`'s attempt, at wall time `now`.
    mutating func record(slot: UInt32, failed: Bool, nowMilliseconds now: UInt64) {
        guard capacity > 0 else { return }
        let answer = Answer(milliseconds: now, slot: slot, failed: failed)
        if answers.count < capacity {
            answers.append(answer)
        } else {
            answers[next] = answer
            next = (next + 1) % capacity
        }
        assert(answers.count <= capacity)
    }

    /// The answers to slots other than `slot` no older than `oldestMilliseconds`, and how many
    /// of them failed.
    func count(excluding slot: UInt32, since oldestMilliseconds: UInt64) -> (answers: Int, failures: Int) {
        var counted = 0, failures = 0
        for answer in answers where answer.slot != slot && answer.milliseconds >= oldestMilliseconds {
            counted += 1
            if answer.failed { failures += 1 }
        }
        return (counted, failures)
    }

    /// How many failures in a row of the destination the rate before its latest `run` answers
    /// (the run of failures under way) explains, at wall time `now`: 0 until the window holds
    /// `minimumAnswers` answers before the run.
    func explainedRun(
        beforeLatest run: Int, _ explanation: RetryPolicy.ExplainedFailures, nowMilliseconds now: UInt64
    ) -> Int {
        guard explanation.isEnabled else { return 0 }
        let age = NextDue.milliseconds(explanation.windowDuration)
        // The run is the newest answers, all failures: take them out of both counts (no slot is
        // `.max`: every answer counts).
        let (counted, failures) = count(excluding: .max, since: now - min(now, age))
        let before = counted - min(counted, run), failedBefore = failures - min(failures, run)
        guard before >= explanation.minimumAnswers else { return 0 }
        return explanation.explainedRun(failureRate: Double(failedBefore) / Double(before))
    }

    /// How many failures in a row of slot `slot`'s message the rate of the others explains
    /// (`explanation.explainedRun`), at wall time `now`: 0 until the window holds
    /// `minimumAnswers` answers to others.
    func explainedFailures(
        ofSlot slot: UInt32, _ explanation: RetryPolicy.ExplainedFailures, nowMilliseconds now: UInt64
    ) -> Int {
        guard explanation.isEnabled else { return 0 }
        let age = NextDue.milliseconds(explanation.windowDuration)
        let (counted, failures) = count(excluding: slot, since: now - min(now, age))
        guard counted >= explanation.minimumAnswers else { return 0 }
        return explanation.explainedRun(failureRate: Double(failures) / Double(counted))
    }
}
