/// A destination's latest answers, for its failure rate (`RetryPolicy.ExplainedFailures`): a
/// ring of at most `capacity` entries, each the wall time, the message whose attempt got it (its
/// arrival number, `Projection.Slot.order`, unique for the courier's life), and whether it
/// failed. Pure data, part of `OriginTable.Entry`, guarded by the core's lock.
///
/// A message's rate leaves out its own answers (all failures, or it would not be asking). By
/// message, not by slot: slots are reused, and with few messages pending one slot index serves
/// most of them, so leaving out a slot's answers left out most of the window (at one message
/// every 4 s, p99 12.4 s against 3.5 s at one a second). Reading it scans the ring: at most
/// `capacity` (128 by default) comparisons per failed attempt, under the lock.
struct AnswerWindow {
    struct Answer {
        var milliseconds: UInt64
        var message: UInt64
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

    /// An answer to an attempt of message `message` (its arrival number), at wall time `now`.
    mutating func record(message: UInt64, failed: Bool, nowMilliseconds now: UInt64) {
        guard capacity > 0 else { return }
        let answer = Answer(milliseconds: now, message: message, failed: failed)
        if answers.count < capacity {
            answers.append(answer)
        } else {
            answers[next] = answer
            next = (next + 1) % capacity
        }
        assert(answers.count <= capacity)
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

    /// How many failures in a row of the destination the rate before its latest `run` answers
    /// (the run of failures under way) explains, at wall time `now`: 0 until the window holds
    /// `minimumAnswers` answers before the run.
    func explainedRun(
        beforeLatest run: Int, _ explanation: RetryPolicy.ExplainedFailures, nowMilliseconds now: UInt64
    ) -> Int {
        // No message is `.max`: every answer counts; the run is the newest ones, all failures.
        explained(excluding: .max, droppingFailures: run, explanation, nowMilliseconds: now)
    }

    /// How many failures in a row of message `message` the rate of the others explains
    /// (`explanation.explainedRun`), at wall time `now`: 0 until the window holds
    /// `minimumAnswers` answers to others.
    func explainedFailures(
        of message: UInt64, _ explanation: RetryPolicy.ExplainedFailures, nowMilliseconds now: UInt64
    ) -> Int {
        explained(excluding: message, droppingFailures: 0, explanation, nowMilliseconds: now)
    }

    /// The explained run at the rate of the window's answers not to `message`, less `dropped`
    /// failures taken out of both counts.
    private func explained(
        excluding message: UInt64, droppingFailures dropped: Int, _ explanation: RetryPolicy.ExplainedFailures,
        nowMilliseconds now: UInt64
    ) -> Int {
        guard explanation.isEnabled else { return 0 }
        let age = NextDue.milliseconds(explanation.windowDuration)
        let (counted, failures) = count(excluding: message, since: now - min(now, age))
        let answers = counted - min(counted, dropped), failed = failures - min(failures, dropped)
        guard answers >= explanation.minimumAnswers else { return 0 }
        return explanation.explainedRun(failureRate: Double(failed) / Double(answers))
    }
}
