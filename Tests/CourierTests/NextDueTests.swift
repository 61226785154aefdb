@testable @_spi(CourierTesting) import CourierKit
import Foundation
import Testing

/// The one rule that decides when a message is next due (`NextDue`), read as its table: each
/// row an outcome, who made the attempt, what its destination said, and what comes next.
@Suite struct NextDueTests {
    static let now: UInt64 = 1_000_000
    /// No jitter, 1 s × 2ⁿ⁻¹ capped at 300 s, Retry-After capped at 1 h.
    static let policy = RetryPolicy(jitter: .none)

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var outcome: DeliveryOutcome
        var attempt = 1
        var byUpload = false
        var limited = false
        var retryAfterSeconds: Int? = nil
        var policy = NextDueTests.policy
        var sinceSend: Duration = .zero
        var expected: NextDue.Verdict
        var testDescription: String { name }
    }

    /// An attempt's end as the core hands it to the rule, `sinceSend` after its message was sent.
    static func ending(
        _ outcome: DeliveryOutcome, attempt: Int, byUpload: Bool = false, sinceSend: Duration = .zero,
        retryAfter: Duration? = nil, random: UInt64
    ) -> Ending {
        Ending(
            attempt: Attempt(id: MessageID(), number: attempt), outcome: outcome,
            createdMilliseconds: now - NextDue.milliseconds(sinceSend),
            runner: byUpload ? .upload(ticket: 1) : .engine(token: 1), retryAfter: retryAfter, random: random)
    }

    static func retry(inSeconds seconds: Int, foregroundOnly: Bool = false) -> NextDue.Verdict {
        .retry(dueMilliseconds: now + UInt64(seconds) * 1000, delay: .seconds(seconds), foregroundOnly: foregroundOnly)
    }

    static let rows: [Row] = [
        Row(name: "2xx: delivered", outcome: .response(status: 201), expected: .delivered(status: 201)),
        Row(
            name: "a 500: the policy's backoff", outcome: .response(status: 500), attempt: 3,
            expected: retry(inSeconds: 4)),
        Row(
            name: "a timeout: the policy's backoff", outcome: .failure(TransportFailure(.timeout, "t")),
            expected: retry(inSeconds: 1)),
        Row(
            name: "a 503 asking more than backoff: the server's wait",
            outcome: .response(status: 503, retryAfter: "30"), retryAfterSeconds: 30, expected: retry(inSeconds: 30)),
        Row(
            name: "a 429 asking less than backoff: backoff", outcome: .response(status: 429, retryAfter: "1"),
            attempt: 4, retryAfterSeconds: 1, expected: retry(inSeconds: 8)),
        Row(
            name: "busy, not failing (limited), with Retry-After: that wait, not backoff",
            outcome: .response(status: 503, retryAfter: "5"), attempt: 6, limited: true, retryAfterSeconds: 5,
            expected: retry(inSeconds: 5)),
        Row(
            name: "busy, not failing (limited), no Retry-After: due now, paced by the destination",
            outcome: .response(status: 429), attempt: 6, limited: true, expected: retry(inSeconds: 0)),
        Row(
            name: "a 401 from an upload: due now, foreground only", outcome: .response(status: 401), attempt: 2,
            byUpload: true, expected: retry(inSeconds: 0, foregroundOnly: true)),
        Row(
            name: "a 401 from the engine: backoff", outcome: .response(status: 401), attempt: 2,
            expected: retry(inSeconds: 2)),
        Row(
            name: "the last of maximumAttempts: abandoned", outcome: .response(status: 500), attempt: 3,
            policy: RetryPolicy(jitter: .none, maximumAttempts: 3),
            expected: .giveUp(reason: .attemptsExhausted(attempts: 3, lastOutcome: .response(status: 500)))),
        Row(
            name: "limited, but the policy gives up: abandoned", outcome: .response(status: 503), attempt: 2,
            limited: true, policy: RetryPolicy(jitter: .none, maximumAttempts: 2),
            expected: .giveUp(reason: .attemptsExhausted(attempts: 2, lastOutcome: .response(status: 503)))),
        Row(
            name: "a 401 from an upload under a policy that gives up on it: abandoned",
            outcome: .response(status: 401), byUpload: true,
            policy: {
                var p = RetryPolicy(jitter: .none, classifier: .giveUpOnClientErrors)
                p.retriesUnauthorized = false
                return p
            }(),
            expected: .giveUp(reason: .clientError(status: 401))),
        Row(
            name: "past expiry: abandoned", outcome: .response(status: 500), attempt: 2,
            policy: RetryPolicy(jitter: .none, expiry: .seconds(60)), sinceSend: .seconds(59),
            expected: .giveUp(reason: .expired(expiry: .seconds(60), lastOutcome: .response(status: 500)))),
    ]

    @Test(arguments: rows)
    func theRuleDecides(row: Row) {
        let ending = Self.ending(
            row.outcome, attempt: row.attempt, byUpload: row.byUpload, sinceSend: row.sinceSend,
            retryAfter: row.retryAfterSeconds.map { .seconds($0) }, random: 7)
        #expect(NextDue.after(ending, destinationLimited: row.limited, policy: row.policy, nowMilliseconds: Self.now)
                == row.expected)
    }

    /// Jitter comes from the value drawn outside the lock: the same value, the same delay, and
    /// full jitter stays below the cap.
    /// The words the log records for each reason, and a later run's `CourierError` repeats.
    @Test func eachAbandonReasonSaysWhyInWords() {
        let last = DeliveryOutcome.response(status: 500)
        #expect(AbandonReason.clientError(status: 404).description
                == "HTTP 404 is a client error (policy gives up on 4xx)")
        #expect(AbandonReason.attemptsExhausted(attempts: 3, lastOutcome: last).description
                == "3 attempts, the maximum; last: HTTP 500")
        #expect(AbandonReason.expired(expiry: .seconds(60), lastOutcome: last).description
                == "expired: next try would be past 60.0 seconds since send; last: HTTP 500")
    }

    @Test func jitterIsSeededByTheEndingsRandomValue() {
        let policy = RetryPolicy(jitter: .full)
        func due(_ random: UInt64) -> NextDue.Verdict {
            let ending = Self.ending(.response(status: 500), attempt: 5, random: random)
            return NextDue.after(ending, destinationLimited: false, policy: policy, nowMilliseconds: Self.now)
        }
        #expect(due(1) == due(1))
        var dues: Set<UInt64> = []
        for seed in UInt64(0)..<50 {
            guard case .retry(let dueMilliseconds, _, _) = due(seed) else { Issue.record("not a retry"); return }
            #expect(dueMilliseconds <= Self.now + 16_000)
            dues.insert(dueMilliseconds)
        }
        #expect(dues.count > 10, "other seeds, other delays: \(dues.count) distinct of 50")
    }

    @Test func anUnreadableRecordIsReadAgainAfterMaximumDelay() {
        #expect(NextDue.afterUnreadableRecord(policy: Self.policy, nowMilliseconds: Self.now) == Self.now + 300_000)
    }

    @Test func atOpenDueTimesAreHeldToTheCurrentPolicy() {
        let limits = NextDue.limitsAtOpen(policy: Self.policy, nowMilliseconds: Self.now)
        #expect(limits.backoff == Self.now + 300_000)
        #expect(limits.retryAfter == Self.now + 3_600_000)
    }

    /// `Retry-After` (which the engine reads once per outcome, for the message and its
    /// destination) is clamped to `retryAfterLimit`, and read only on a 429 or 503.
    @Test func retryAfterIsClampedAndReadOnlyOnA429OrA503() {
        let now = Date(timeIntervalSince1970: 1_763_740_800)
        #expect(Self.policy.retryAfter(of: .response(status: 503, retryAfter: "7200"), now: now) == .seconds(3600))
        #expect(Self.policy.retryAfter(of: .response(status: 429, retryAfter: "12"), now: now) == .seconds(12))
        #expect(Self.policy.retryAfter(of: .response(status: 500, retryAfter: "12"), now: now) == nil)
        #expect(Self.policy.retryAfter(of: .response(status: 503, retryAfter: "soon"), now: now) == nil)
    }
}
