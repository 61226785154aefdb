@testable @_spi(CourierTesting) import CourierKit
import CourierTesting
import Foundation
import Testing

@Suite struct RetryPolicyTests {
    let now = Date(timeIntervalSince1970: 1_763_740_800)

    @Test func backoffForAttempts1To40FollowsTheFormulaAndRespectsTheCap() {
        let policy = RetryPolicy()  // 1 s × 2^(n-1), capped at 300 s
        for attempt in 1...40 {
            let expected = min(300, pow(2, Double(attempt - 1)))
            #expect(abs(policy.backoff(attempt: attempt).seconds - expected) < 1e-9, "attempt \(attempt)")
        }
        #expect(policy.backoff(attempt: 10_000) == .seconds(300), "huge attempts do not overflow")
    }

    @Test func fullJitterStaysWithinZeroAndTheCapForASeededGenerator() {
        let policy = RetryPolicy()
        var random = ClosureRandom(source: SeededRandomSource(seed: 1).next)
        var sawLow = false, sawHigh = false
        for attempt in 1...40 {
            for _ in 0..<50 {
                guard case .retry(let delay) = policy.decide(.response(status: 500), attempt: attempt, sinceSend: .zero,
                                                             now: now, using: &random) else {
                    Issue.record("500 must be retried"); return
                }
                let cap = policy.backoff(attempt: attempt)
                #expect(delay >= .zero && delay <= cap)
                if delay < cap * 0.1 { sawLow = true }
                if delay > cap * 0.9 { sawHigh = true }
            }
        }
        #expect(sawLow && sawHigh, "full jitter spans the whole range")
    }

    @Test func equalJitterNeverGoesBelowHalf() {
        let policy = RetryPolicy(jitter: .equal)
        var random = ClosureRandom(source: SeededRandomSource(seed: 2).next)
        for attempt in 1...20 {
            let cap = policy.backoff(attempt: attempt)
            let delay = policy.jittered(cap, using: &random)
            #expect(delay >= cap / 2 && delay <= cap)
        }
    }

    @Test func retryAfterParsesSecondsAndHTTPDatesAndRejectsGarbage() {
        #expect(RetryAfter.parse("120", now: now) == .seconds(120))
        #expect(RetryAfter.parse(" 7 ", now: now) == .seconds(7))
        #expect(RetryAfter.parse("Fri, 21 Nov 2025 16:02:00 GMT", now: now) == .seconds(120))
        #expect(RetryAfter.parse("Friday, 21-Nov-25 16:01:00 GMT", now: now) == .seconds(60))
        #expect(RetryAfter.parse("Fri Nov 21 16:00:30 2025", now: now) == .seconds(30))
        #expect(RetryAfter.parse("Thu, 01 Jan 1970 00:00:00 GMT", now: now) == .zero, "a past date means now")
        for garbage in ["", "soon", "-5", "1.5", "12abc", "Fri, 99 Nov 2025 16:02:00 GMT"] {
            #expect(RetryAfter.parse(garbage, now: now) == nil, "\(garbage)")
        }
    }

    @Test func retryAfterOn429And503IsALowerBoundClampedToTheLimit() {
        let policy = RetryPolicy(jitter: .none, retryAfterLimit: .seconds(600))
        var random = ClosureRandom(source: SeededRandomSource(seed: 3).next)
        func delay(_ status: Int, _ header: String?) -> Duration? {
            if case .retry(let d) = policy.decide(.response(status: status, retryAfter: header), attempt: 1,
                                                  sinceSend: .zero, now: now, using: &random) { return d }
            return nil
        }
        #expect(delay(429, "120") == .seconds(120))
        #expect(delay(503, "120") == .seconds(120))
        #expect(delay(503, "0") == .seconds(1), "a lower bound never shortens the backoff")
        #expect(delay(429, "86400") == .seconds(600), "clamped to retryAfterLimit")
        #expect(delay(500, "120") == .seconds(1), "only 429 and 503 carry Retry-After")
        #expect(delay(429, "garbage") == .seconds(1))
    }

