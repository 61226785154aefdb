import CourierLog

// The values one attempt's round passes along: what the scheduler took (`Attempt`), how it
// ended (`Ending`), and what was gathered of it outside the core's lock (`JudgedEnding`); what
// recording it answers is the core's `Reply`.

/// One attempt the engine is to make: which message, and which attempt of it.
struct Attempt: Sendable {
    var id: MessageID
    var number: Int
    /// When it was taken (wall ms): its outcome says nothing new to the concurrency policy if
    /// the policy cut the limit since.
    var startedMilliseconds: UInt64 = 0
    /// Its full state, if the core kept it in memory when the attempt was taken (in the same
    /// critical section): the runner then neither reads the log nor takes the lock again. The
    /// attempt is in flight from that moment, so a `cancel` after it lets this POST go, as
    /// `cancel` documents for an attempt in flight (its outcome is ignored).
    var message: MessageState? = nil
}

/// How an attempt or an upload ended, to record (`Courier.record(_:)`).
struct Ending: Sendable {
    var attempt: Attempt
    var outcome: DeliveryOutcome
    /// When the message was created (wall ms): `RetryPolicy.expiry` judges by its age.
    var createdMilliseconds: UInt64
    var runner: Runner
    /// The destination, for the log line (nil: not read, as for a delivered upload).
    var url: String?

    /// Who made the attempt.
    enum Runner: Sendable {
        /// The engine, in the delivery slot of this token.
        case engine(token: UInt64)
        /// A background upload task, of the hand-off with this ticket.
        case upload(ticket: UInt64)
    }
}

/// An ending with what is known of it outside the lock, ready to commit.
struct JudgedEnding: Sendable {
    var ending: Ending
    var instant: EngineInstant
    /// What the one rule (`NextDue`) decides from, under the lock.
    var facts: NextDue.Facts
    /// Seeds the probe delay's jitter, if the attempt was its destination's probe.
    var probeRandom: UInt64
    /// Whether the engine's runner may make the next attempt (its task is not cancelled).
    var continuing: Bool
}
