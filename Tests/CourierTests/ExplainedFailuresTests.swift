@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import Foundation
import Testing

/// The backoff exponent counts only the failures that the destination's own failure rate does
/// not explain (`RetryPolicy.ExplainedFailures`), on the manual clock: an unlucky message on a
/// server failing half of all requests retries every second, a poison message beside healthy
/// traffic backs off exactly as without the rule.
@Suite struct ExplainedFailuresTests {
    @Test func theExplainedRunIsTheLongestRunOneInAThousandLikely() {
        let rule = RetryPolicy.ExplainedFailures()
        #expect(rule.explainedRun(failureRate: 0) == 0, "nothing fails: nothing is luck")
        #expect(rule.explainedRun(failureRate: 0.1) == 3)
        #expect(rule.explainedRun(failureRate: 0.5) == 9)
        #expect(rule.explainedRun(failureRate: 0.9) == 65)
        #expect(rule.explainedRun(failureRate: 0.995) == 687, "clamped to 0.99: the budget bounds that load")
        #expect(rule.explainedRun(failureRate: 1) == 0, "no other message got through: down, not unlucky")
        #expect(RetryPolicy.ExplainedFailures.disabled.explainedRun(failureRate: 0.5) == 0)
        #expect(RetryPolicy.ExplainedFailures(chance: 0.01).explainedRun(failureRate: 0.5) == 6)
    }

    @Test func theWindowLeavesOutTheMessagesOwnAnswersAndOldOnes() {
        var window = AnswerWindow(capacity: 4)
        window.record(message: 1, failed: true, nowMilliseconds: 1_000)
        window.record(message: 2, failed: false, nowMilliseconds: 2_000)
        window.record(message: 3, failed: true, nowMilliseconds: 3_000)
        #expect(window.count(excluding: 1, since: 0) == (answers: 2, failures: 1))
        #expect(window.count(excluding: 9, since: 2_000) == (answers: 2, failures: 1), "older ones left out")
        for t in 0..<4 { window.record(message: 4, failed: false, nowMilliseconds: 4_000 + UInt64(t)) }
        #expect(window.count(excluding: 9, since: 0) == (answers: 4, failures: 0), "at most `capacity` kept")
    }

    @Test func tooFewAnswersExplainNothing() {
        var window = AnswerWindow(capacity: 128)
        for n in 0..<15 { window.record(message: UInt64(n), failed: n % 2 == 0, nowMilliseconds: 1_000) }
        let rule = RetryPolicy.ExplainedFailures()
        #expect(window.explainedFailures(of: 99, rule, nowMilliseconds: 1_000) == 0)
        window.record(message: 15, failed: false, nowMilliseconds: 1_000)
        #expect(window.explainedFailures(of: 99, rule, nowMilliseconds: 1_000) == 9, "16 answers, half failed")
        #expect(window.explainedFailures(of: 99, rule, nowMilliseconds: 1_000 + 600_001) == 0, "all too old")
    }

    @Test func aFailureRunIsAlwaysBackedOffFromTheFirstNotExplainedFailure() {
        let policy = RetryPolicy(jitter: .none)
        var random = ClosureRandom(source: SeededRandomSource(seed: 1).next)
        let now = Date(timeIntervalSince1970: 0)
        for (attempt, explained, seconds) in [(1, 9, 1.0), (10, 9, 1), (11, 9, 2), (12, 9, 4), (3, 0, 4), (3, 50, 1)] {
            let decision = policy.decide(
                .response(status: 500), attempt: attempt, sinceSend: .zero, now: now, explainedFailures: explained,
                using: &random)
            #expect(decision == .retry(after: .seconds(seconds)), "attempt \(attempt), \(explained) explained")
        }
    }

    /// I5: explained failures shorten a message's own backoff, never a server's `Retry-After`.
    @Test func aRetryAfterIsNeverShortenedByExplainedFailures() {
        let policy = RetryPolicy(jitter: .none)
        var random = ClosureRandom(source: SeededRandomSource(seed: 1).next)
        let decision = policy.decide(
            .response(status: 503, retryAfter: "30"), attempt: 12, sinceSend: .zero,
            now: Date(timeIntervalSince1970: 0), explainedFailures: 9, using: &random)
        #expect(decision == .retry(after: .seconds(30)), "the server's 30 s, not the 4 s of attempt 3")
    }

    /// Gaps, in seconds, between the attempts of one message that always fails, sent after 40
    /// others to the same destination: with `othersFailFirst`, each of those fails its first
    /// attempt and succeeds its second (a destination failing half of all requests); otherwise
    /// each succeeds at once.
    func gapsOfAFailingMessage(othersFailFirst: Bool, attempts: Int) async throws -> [Double] {
        let clock = ManualClock()
        let times = Locked<[Duration]>([])
        let transport = ScriptedTransport { request in
            let body = String(decoding: request.body, as: UTF8.self)
            if body.contains("unlucky") {
                times.withLock { $0.append(clock.now.offset) }
                return .response(status: 500)
            }
            return othersFailFirst && request.attempt == 1 ? .response(status: 500) : .response(status: 200)
        }
        var config = testConfiguration(clock: clock, transport: transport)
        config.destinationBackoff = .disabled  // this rule alone (probes: DestinationBackoffTests)
        config.concurrencyLimit = .fixed
        let courier = try Courier(directory: TemporaryDirectory().url, configuration: config)
        for n in 0..<40 { try courier.send(["other": n], to: inbox) }
        try courier.send(["m": "unlucky"], to: inbox)
        // Bounded: a 250 ms step up to 10 minutes of virtual time.
        for _ in 0..<2_400 where times.withLock({ $0.count }) < attempts {
            await courier.settle()
            await clock.advance(by: .milliseconds(250))
        }
        await courier.close()
        let seen = times.withLock { $0 }
        try #require(seen.count >= attempts)
        return zip(seen, seen.dropFirst()).prefix(attempts - 1).map { ($1 - $0).seconds }
    }

    @Test func anUnluckyMessageOnAServerFailingHalfTheTimeRetriesEverySecond() async throws {
        let gaps = try await gapsOfAFailingMessage(othersFailFirst: true, attempts: 13)
        // e = 9 at a 50% rate: the delay after each of the first 10 failures is 1 s, then 2 s, 4 s.
        #expect(gaps == Array(repeating: 1, count: 10) + [2, 4], "\(gaps)")
    }

    @Test func aPoisonMessageBesideHealthyTrafficBacksOffAsWithoutTheRule() async throws {
        let gaps = try await gapsOfAFailingMessage(othersFailFirst: false, attempts: 8)
        #expect(gaps == [1, 2, 4, 8, 16, 32, 64], "\(gaps)")
    }
}