    @Test func theDefaultClassifierRetriesEverythingButSuccess() {
        let policy = RetryPolicy()
        var random = ClosureRandom(source: SeededRandomSource(seed: 4).next)
        for status in [100, 301, 400, 401, 404, 408, 422, 425, 429, 500, 502, 503] {
            guard case .retry = policy.decide(.response(status: status), attempt: 1, sinceSend: .zero, now: now,
                                              using: &random)
            else {
                Issue.record("\(status) must be retried by default"); continue
            }
        }
        for kind: TransportFailure.Kind in [.timeout, .connectionClosed, .connectionFailed, .tls, .other] {
            let decision = policy.decide(.failure(TransportFailure(kind, "x")), attempt: 1, sinceSend: .zero, now: now,
                                         using: &random)
            guard case .retry = decision else { Issue.record("\(kind) must be retried"); continue }
        }
        for status in [200, 201, 204, 299] {
            #expect(policy.decide(.response(status: status), attempt: 1, sinceSend: .zero, now: now, using: &random)
                    == .delivered)
        }
    }

    /// The Idempotency-Key draft's "still being processed": never a reason to give up, under any
    /// classifier; only `maximumAttempts` or `expiry` end it, as any outcome.
    @Test func a409IsRetriedUnderEveryClassifier() {
        var random = ClosureRandom(source: SeededRandomSource(seed: 5).next)
        for classifier in [RetryPolicy.Classifier.retryEverything, .giveUpOnClientErrors] {
            var policy = RetryPolicy(classifier: classifier)
            policy.retriesUnauthorized = false
            for attempt in [1, 10, 100] {
                guard case .retry = policy.decide(.response(status: 409), attempt: attempt, sinceSend: .zero,
                                                  now: now, using: &random)
                else {
                    Issue.record("409 must be retried under \(classifier), attempt \(attempt)"); continue
                }
            }
        }
        let bounded = RetryPolicy(maximumAttempts: 3, classifier: .giveUpOnClientErrors)
        #expect(bounded.decide(.response(status: 409), attempt: 3, sinceSend: .zero, now: now, using: &random)
                == .giveUp(reason: .attemptsExhausted(attempts: 3, lastOutcome: .response(status: 409))))
    }

    @Test func theClientErrorClassifierGivesUpOnPermanent4xxOnly() {
        let policy = RetryPolicy(classifier: .giveUpOnClientErrors)
        var random = ClosureRandom(source: SeededRandomSource(seed: 5).next)
        for status in [400, 403, 404, 410, 422] {
            guard case .giveUp = policy.decide(.response(status: status), attempt: 1, sinceSend: .zero, now: now,
                                              using: &random)
            else {
                Issue.record("\(status) must give up"); continue
            }
        }
        // 401 is retried: `prepareRequest` may bring fresh credentials (`retriesUnauthorized`).
        // 409: a request with this key is still being processed (the Idempotency-Key draft).
        for status in [401, 408, 409, 425, 429, 500, 503] {
            guard case .retry = policy.decide(.response(status: status), attempt: 1, sinceSend: .zero, now: now,
                                              using: &random)
            else {
                Issue.record("\(status) must be retried"); continue
            }
        }
    }

    @Test func maximumAttemptsAndExpiryGiveUp() {
        var random = ClosureRandom(source: SeededRandomSource(seed: 6).next)
        let limited = RetryPolicy(jitter: .none, maximumAttempts: 3)
        guard case .retry = limited.decide(.response(status: 500), attempt: 2, sinceSend: .zero, now: now,
                                           using: &random),
              case .giveUp = limited.decide(.response(status: 500), attempt: 3, sinceSend: .zero, now: now,
                                            using: &random)
        else { Issue.record("maximumAttempts"); return }
        let expiring = RetryPolicy(jitter: .none, expiry: .seconds(60))
        guard case .retry = expiring.decide(.response(status: 500), attempt: 1, sinceSend: .seconds(58), now: now,
                                            using: &random),
              case .giveUp = expiring.decide(.response(status: 500), attempt: 1, sinceSend: .seconds(59.5), now: now,
                                             using: &random)
        else { Issue.record("expiry"); return }
    }
}
